"""psycopg 3 through pgturnstile's sharding router (../../shard_drivers_test.go).

Run with Debian's /usr/bin/python3 and python3-psycopg; connects with the PG*
environment (the cluster's name as the database). SHARD_KEYS names a file of
one key a line, "colo<TAB>group<TAB>key": colo org (files, bigint), tenant
(tenants, text) or dev (devices, uuid); group is the database Postgres places
the key on (a pipeline or a transaction takes keys of one group). Each key is
inserted once, the modes taking turns by key. psycopg prepares a statement
(a named Parse, then Bind/Execute) from its fifth execution, so every mode
but client runs its INSERTs both unnamed and prepared. On a connection in
autocommit mode:

  v=1 execute   cursor.execute with %s: server-side binding, text parameters
  v=2 binary    cursor.execute with %b: binary parameters (ints as int2, int4
                or int8 by their size, uuid as 16 bytes)
  v=3 client    ClientCursor: the values bound client-side into a simple Query
  v=4 pipeline  connection.pipeline(), 25 keys of a group per pipeline
  v=5 tx        cursor.execute("BEGIN"), 5 keys of a group, "COMMIT": a
                simple Query for the first four, then psycopg prepares BEGIN
                and COMMIT too (a named Parse alone, then Bind/Execute/Sync:
                the extended-protocol BEGIN the router holds)

and on a second connection in psycopg's default mode (not autocommit), where
psycopg sends BEGIN itself, unnamed on the extended protocol (Parse, Bind,
Describe, Execute, Sync), before a transaction's first statement, and
COMMIT/ROLLBACK the same way:

  v=6 txblock   with conn.transaction(): 5 keys of a group, the first inside
                a nested conn.transaction() (a SAVEPOINT held with the BEGIN,
                then RELEASE)
  v=7 commit    cursor.execute for 5 keys of a group, conn.commit()

In each transaction mode the first 5 keys of each group are first inserted
with v=0 and rolled back (ROLLBACK, psycopg.Rollback, conn.rollback()), then
inserted again and committed: a rolled-back row left anywhere is a second
row of its key. v=6 also runs an empty transaction block before each committed one (BEGIN
then COMMIT), which the pooler answers alone.

and, on the autocommit connection:

  v=8 executemany  cursor.executemany for 10 keys of a group: psycopg's
                pipeline writes the statement's named Parse apart from the
                Binds that follow it in the same batch, which the router
                waits for
v=5 also runs an empty transaction (BEGIN then ROLLBACK) before each
committed one: once psycopg prepares that ROLLBACK, the pooler answers its
Parse, and the later ROLLBACK of a transaction on a server runs it there.

Then it reads the org rows of each mode on every shard at once: a shard=all
SELECT of plain columns for v = 1..8, twice on the autocommit connection
(server-side binding: unnamed at first, a named statement from the fifth
execution on), and prints "scattered org <v> <rows>"; a pipeline of two
such scatters in one batch is refused (0A000).

It prints "inserted <colo> <mode> <v> <n>" and, for each transaction mode,
"rolledback <colo> <mode> <n>", then reads every key back through the router
and prints "read <colo> <rows>". Any error ends it with a traceback and
status 1.
"""

import os
import sys
import uuid

import psycopg

COLOS = ["org", "tenant", "dev"]
MODES = ["execute", "binary", "client", "pipeline", "tx", "txblock", "commit", "executemany"]
TABLE = {"org": ("files", "org_id"), "tenant": ("tenants", "name"), "dev": ("devices", "id")}


def insert_sql(colo, ph, v):
    table, col = TABLE[colo]
    if colo == "org":
        return "INSERT INTO files (org_id, name, v) VALUES (%s, 'psycopg', %d)" % (ph, v)
    return "INSERT INTO %s (%s, v) VALUES (%s, %d)" % (table, col, ph, v)


def binary_value(colo, key):
    if colo == "org":
        return int(key)
    if colo == "dev":
        return uuid.UUID(key)
    return key


def check(cur, key):
    if cur.rowcount != 1:
        raise RuntimeError("%r: %d rows" % (key, cur.rowcount))


def by_group(gks, size):
    """Chunks of at most size keys of one group, in group order."""
    groups = {}
    for group, key in gks:
        groups.setdefault(group, []).append(key)
    out = []
    for group in sorted(groups):
        keys = groups[group]
        out.append([keys[at:at + size] for at in range(0, len(keys), size)])
    return out


def tx_mode(colo, gks, v, run):
    """Runs a transaction mode: for each group, its first chunk with v=0
    and rolled back (run(keys, 0, True)), then every chunk committed
    (run(keys, v, False)). Returns the rows rolled back."""
    rolled = 0
    for chunks in by_group(gks, 5):
        run(chunks[0], 0, True)
        rolled += len(chunks[0])
        for keys in chunks:
            run(keys, v, False)
    return rolled


def main():
    by_colo = {c: [] for c in COLOS}
    with open(os.environ["SHARD_KEYS"], encoding="utf-8", newline="\n") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            colo, group, key = line.split("\t", 2)
            by_colo[colo].append((group, key))
    conn = psycopg.connect("", autocommit=True)
    tconn = psycopg.connect("")
    for colo in COLOS:
        per = [[] for _ in MODES]
        for i, gk in enumerate(by_colo[colo]):
            per[i % len(MODES)].append(gk)
        rolled = {}
        cur = conn.cursor()
        for _, key in per[0]:
            cur.execute(insert_sql(colo, "%s", 1), (key,))
            check(cur, key)
        for _, key in per[1]:
            cur.execute(insert_sql(colo, "%b", 2), (binary_value(colo, key),))
            check(cur, key)
        ccur = psycopg.ClientCursor(conn)
        for _, key in per[2]:
            ccur.execute(insert_sql(colo, "%s", 3), (key,))
            check(ccur, key)
        for chunks in by_group(per[3], 25):
            for keys in chunks:
                with conn.pipeline():
                    curs = []
                    for key in keys:
                        c = conn.cursor()
                        c.execute(insert_sql(colo, "%s", 4), (key,))
                        curs.append((c, key))
                for c, key in curs:
                    check(c, key)

        def tx(keys, v, rollback):
            if not rollback:
                # An empty transaction first: BEGIN and ROLLBACK that the
                # pooler answers alone (prepared by psycopg from the
                # fifth time, as the later ROLLBACK of a real one is).
                cur.execute("BEGIN")
                cur.execute("ROLLBACK")
            cur.execute("BEGIN")
            for key in keys:
                cur.execute(insert_sql(colo, "%s", v), (key,))
                check(cur, key)
            cur.execute("ROLLBACK" if rollback else "COMMIT")

        rolled["tx"] = tx_mode(colo, per[4], 5, tx)
        tcur = tconn.cursor()

        def txblock(keys, v, rollback):
            if not rollback:
                with tconn.transaction():
                    pass
            with tconn.transaction():
                with tconn.transaction():
                    tcur.execute(insert_sql(colo, "%s", v), (keys[0],))
                    check(tcur, keys[0])
                for key in keys[1:]:
                    tcur.execute(insert_sql(colo, "%s", v), (key,))
                    check(tcur, key)
                if rollback:
                    raise psycopg.Rollback()

        rolled["txblock"] = tx_mode(colo, per[5], 6, txblock)

        def commit(keys, v, rollback):
            for key in keys:
                tcur.execute(insert_sql(colo, "%s", v), (key,))
                check(tcur, key)
            if rollback:
                tconn.rollback()
            else:
                tconn.commit()

        rolled["commit"] = tx_mode(colo, per[6], 7, commit)
        # executemany: psycopg's pipeline writes the statement's Parse
        # apart from the Binds that follow it in the same batch.
        for chunks in by_group(per[7], 10):
            for keys in chunks:
                cur.executemany(insert_sql(colo, "%s", 8), [(key,) for key in keys])
        for m, mode in enumerate(MODES):
            print("inserted %s %s %d %d" % (colo, mode, m + 1, len(per[m])))
        for mode, n in rolled.items():
            print("rolledback %s %s %d" % (colo, mode, n))
    tconn.close()
    scatter = "/* pgturnstile: shard=all */ SELECT org_id, name FROM files WHERE v = %s"
    cur = conn.cursor()
    seen = {}
    for _ in range(2):
        for v in range(1, len(MODES) + 1):
            cur.execute(scatter, (v,))
            n = len(cur.fetchall())
            if seen.setdefault(v, n) != n:
                raise RuntimeError("scatter of v=%d: %d rows, then %d" % (v, seen[v], n))
    # A pipeline of several scatters in one batch is refused (0A000):
    # each must come as a batch of its own.
    try:
        with conn.pipeline():
            for v in (1, 2):
                conn.cursor().execute(scatter, (v,))
        raise RuntimeError("a pipeline of two scatters ran")
    except psycopg.errors.FeatureNotSupported:
        pass
    for v in sorted(seen):
        print("scattered org %d %d" % (v, seen[v]))
    for colo in COLOS:
        table, col = TABLE[colo]
        rows = 0
        cur = conn.cursor()
        for _, key in by_colo[colo]:
            cur.execute("SELECT count(*) FROM %s WHERE %s = %%s" % (table, col), (key,))
            rows += cur.fetchone()[0]
        print("read %s %d" % (colo, rows))
    conn.close()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
