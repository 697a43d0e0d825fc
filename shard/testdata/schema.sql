-- The schema of the scanner's tests: three colocations (files, comments,
-- orgs by org_id/id bigint; docs by slug text; sessions by sid uuid) and
-- one unsharded table (plans).
CREATE TABLE orgs (id bigint PRIMARY KEY, name text);
CREATE TABLE files (org_id bigint, id bigint, name text, size int, created timestamptz, deleted bool, kind text, plan int, x int, UNIQUE (org_id, id));
CREATE TABLE comments (org_id bigint, id bigint, file_id bigint, body text, x int);
CREATE TABLE docs (slug text PRIMARY KEY, body text, rev int);
CREATE TABLE sessions (sid uuid PRIMARY KEY, user_id bigint);
CREATE TABLE plans (id int PRIMARY KEY, name text);
