-- Valid statements (PostgreSQL 15 runs each against shard/testdata/schema.sql)
-- that name a sharded table in a shape whose shard the router cannot decide
-- exactly: each must be refused (0A000), never routed, never 42601.
SELECT id, name FROM files
SELECT id, name FROM ONLY files
SELECT id, name FROM files ORDER BY 1 LIMIT 10
SELECT count(*) FROM files
SELECT id, name FROM public.files OFFSET 5
SELECT * FROM files
SELECT * FROM ONLY files
SELECT * FROM files ORDER BY 1 LIMIT 10
SELECT * FROM public.files OFFSET 5
SELECT body FROM comments
SELECT body FROM ONLY comments
SELECT body FROM comments ORDER BY 1 LIMIT 10
SELECT count(*) FROM comments
SELECT body FROM public.comments OFFSET 5
SELECT name FROM orgs
SELECT name FROM ONLY orgs
SELECT name FROM orgs ORDER BY 1 LIMIT 10
SELECT count(*) FROM orgs
SELECT name FROM public.orgs OFFSET 5
SELECT slug, rev FROM docs
SELECT slug, rev FROM ONLY docs
SELECT slug, rev FROM docs ORDER BY 1 LIMIT 10
SELECT count(*) FROM docs
SELECT slug, rev FROM public.docs OFFSET 5
SELECT user_id FROM sessions
SELECT user_id FROM ONLY sessions
SELECT user_id FROM sessions ORDER BY 1 LIMIT 10
SELECT count(*) FROM sessions
SELECT user_id FROM public.sessions OFFSET 5
SELECT * FROM files WHERE name = 'a'
UPDATE files SET name = 'x' WHERE name = 'a'
DELETE FROM files WHERE name = 'a'
SELECT * FROM files f WHERE f.name = 'a' AND f.org_id > 0
SELECT * FROM files WHERE size = 10
UPDATE files SET name = 'x' WHERE size = 10
DELETE FROM files WHERE size = 10
SELECT * FROM files f WHERE f.size = 10 AND f.org_id > 0
SELECT * FROM files WHERE deleted = true
UPDATE files SET name = 'x' WHERE deleted = true
DELETE FROM files WHERE deleted = true
SELECT * FROM files f WHERE f.deleted = true AND f.org_id > 0
SELECT * FROM files WHERE kind = 'pdf'
UPDATE files SET name = 'x' WHERE kind = 'pdf'
DELETE FROM files WHERE kind = 'pdf'
SELECT * FROM files f WHERE f.kind = 'pdf' AND f.org_id > 0
SELECT * FROM files WHERE id = 5
UPDATE files SET name = 'x' WHERE id = 5
DELETE FROM files WHERE id = 5
SELECT * FROM files f WHERE f.id = 5 AND f.org_id > 0
SELECT * FROM files WHERE org_id = 1 OR org_id = 42
SELECT * FROM files WHERE org_id = 1 OR org_id = -7
SELECT * FROM files WHERE org_id = 1 OR org_id = 1000000007
SELECT * FROM files WHERE org_id = 42 OR org_id = 1
SELECT * FROM files WHERE org_id = 42 OR org_id = -7
SELECT * FROM files WHERE org_id = 42 OR org_id = 1000000007
SELECT * FROM files WHERE org_id = -7 OR org_id = 1
SELECT * FROM files WHERE org_id = -7 OR org_id = 42
SELECT * FROM files WHERE org_id = -7 OR org_id = 1000000007
SELECT * FROM files WHERE org_id = 1000000007 OR org_id = 1
SELECT * FROM files WHERE org_id = 1000000007 OR org_id = 42
SELECT * FROM files WHERE org_id = 1000000007 OR org_id = -7
SELECT * FROM files WHERE org_id = 1 OR deleted
UPDATE files SET size = 0 WHERE org_id = 1 OR size IS NULL
DELETE FROM comments WHERE org_id = 1 OR body = ''
SELECT * FROM files WHERE deleted OR org_id = 1 AND kind = 'x'
SELECT * FROM files WHERE org_id = 42 OR deleted
UPDATE files SET size = 0 WHERE org_id = 42 OR size IS NULL
DELETE FROM comments WHERE org_id = 42 OR body = ''
SELECT * FROM files WHERE deleted OR org_id = 42 AND kind = 'x'
SELECT * FROM files WHERE org_id = -7 OR deleted
UPDATE files SET size = 0 WHERE org_id = -7 OR size IS NULL
DELETE FROM comments WHERE org_id = -7 OR body = ''
SELECT * FROM files WHERE deleted OR org_id = -7 AND kind = 'x'
SELECT * FROM files WHERE org_id = 1000000007 OR deleted
UPDATE files SET size = 0 WHERE org_id = 1000000007 OR size IS NULL
DELETE FROM comments WHERE org_id = 1000000007 OR body = ''
SELECT * FROM files WHERE deleted OR org_id = 1000000007 AND kind = 'x'
SELECT * FROM files WHERE org_id > 1
SELECT * FROM files WHERE org_id < 1
SELECT * FROM files WHERE org_id >= 1
SELECT * FROM files WHERE org_id <= 1
SELECT * FROM files WHERE org_id <> 1
SELECT * FROM files WHERE org_id != 1
SELECT * FROM files WHERE org_id BETWEEN 1 AND 1
SELECT * FROM files WHERE NOT org_id = 1
SELECT * FROM files WHERE org_id = 1 + 0
SELECT * FROM files WHERE org_id = abs(1)
SELECT * FROM files WHERE org_id::text = '1'
SELECT * FROM files WHERE org_id = 1.0
SELECT * FROM files WHERE org_id = '1'::numeric
SELECT * FROM files WHERE org_id = ((1))
SELECT * FROM files WHERE (org_id = 1)
SELECT * FROM files WHERE org_id = ANY(ARRAY[1, 2])
SELECT * FROM files WHERE org_id IN (1, 2) IS NOT FALSE
SELECT * FROM files WHERE org_id = 1 IS TRUE
SELECT * FROM files WHERE coalesce(org_id, 0) = 1
SELECT * FROM files WHERE org_id NOT IN (1)
SELECT * FROM files WHERE org_id IS DISTINCT FROM 1
SELECT * FROM files WHERE org_id > 42
SELECT * FROM files WHERE org_id < 42
SELECT * FROM files WHERE org_id >= 42
SELECT * FROM files WHERE org_id <= 42
SELECT * FROM files WHERE org_id <> 42
SELECT * FROM files WHERE org_id != 42
SELECT * FROM files WHERE org_id BETWEEN 42 AND 42
SELECT * FROM files WHERE NOT org_id = 42
SELECT * FROM files WHERE org_id = 42 + 0
SELECT * FROM files WHERE org_id = abs(42)
SELECT * FROM files WHERE org_id::text = '42'
SELECT * FROM files WHERE org_id = 42.0
SELECT * FROM files WHERE org_id = '42'::numeric
SELECT * FROM files WHERE org_id = ((42))
SELECT * FROM files WHERE (org_id = 42)
SELECT * FROM files WHERE org_id = ANY(ARRAY[42, 2])
SELECT * FROM files WHERE org_id IN (42, 2) IS NOT FALSE
SELECT * FROM files WHERE org_id = 42 IS TRUE
SELECT * FROM files WHERE coalesce(org_id, 0) = 42
SELECT * FROM files WHERE org_id NOT IN (42)
SELECT * FROM files WHERE org_id IS DISTINCT FROM 42
SELECT * FROM files WHERE org_id > -7
SELECT * FROM files WHERE org_id < -7
SELECT * FROM files WHERE org_id >= -7
SELECT * FROM files WHERE org_id <= -7
SELECT * FROM files WHERE org_id <> -7
SELECT * FROM files WHERE org_id != -7
SELECT * FROM files WHERE org_id BETWEEN -7 AND -7
SELECT * FROM files WHERE NOT org_id = -7
SELECT * FROM files WHERE org_id = -7 + 0
SELECT * FROM files WHERE org_id = abs(-7)
SELECT * FROM files WHERE org_id::text = '-7'
SELECT * FROM files WHERE org_id = -7.0
SELECT * FROM files WHERE org_id = '-7'::numeric
SELECT * FROM files WHERE org_id = ((-7))
SELECT * FROM files WHERE (org_id = -7)
SELECT * FROM files WHERE org_id = ANY(ARRAY[-7, 2])
SELECT * FROM files WHERE org_id IN (-7, 2) IS NOT FALSE
SELECT * FROM files WHERE org_id = -7 IS TRUE
SELECT * FROM files WHERE coalesce(org_id, 0) = -7
SELECT * FROM files WHERE org_id NOT IN (-7)
SELECT * FROM files WHERE org_id IS DISTINCT FROM -7
SELECT * FROM files WHERE org_id > 1000000007
SELECT * FROM files WHERE org_id < 1000000007
SELECT * FROM files WHERE org_id >= 1000000007
SELECT * FROM files WHERE org_id <= 1000000007
SELECT * FROM files WHERE org_id <> 1000000007
SELECT * FROM files WHERE org_id != 1000000007
SELECT * FROM files WHERE org_id BETWEEN 1000000007 AND 1000000007
SELECT * FROM files WHERE NOT org_id = 1000000007
SELECT * FROM files WHERE org_id = 1000000007 + 0
SELECT * FROM files WHERE org_id = abs(1000000007)
SELECT * FROM files WHERE org_id::text = '1000000007'
SELECT * FROM files WHERE org_id = 1000000007.0
SELECT * FROM files WHERE org_id = '1000000007'::numeric
SELECT * FROM files WHERE org_id = ((1000000007))
SELECT * FROM files WHERE (org_id = 1000000007)
SELECT * FROM files WHERE org_id = ANY(ARRAY[1000000007, 2])
SELECT * FROM files WHERE org_id IN (1000000007, 2) IS NOT FALSE
SELECT * FROM files WHERE org_id = 1000000007 IS TRUE
SELECT * FROM files WHERE coalesce(org_id, 0) = 1000000007
SELECT * FROM files WHERE org_id NOT IN (1000000007)
SELECT * FROM files WHERE org_id IS DISTINCT FROM 1000000007
SELECT * FROM files WHERE org_id IN (SELECT id FROM orgs WHERE id = 1)
SELECT * FROM files WHERE org_id = 1 AND EXISTS (SELECT 1 FROM comments c WHERE c.org_id = files.org_id)
SELECT (SELECT name FROM orgs WHERE id = 1) AS o, name FROM files WHERE org_id = 1
SELECT * FROM (SELECT * FROM files WHERE org_id = 1) s
SELECT * FROM files WHERE org_id = (SELECT 1)
UPDATE files SET size = (SELECT count(*) FROM comments WHERE org_id = 1) WHERE org_id = 1
DELETE FROM files WHERE org_id = 1 AND id IN (SELECT file_id FROM comments WHERE org_id = 1)
INSERT INTO files (org_id, id, name) VALUES (1, (SELECT max(id) FROM files), 'x')
SELECT * FROM plans WHERE id IN (SELECT size FROM files WHERE org_id = 1)
SELECT * FROM files WHERE org_id IN (SELECT id FROM orgs WHERE id = 42)
SELECT * FROM files WHERE org_id = 42 AND EXISTS (SELECT 1 FROM comments c WHERE c.org_id = files.org_id)
SELECT (SELECT name FROM orgs WHERE id = 42) AS o, name FROM files WHERE org_id = 42
SELECT * FROM (SELECT * FROM files WHERE org_id = 42) s
SELECT * FROM files WHERE org_id = (SELECT 42)
UPDATE files SET size = (SELECT count(*) FROM comments WHERE org_id = 42) WHERE org_id = 42
DELETE FROM files WHERE org_id = 42 AND id IN (SELECT file_id FROM comments WHERE org_id = 42)
INSERT INTO files (org_id, id, name) VALUES (42, (SELECT max(id) FROM files), 'x')
SELECT * FROM plans WHERE id IN (SELECT size FROM files WHERE org_id = 42)
SELECT * FROM files WHERE org_id IN (SELECT id FROM orgs WHERE id = -7)
SELECT * FROM files WHERE org_id = -7 AND EXISTS (SELECT 1 FROM comments c WHERE c.org_id = files.org_id)
SELECT (SELECT name FROM orgs WHERE id = -7) AS o, name FROM files WHERE org_id = -7
SELECT * FROM (SELECT * FROM files WHERE org_id = -7) s
SELECT * FROM files WHERE org_id = (SELECT -7)
UPDATE files SET size = (SELECT count(*) FROM comments WHERE org_id = -7) WHERE org_id = -7
DELETE FROM files WHERE org_id = -7 AND id IN (SELECT file_id FROM comments WHERE org_id = -7)
INSERT INTO files (org_id, id, name) VALUES (-7, (SELECT max(id) FROM files), 'x')
SELECT * FROM plans WHERE id IN (SELECT size FROM files WHERE org_id = -7)
SELECT * FROM files WHERE org_id IN (SELECT id FROM orgs WHERE id = 1000000007)
SELECT * FROM files WHERE org_id = 1000000007 AND EXISTS (SELECT 1 FROM comments c WHERE c.org_id = files.org_id)
SELECT (SELECT name FROM orgs WHERE id = 1000000007) AS o, name FROM files WHERE org_id = 1000000007
SELECT * FROM (SELECT * FROM files WHERE org_id = 1000000007) s
SELECT * FROM files WHERE org_id = (SELECT 1000000007)
UPDATE files SET size = (SELECT count(*) FROM comments WHERE org_id = 1000000007) WHERE org_id = 1000000007
DELETE FROM files WHERE org_id = 1000000007 AND id IN (SELECT file_id FROM comments WHERE org_id = 1000000007)
INSERT INTO files (org_id, id, name) VALUES (1000000007, (SELECT max(id) FROM files), 'x')
SELECT * FROM plans WHERE id IN (SELECT size FROM files WHERE org_id = 1000000007)
WITH x AS (SELECT * FROM files WHERE org_id = 1) SELECT * FROM x
WITH x AS (SELECT 1) SELECT * FROM files, x WHERE org_id = 1
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM files WHERE org_id = 1
WITH d AS (DELETE FROM files WHERE org_id = 1 RETURNING *) SELECT count(*) FROM d
WITH u AS (UPDATE files SET size = 1 WHERE org_id = 1 RETURNING id) SELECT * FROM u
WITH x AS (SELECT * FROM files WHERE org_id = 42) SELECT * FROM x
WITH x AS (SELECT 1) SELECT * FROM files, x WHERE org_id = 42
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM files WHERE org_id = 42
WITH d AS (DELETE FROM files WHERE org_id = 42 RETURNING *) SELECT count(*) FROM d
WITH u AS (UPDATE files SET size = 1 WHERE org_id = 42 RETURNING id) SELECT * FROM u
WITH x AS (SELECT * FROM files WHERE org_id = -7) SELECT * FROM x
WITH x AS (SELECT 1) SELECT * FROM files, x WHERE org_id = -7
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM files WHERE org_id = -7
WITH d AS (DELETE FROM files WHERE org_id = -7 RETURNING *) SELECT count(*) FROM d
WITH u AS (UPDATE files SET size = 1 WHERE org_id = -7 RETURNING id) SELECT * FROM u
WITH x AS (SELECT * FROM files WHERE org_id = 1000000007) SELECT * FROM x
WITH x AS (SELECT 1) SELECT * FROM files, x WHERE org_id = 1000000007
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM files WHERE org_id = 1000000007
WITH d AS (DELETE FROM files WHERE org_id = 1000000007 RETURNING *) SELECT count(*) FROM d
WITH u AS (UPDATE files SET size = 1 WHERE org_id = 1000000007 RETURNING id) SELECT * FROM u
SELECT id FROM files WHERE org_id = 1 UNION SELECT id FROM files WHERE org_id = 2
SELECT id FROM files WHERE org_id = 1 UNION ALL SELECT id FROM comments WHERE org_id = 1
SELECT org_id FROM files WHERE org_id = 1 INTERSECT SELECT id FROM orgs
SELECT org_id FROM files WHERE org_id = 1 EXCEPT SELECT id FROM orgs WHERE id = 1
SELECT id FROM files WHERE org_id = 42 UNION SELECT id FROM files WHERE org_id = 2
SELECT id FROM files WHERE org_id = 42 UNION ALL SELECT id FROM comments WHERE org_id = 42
SELECT org_id FROM files WHERE org_id = 42 INTERSECT SELECT id FROM orgs
SELECT org_id FROM files WHERE org_id = 42 EXCEPT SELECT id FROM orgs WHERE id = 42
SELECT id FROM files WHERE org_id = -7 UNION SELECT id FROM files WHERE org_id = 2
SELECT id FROM files WHERE org_id = -7 UNION ALL SELECT id FROM comments WHERE org_id = -7
SELECT org_id FROM files WHERE org_id = -7 INTERSECT SELECT id FROM orgs
SELECT org_id FROM files WHERE org_id = -7 EXCEPT SELECT id FROM orgs WHERE id = -7
SELECT id FROM files WHERE org_id = 1000000007 UNION SELECT id FROM files WHERE org_id = 2
SELECT id FROM files WHERE org_id = 1000000007 UNION ALL SELECT id FROM comments WHERE org_id = 1000000007
SELECT org_id FROM files WHERE org_id = 1000000007 INTERSECT SELECT id FROM orgs
SELECT org_id FROM files WHERE org_id = 1000000007 EXCEPT SELECT id FROM orgs WHERE id = 1000000007
SELECT * FROM files JOIN docs ON docs.slug = files.name WHERE files.org_id = 1
SELECT * FROM files f JOIN plans p ON p.id = f.size WHERE f.org_id = 1
SELECT * FROM files f JOIN comments c ON c.file_id = f.id WHERE f.org_id = 1
SELECT * FROM files f LEFT JOIN comments c ON c.file_id = f.id WHERE f.org_id = 1
SELECT * FROM files f, comments c WHERE f.org_id = 1
SELECT * FROM files f CROSS JOIN orgs o WHERE f.org_id = 1
SELECT * FROM files f JOIN sessions s ON s.user_id = f.id WHERE f.org_id = 1
SELECT * FROM files f JOIN comments c ON f.org_id = c.org_id OR c.id = f.id WHERE f.org_id = 1
SELECT * FROM files NATURAL JOIN comments WHERE org_id = 1
SELECT * FROM files f, LATERAL (SELECT * FROM comments c WHERE c.file_id = f.id) l WHERE f.org_id = 1
SELECT * FROM files f, generate_series(1, 3) g WHERE f.org_id = 1
SELECT * FROM files f JOIN (comments c JOIN orgs o ON o.id = c.org_id) ON c.org_id = f.org_id WHERE f.org_id = 1
SELECT * FROM files TABLESAMPLE SYSTEM (50) WHERE org_id = 1
SELECT * FROM files AS f (a, b) WHERE a = 1
UPDATE files SET name = o.name FROM orgs o WHERE files.org_id = o.id AND o.id = 1
DELETE FROM files USING orgs WHERE files.org_id = orgs.id AND orgs.id = 1
SELECT * FROM files JOIN docs ON docs.slug = files.name WHERE files.org_id = 42
SELECT * FROM files f JOIN plans p ON p.id = f.size WHERE f.org_id = 42
SELECT * FROM files f JOIN comments c ON c.file_id = f.id WHERE f.org_id = 42
SELECT * FROM files f LEFT JOIN comments c ON c.file_id = f.id WHERE f.org_id = 42
SELECT * FROM files f, comments c WHERE f.org_id = 42
SELECT * FROM files f CROSS JOIN orgs o WHERE f.org_id = 42
SELECT * FROM files f JOIN sessions s ON s.user_id = f.id WHERE f.org_id = 42
SELECT * FROM files f JOIN comments c ON f.org_id = c.org_id OR c.id = f.id WHERE f.org_id = 42
SELECT * FROM files NATURAL JOIN comments WHERE org_id = 42
SELECT * FROM files f, LATERAL (SELECT * FROM comments c WHERE c.file_id = f.id) l WHERE f.org_id = 42
SELECT * FROM files f, generate_series(1, 3) g WHERE f.org_id = 42
SELECT * FROM files f JOIN (comments c JOIN orgs o ON o.id = c.org_id) ON c.org_id = f.org_id WHERE f.org_id = 42
SELECT * FROM files TABLESAMPLE SYSTEM (50) WHERE org_id = 42
SELECT * FROM files AS f (a, b) WHERE a = 42
UPDATE files SET name = o.name FROM orgs o WHERE files.org_id = o.id AND o.id = 42
DELETE FROM files USING orgs WHERE files.org_id = orgs.id AND orgs.id = 42
SELECT * FROM files JOIN docs ON docs.slug = files.name WHERE files.org_id = -7
SELECT * FROM files f JOIN plans p ON p.id = f.size WHERE f.org_id = -7
SELECT * FROM files f JOIN comments c ON c.file_id = f.id WHERE f.org_id = -7
SELECT * FROM files f LEFT JOIN comments c ON c.file_id = f.id WHERE f.org_id = -7
SELECT * FROM files f, comments c WHERE f.org_id = -7
SELECT * FROM files f CROSS JOIN orgs o WHERE f.org_id = -7
SELECT * FROM files f JOIN sessions s ON s.user_id = f.id WHERE f.org_id = -7
SELECT * FROM files f JOIN comments c ON f.org_id = c.org_id OR c.id = f.id WHERE f.org_id = -7
SELECT * FROM files NATURAL JOIN comments WHERE org_id = -7
SELECT * FROM files f, LATERAL (SELECT * FROM comments c WHERE c.file_id = f.id) l WHERE f.org_id = -7
SELECT * FROM files f, generate_series(1, 3) g WHERE f.org_id = -7
SELECT * FROM files f JOIN (comments c JOIN orgs o ON o.id = c.org_id) ON c.org_id = f.org_id WHERE f.org_id = -7
SELECT * FROM files TABLESAMPLE SYSTEM (50) WHERE org_id = -7
SELECT * FROM files AS f (a, b) WHERE a = -7
UPDATE files SET name = o.name FROM orgs o WHERE files.org_id = o.id AND o.id = -7
DELETE FROM files USING orgs WHERE files.org_id = orgs.id AND orgs.id = -7
SELECT * FROM files JOIN docs ON docs.slug = files.name WHERE files.org_id = 1000000007
SELECT * FROM files f JOIN plans p ON p.id = f.size WHERE f.org_id = 1000000007
SELECT * FROM files f JOIN comments c ON c.file_id = f.id WHERE f.org_id = 1000000007
SELECT * FROM files f LEFT JOIN comments c ON c.file_id = f.id WHERE f.org_id = 1000000007
SELECT * FROM files f, comments c WHERE f.org_id = 1000000007
SELECT * FROM files f CROSS JOIN orgs o WHERE f.org_id = 1000000007
SELECT * FROM files f JOIN sessions s ON s.user_id = f.id WHERE f.org_id = 1000000007
SELECT * FROM files f JOIN comments c ON f.org_id = c.org_id OR c.id = f.id WHERE f.org_id = 1000000007
SELECT * FROM files NATURAL JOIN comments WHERE org_id = 1000000007
SELECT * FROM files f, LATERAL (SELECT * FROM comments c WHERE c.file_id = f.id) l WHERE f.org_id = 1000000007
SELECT * FROM files f, generate_series(1, 3) g WHERE f.org_id = 1000000007
SELECT * FROM files f JOIN (comments c JOIN orgs o ON o.id = c.org_id) ON c.org_id = f.org_id WHERE f.org_id = 1000000007
SELECT * FROM files TABLESAMPLE SYSTEM (50) WHERE org_id = 1000000007
SELECT * FROM files AS f (a, b) WHERE a = 1000000007
UPDATE files SET name = o.name FROM orgs o WHERE files.org_id = o.id AND o.id = 1000000007
DELETE FROM files USING orgs WHERE files.org_id = orgs.id AND orgs.id = 1000000007
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY size) FROM files
SELECT mode() WITHIN GROUP (ORDER BY size) FROM files WHERE deleted
SELECT org_id, percentile_disc(0.9) WITHIN GROUP (ORDER BY size) FROM files GROUP BY org_id
SELECT size, row_number() OVER (PARTITION BY org_id ORDER BY size) FROM files
SELECT size, sum(size) OVER w FROM files WINDOW w AS (ORDER BY size)
SELECT DISTINCT size FROM files
SELECT DISTINCT ON (org_id) org_id, size FROM files ORDER BY org_id, size
SELECT org_id, count(size) FROM files GROUP BY org_id HAVING count(*) > 1
SELECT array_agg(size ORDER BY size) FROM files
SELECT * FROM files ORDER BY size DESC NULLS LAST FETCH FIRST 3 ROWS ONLY
SELECT * FROM files FOR UPDATE SKIP LOCKED
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY id) FROM files
SELECT mode() WITHIN GROUP (ORDER BY id) FROM files WHERE deleted
SELECT org_id, percentile_disc(0.9) WITHIN GROUP (ORDER BY id) FROM files GROUP BY org_id
SELECT id, row_number() OVER (PARTITION BY org_id ORDER BY id) FROM files
SELECT id, sum(id) OVER w FROM files WINDOW w AS (ORDER BY id)
SELECT DISTINCT id FROM files
SELECT DISTINCT ON (org_id) org_id, id FROM files ORDER BY org_id, id
SELECT org_id, count(id) FROM files GROUP BY org_id HAVING count(*) > 1
SELECT array_agg(id ORDER BY id) FROM files
SELECT * FROM files ORDER BY id DESC NULLS LAST FETCH FIRST 3 ROWS ONLY
UPDATE files SET org_id = 1 WHERE org_id = 1
UPDATE files SET org_id = org_id + 1 WHERE org_id = 1
UPDATE files SET (name, org_id) = ('a', 1) WHERE org_id = 1
UPDATE ONLY files SET name = 'n1'
INSERT INTO files (id, name) VALUES (1, 'a')
INSERT INTO files (org_id, id) VALUES (DEFAULT, 1)
INSERT INTO files (org_id, id) VALUES (1 + 1, 1)
INSERT INTO files (org_id, id) VALUES (abs(1), 1)
INSERT INTO files (org_id, id) SELECT org_id, id FROM comments WHERE org_id = 1
INSERT INTO files (org_id, id) VALUES (1, 1) ON CONFLICT (org_id, id) DO UPDATE SET org_id = EXCLUDED.org_id
INSERT INTO files VALUES (1, 1, 'x')
DELETE FROM ONLY files WHERE id = 1
UPDATE files SET org_id = 42 WHERE org_id = 1
UPDATE files SET org_id = org_id + 1 WHERE org_id = 42
UPDATE files SET (name, org_id) = ('a', 42) WHERE org_id = 1
UPDATE ONLY files SET name = 'n42'
INSERT INTO files (id, name) VALUES (42, 'a')
INSERT INTO files (org_id, id) VALUES (DEFAULT, 42)
INSERT INTO files (org_id, id) VALUES (42 + 1, 1)
INSERT INTO files (org_id, id) VALUES (abs(42), 1)
INSERT INTO files (org_id, id) SELECT org_id, id FROM comments WHERE org_id = 42
INSERT INTO files (org_id, id) VALUES (42, 1) ON CONFLICT (org_id, id) DO UPDATE SET org_id = EXCLUDED.org_id
INSERT INTO files VALUES (42, 1, 'x')
DELETE FROM ONLY files WHERE id = 42
UPDATE files SET org_id = -7 WHERE org_id = 1
UPDATE files SET org_id = org_id + 1 WHERE org_id = -7
UPDATE files SET (name, org_id) = ('a', -7) WHERE org_id = 1
UPDATE ONLY files SET name = 'n7'
INSERT INTO files (id, name) VALUES (-7, 'a')
INSERT INTO files (org_id, id) VALUES (DEFAULT, -7)
INSERT INTO files (org_id, id) VALUES (-7 + 1, 1)
INSERT INTO files (org_id, id) VALUES (abs(-7), 1)
INSERT INTO files (org_id, id) SELECT org_id, id FROM comments WHERE org_id = -7
INSERT INTO files (org_id, id) VALUES (-7, 1) ON CONFLICT (org_id, id) DO UPDATE SET org_id = EXCLUDED.org_id
INSERT INTO files VALUES (-7, 1, 'x')
DELETE FROM ONLY files WHERE id = 7
UPDATE files SET org_id = 1000000007 WHERE org_id = 1
UPDATE files SET org_id = org_id + 1 WHERE org_id = 1000000007
UPDATE files SET (name, org_id) = ('a', 1000000007) WHERE org_id = 1
UPDATE ONLY files SET name = 'n1000000007'
INSERT INTO files (id, name) VALUES (1000000007, 'a')
INSERT INTO files (org_id, id) VALUES (DEFAULT, 1000000007)
INSERT INTO files (org_id, id) VALUES (1000000007 + 1, 1)
INSERT INTO files (org_id, id) VALUES (abs(1000000007), 1)
INSERT INTO files (org_id, id) SELECT org_id, id FROM comments WHERE org_id = 1000000007
INSERT INTO files (org_id, id) VALUES (1000000007, 1) ON CONFLICT (org_id, id) DO UPDATE SET org_id = EXCLUDED.org_id
INSERT INTO files VALUES (1000000007, 1, 'x')
DELETE FROM ONLY files WHERE id = 1000000007
INSERT INTO files DEFAULT VALUES
TABLE files
EXPLAIN SELECT * FROM files
TRUNCATE files
ANALYZE files
VACUUM files
LOCK TABLE files IN SHARE MODE
ALTER TABLE files ADD COLUMN IF NOT EXISTS extra int
CREATE TEMP TABLE tmp_files AS SELECT * FROM files
SELECT * INTO TEMP tmp2_files FROM files
VALUES ((SELECT count(*) FROM files))
SELECT count(*) FROM files t1 JOIN files t2 ON true
COMMENT ON TABLE files IS 'x'
GRANT SELECT ON files TO PUBLIC
PREPARE p_files AS SELECT * FROM files
DECLARE c_files CURSOR FOR SELECT * FROM files
TABLE comments
EXPLAIN SELECT * FROM comments
TRUNCATE comments
ANALYZE comments
VACUUM comments
LOCK TABLE comments IN SHARE MODE
ALTER TABLE comments ADD COLUMN IF NOT EXISTS extra int
CREATE TEMP TABLE tmp_comments AS SELECT * FROM comments
SELECT * INTO TEMP tmp2_comments FROM comments
VALUES ((SELECT count(*) FROM comments))
SELECT count(*) FROM comments t1 JOIN comments t2 ON true
COMMENT ON TABLE comments IS 'x'
GRANT SELECT ON comments TO PUBLIC
PREPARE p_comments AS SELECT * FROM comments
DECLARE c_comments CURSOR FOR SELECT * FROM comments
TABLE orgs
EXPLAIN SELECT * FROM orgs
TRUNCATE orgs
ANALYZE orgs
VACUUM orgs
LOCK TABLE orgs IN SHARE MODE
ALTER TABLE orgs ADD COLUMN IF NOT EXISTS extra int
CREATE TEMP TABLE tmp_orgs AS SELECT * FROM orgs
SELECT * INTO TEMP tmp2_orgs FROM orgs
VALUES ((SELECT count(*) FROM orgs))
SELECT count(*) FROM orgs t1 JOIN orgs t2 ON true
COMMENT ON TABLE orgs IS 'x'
GRANT SELECT ON orgs TO PUBLIC
PREPARE p_orgs AS SELECT * FROM orgs
DECLARE c_orgs CURSOR FOR SELECT * FROM orgs
TABLE docs
EXPLAIN SELECT * FROM docs
TRUNCATE docs
ANALYZE docs
VACUUM docs
LOCK TABLE docs IN SHARE MODE
ALTER TABLE docs ADD COLUMN IF NOT EXISTS extra int
CREATE TEMP TABLE tmp_docs AS SELECT * FROM docs
SELECT * INTO TEMP tmp2_docs FROM docs
VALUES ((SELECT count(*) FROM docs))
SELECT count(*) FROM docs t1 JOIN docs t2 ON true
COMMENT ON TABLE docs IS 'x'
GRANT SELECT ON docs TO PUBLIC
PREPARE p_docs AS SELECT * FROM docs
DECLARE c_docs CURSOR FOR SELECT * FROM docs
TABLE sessions
EXPLAIN SELECT * FROM sessions
TRUNCATE sessions
ANALYZE sessions
VACUUM sessions
LOCK TABLE sessions IN SHARE MODE
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS extra int
CREATE TEMP TABLE tmp_sessions AS SELECT * FROM sessions
SELECT * INTO TEMP tmp2_sessions FROM sessions
VALUES ((SELECT count(*) FROM sessions))
SELECT count(*) FROM sessions t1 JOIN sessions t2 ON true
COMMENT ON TABLE sessions IS 'x'
GRANT SELECT ON sessions TO PUBLIC
PREPARE p_sessions AS SELECT * FROM sessions
DECLARE c_sessions CURSOR FOR SELECT * FROM sessions
SELECT * FROM docs WHERE slug > 'a'
SELECT * FROM docs WHERE slug LIKE 'a'
SELECT * FROM docs WHERE slug = 'a' COLLATE "C"
SELECT * FROM docs WHERE lower(slug) = 'a'
SELECT * FROM docs WHERE slug = 'a' || ''
SELECT * FROM docs WHERE slug = 'a' OR rev = 1
SELECT * FROM docs WHERE slug > 'b''c'
SELECT * FROM docs WHERE slug LIKE 'b''c'
SELECT * FROM docs WHERE slug = 'b''c' COLLATE "C"
SELECT * FROM docs WHERE lower(slug) = 'b''c'
SELECT * FROM docs WHERE slug = 'b''c' || ''
SELECT * FROM docs WHERE slug = 'b''c' OR rev = 1
SELECT * FROM docs WHERE slug > E'x\\y'
SELECT * FROM docs WHERE slug LIKE E'x\\y'
SELECT * FROM docs WHERE slug = E'x\\y' COLLATE "C"
SELECT * FROM docs WHERE lower(slug) = E'x\\y'
SELECT * FROM docs WHERE slug = E'x\\y' || ''
SELECT * FROM docs WHERE slug = E'x\\y' OR rev = 1
SELECT * FROM docs WHERE slug > $$z$$
SELECT * FROM docs WHERE slug LIKE $$z$$
SELECT * FROM docs WHERE slug = $$z$$ COLLATE "C"
SELECT * FROM docs WHERE lower(slug) = $$z$$
SELECT * FROM docs WHERE slug = $$z$$ || ''
SELECT * FROM docs WHERE slug = $$z$$ OR rev = 1
SELECT * FROM sessions WHERE sid::text = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::text
SELECT * FROM sessions WHERE sid <> 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'
SELECT * FROM sessions s JOIN files f ON f.id = s.user_id WHERE s.sid = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'
SELECT * FROM sessions WHERE sid::text = gen_random_uuid()::text
SELECT * FROM sessions WHERE sid <> gen_random_uuid()
SELECT * FROM sessions s JOIN files f ON f.id = s.user_id WHERE s.sid = gen_random_uuid()
SELECT * FROM files WHERE org_id = 0 OR org_id = 1
SELECT * FROM files WHERE org_id = 0 OR org_id = 42
SELECT * FROM files WHERE org_id = 0 OR org_id = -7
SELECT * FROM files WHERE org_id = 0 OR org_id = 1000000007
SELECT id FROM files WHERE org_id > 0
SELECT id FROM files WHERE org_id < 0
SELECT id FROM files WHERE org_id >= 0
SELECT id FROM files WHERE org_id <= 0
SELECT id FROM files WHERE org_id <> 0
SELECT * FROM comments WHERE org_id = 0 OR id = 0
SELECT * FROM comments c JOIN files f ON f.id = c.file_id WHERE c.org_id = 0
SELECT * FROM orgs WHERE id IN (SELECT org_id FROM files WHERE org_id = 0)
WITH x AS (SELECT * FROM comments WHERE org_id = 0) SELECT count(*) FROM x
SELECT * FROM files WHERE org_id = 9223372036854775807 OR org_id = 1
SELECT * FROM files WHERE org_id = 9223372036854775807 OR org_id = 42
SELECT * FROM files WHERE org_id = 9223372036854775807 OR org_id = -7
SELECT * FROM files WHERE org_id = 9223372036854775807 OR org_id = 1000000007
SELECT id FROM files WHERE org_id > 9223372036854775807
SELECT id FROM files WHERE org_id < 9223372036854775807
SELECT id FROM files WHERE org_id >= 9223372036854775807
SELECT id FROM files WHERE org_id <= 9223372036854775807
SELECT id FROM files WHERE org_id <> 9223372036854775807
SELECT * FROM comments WHERE org_id = 9223372036854775807 OR id = 9223372036854775807
SELECT * FROM comments c JOIN files f ON f.id = c.file_id WHERE c.org_id = 9223372036854775807
SELECT * FROM orgs WHERE id IN (SELECT org_id FROM files WHERE org_id = 9223372036854775807)
WITH x AS (SELECT * FROM comments WHERE org_id = 9223372036854775807) SELECT count(*) FROM x
SELECT * FROM files WHERE org_id = 31337 OR org_id = 1
SELECT * FROM files WHERE org_id = 31337 OR org_id = 42
SELECT * FROM files WHERE org_id = 31337 OR org_id = -7
SELECT * FROM files WHERE org_id = 31337 OR org_id = 1000000007
SELECT id FROM files WHERE org_id > 31337
SELECT id FROM files WHERE org_id < 31337
SELECT id FROM files WHERE org_id >= 31337
SELECT id FROM files WHERE org_id <= 31337
SELECT id FROM files WHERE org_id <> 31337
SELECT * FROM comments WHERE org_id = 31337 OR id = 31337
SELECT * FROM comments c JOIN files f ON f.id = c.file_id WHERE c.org_id = 31337
SELECT * FROM orgs WHERE id IN (SELECT org_id FROM files WHERE org_id = 31337)
WITH x AS (SELECT * FROM comments WHERE org_id = 31337) SELECT count(*) FROM x
