"""psycopg 3 through pgturnstile's sharding router (../../shard_drivers_test.go).

Run with Debian's /usr/bin/python3 and python3-psycopg; connects with the PG*
environment (the cluster's name as the database). SHARD_KEYS names a file of
one key a line, "colo<TAB>group<TAB>key": colo org (files, bigint), tenant
(tenants, text) or dev (devices, uuid); group is the database Postgres places
the key on (a pipeline or a transaction takes keys of one group). Each key is
inserted once, the modes taking turns by key:

  v=1 execute   cursor.execute with %s: server-side binding, text parameters
                (psycopg prepares a statement from its fifth execution)
  v=2 binary    cursor.execute with %b: binary parameters (ints as int2, int4
                or int8 by their size, uuid as 16 bytes)
  v=3 client    ClientCursor: the values bound client-side into a simple Query
  v=4 pipeline  connection.pipeline(), 25 keys of a group per pipeline
  v=5 tx        BEGIN (a simple Query), 5 keys of a group, COMMIT

The connection is in autocommit mode, and BEGIN and COMMIT are executed with
prepare=False: the router holds a BEGIN only when it comes as a simple Query,
while psycopg's default mode sends its implicit BEGIN on the extended
protocol, and psycopg prepares any statement from its fifth execution, BEGIN
included; such a BEGIN goes to the cluster's default database and the
transaction's keyed statements are then refused (see the test).
It prints "inserted <colo> <mode> <v> <n>", then reads every key back
through the router and prints "read <colo> <rows>". Any error ends it with a
traceback and status 1.
"""

import os
import sys
import uuid

import psycopg

COLOS = ["org", "tenant", "dev"]
MODES = ["execute", "binary", "client", "pipeline", "tx"]
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
    for colo in COLOS:
        per = [[] for _ in MODES]
        for i, gk in enumerate(by_colo[colo]):
            per[i % len(MODES)].append(gk)
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
        groups = {}
        for group, key in per[3]:
            groups.setdefault(group, []).append(key)
        for group in sorted(groups):
            keys = groups[group]
            for at in range(0, len(keys), 25):
                with conn.pipeline():
                    curs = []
                    for key in keys[at:at + 25]:
                        c = conn.cursor()
                        c.execute(insert_sql(colo, "%s", 4), (key,))
                        curs.append((c, key))
                for c, key in curs:
                    check(c, key)
        groups = {}
        for group, key in per[4]:
            groups.setdefault(group, []).append(key)
        for group in sorted(groups):
            keys = groups[group]
            for at in range(0, len(keys), 5):
                cur.execute("BEGIN", prepare=False)
                for key in keys[at:at + 5]:
                    cur.execute(insert_sql(colo, "%s", 5), (key,))
                    check(cur, key)
                cur.execute("COMMIT", prepare=False)
        for m, mode in enumerate(MODES):
            print("inserted %s %s %d %d" % (colo, mode, m + 1, len(per[m])))
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
