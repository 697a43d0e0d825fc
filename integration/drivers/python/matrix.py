"""psycopg 3 side of pgturnstile's driver matrix (see ../doc.go).

Run with Debian's /usr/bin/python3 and python3-psycopg. Connects with the
PG* environment and prepare_threshold=0 (every statement is prepared on its
first execution), in psycopg's default non-autocommit mode; runs the
scenarios with DRV_CLIENTS concurrent clients (threads) and prints one
"<scenario> key=value..." line each, or "<scenario> ERROR <message>".
"""

import datetime
import decimal
import hashlib
import os
import sys
import threading
import traceback

import psycopg

CLIENTS = int(os.environ["DRV_CLIENTS"])
TXNS = int(os.environ["DRV_TXNS"])
PIPELINE = int(os.environ["DRV_PIPELINE"])
ERROR_ROUNDS = int(os.environ["DRV_ERROR_ROUNDS"])
COPY_FILE = os.environ["DRV_COPY_FILE"]

# Shared with scenarios_test.go ($n written as psycopg's placeholders).
PREP_SELECT = "SELECT %s::int AS client, %s::int AS seq"
PREP_INSERT = "INSERT INTO prep_log (client, seq) VALUES (%s, %s)"
PREP_CHECK = "SELECT count(*), count(DISTINCT (client, seq)), sum(client * 1000 + seq) FROM prep_log"
PIPE_INSERT = "INSERT INTO pipe_t (client, i, v) VALUES (%s, %s, %s)"
PIPE_SELECT = "SELECT v FROM pipe_t WHERE client = %s AND i = %s"
PIPE_CHECK = "SELECT count(*) FROM pipe_t"
ERR_INSERT = "INSERT INTO err_t (client) VALUES (%s)"
ERR_FAIL = "SELECT tagged_fail(%s)"
ERR_CHECK = "SELECT count(*) FROM err_t WHERE client = %s"
ROWS_SQL = "SELECT g, md5(g::text) FROM generate_series(1, 100000) AS g"
COPY_OUT_SQL = "COPY (SELECT * FROM copy_t ORDER BY id) TO STDOUT"
TYPES_SQL = ("SELECT %(t)s::text, %(b)s::bytea, %(n)s::numeric, %(ts)s::timestamptz, "
             "md5(%(t)s::text), char_length(%(t)s::text), md5(%(b)s::bytea), %(n)s::numeric::text, %(ts)s::timestamptz::text")
TYPES_TEXT = "h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c\u8a9e \U0001F600 e\u0301 \u05e2\u05d1\u05e8\u05d9\u05ea\ttab\\back'q\"\n"
TYPES_NUMERIC = "-12345678901234567890.123456789012345678901234567890"
TYPES_TS = datetime.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=datetime.timezone.utc)


def line(scenario, **kv):
    return " ".join([scenario] + ["%s=%s" % (k, v) for k, v in kv.items()])


def codes(m):
    if len(m) == 1:
        return next(iter(m))
    return str(dict(sorted(m.items())))


def each(clients, fn):
    """Runs fn(conn, id) for every client in its own thread; re-raises the first error."""
    errors = [None] * len(clients)

    def run(i):
        try:
            fn(clients[i], i + 1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e


def prepared(clients):
    ok = [0]
    lock = threading.Lock()

    def client(conn, cid):
        for seq in range(1, TXNS + 1):
            with conn.transaction():
                row = conn.execute(PREP_SELECT, (cid, seq)).fetchone()
                if row != (cid, seq):
                    raise AssertionError("client %d seq %d: got %r" % (cid, seq, row))
                conn.execute(PREP_INSERT, (cid, seq))
            with lock:
                ok[0] += 1

    each(clients, client)
    c = clients[0]
    n, d, s = c.execute(PREP_CHECK).fetchone()
    c.commit()
    return line("prepared", clients=CLIENTS, txns=CLIENTS * TXNS, ok=ok[0], rows=n, distinct=d, sum=s)


def pipeline(clients):
    ok = [0]
    lock = threading.Lock()

    def client(conn, cid):
        selects = []
        with conn.pipeline():
            for k in range(PIPELINE):
                i = k // 2 + 1
                if k % 2 == 0:
                    conn.execute(PIPE_INSERT, (cid, i, "c%d-%d" % (cid, i)))
                else:
                    selects.append((i, conn.execute(PIPE_SELECT, (cid, i))))
        for i, cur in selects:
            row = cur.fetchone()
            if row != ("c%d-%d" % (cid, i),):
                raise AssertionError("client %d: got %r for %d" % (cid, row, i))
            with lock:
                ok[0] += 1
        conn.commit()

    each(clients, client)
    c = clients[0]
    (n,) = c.execute(PIPE_CHECK).fetchone()
    c.commit()
    return line("pipeline", clients=CLIENTS, statements=PIPELINE, ok=ok[0], rows=n)


def copy(conn):
    with open(COPY_FILE, "rb") as f:
        data = f.read()
    with conn.cursor() as cur:
        with cur.copy("COPY copy_t FROM STDIN") as cp:
            for i in range(0, len(data), 1 << 16):
                cp.write(data[i:i + (1 << 16)])
        conn.commit()
        out = bytearray()
        with cur.copy(COPY_OUT_SQL) as cp:
            for chunk in cp:
                out += chunk
    conn.commit()
    got = bytes(out)
    return line("copy", rows=got.count(b"\n"), bytes=len(got),
                sha256=hashlib.sha256(got).hexdigest()[:16], exact=str(got == data).lower())


def error(clients):
    lock = threading.Lock()
    st = {"own": 0, "rolled_back": 0, "first": {}, "next": {}}

    def code(e):
        return "none" if e is None else (e.sqlstate or "other")

    def client(conn, cid):
        for _ in range(ERROR_ROUNDS):
            conn.execute(ERR_INSERT, (cid,))  # opens the transaction (not autocommit)
            e1 = e2 = None
            try:
                conn.execute(ERR_FAIL, (cid,))
            except psycopg.Error as e:
                e1 = e
            try:
                conn.execute("SELECT 1")
            except psycopg.Error as e:
                e2 = e
            conn.rollback()
            (n,) = conn.execute(ERR_CHECK, (cid,)).fetchone()
            conn.commit()
            with lock:
                st["first"][code(e1)] = st["first"].get(code(e1), 0) + 1
                st["next"][code(e2)] = st["next"].get(code(e2), 0) + 1
                if e1 is not None and e1.diag.message_primary == "client %d failed" % cid:
                    st["own"] += 1
                if n == 0:
                    st["rolled_back"] += 1

    each(clients, client)
    return line("error", clients=CLIENTS, rounds=ERROR_ROUNDS, first=codes(st["first"]),
                own_message=st["own"], next=codes(st["next"]), rolled_back=st["rolled_back"])


def rows_line(scenario, cur):
    h = hashlib.sha256()
    n = 0
    for g, m in cur:
        h.update(("%d|%s\n" % (g, m)).encode())
        n += 1
    return line(scenario, n=n, sha256=h.hexdigest()[:16])


def rows(conn):
    with conn.cursor() as cur:
        cur.execute(ROWS_SQL)
        out = rows_line("rows", cur)
    conn.commit()
    return out


def rows_server_cursor(conn):
    """A named (server-side) cursor: DECLARE, then FETCH 1000 at a time."""
    with conn.cursor(name="big") as cur:
        cur.itersize = 1000
        cur.execute(ROWS_SQL)
        out = rows_line("rows_server_cursor", cur)
    conn.commit()
    return out


def types(conn):
    b = bytes(range(256))
    n = decimal.Decimal(TYPES_NUMERIC)
    row = conn.execute(TYPES_SQL, {"t": TYPES_TEXT, "b": b, "n": n, "ts": TYPES_TS}).fetchone()
    conn.commit()
    t, b2, n2, ts2, text_md5, chars, bytea_md5, num_text, ts_text = row
    roundtrip = t == TYPES_TEXT and bytes(b2) == b and str(n2) == TYPES_NUMERIC and ts2 == TYPES_TS
    if not roundtrip:
        raise AssertionError("round trip: %r" % (row[:4],))
    return "types text_md5=%s chars=%d bytea_md5=%s numeric=%s timestamptz=%s roundtrip=true" % (
        text_md5, chars, bytea_md5, num_text, ts_text)


LARGE_SIZES = [4097, 16385, 102400, 1048576, 10485760]


def large(conn_named):
    """Statements longer than the pooler's read buffers, each after a small
    one (issue 15's repro): on a connection with psycopg's default
    prepare_threshold (unnamed statements) and on one that prepares every
    statement (named, mapped by the pooler). Prints the lengths Postgres
    counted."""
    out = []
    plain = psycopg.connect("")
    try:
        for c in (plain, conn_named):
            c.execute("select %s", (1,)).fetchone()
            got = []
            for n in LARGE_SIZES:
                row = c.execute("select %s::int, length('" + "x" * n + "')", (1,)).fetchone()
                got.append(str(row[1]))
            c.commit()
            out.append(",".join(got))
    finally:
        plain.close()
    return line("large", unnamed=out[0], named=out[1])


def main():
    clients = [psycopg.connect("", prepare_threshold=0) for _ in range(CLIENTS)]
    failed = False
    for scenario, fn in [
        ("prepared", lambda: prepared(clients)),
        ("pipeline", lambda: pipeline(clients)),
        ("copy", lambda: copy(clients[0])),
        ("error", lambda: error(clients)),
        ("rows", lambda: rows(clients[0])),
        ("rows_server_cursor", lambda: rows_server_cursor(clients[0])),
        ("types", lambda: types(clients[0])),
        ("large", lambda: large(clients[0])),
    ]:
        try:
            print(fn(), flush=True)
        except Exception as e:  # noqa: BLE001 - reported as the scenario's result
            failed = True
            print("%s ERROR %s" % (scenario, repr(e).replace("\n", " | ")), flush=True)
            traceback.print_exc()
            for c in clients:  # leave no client in a failed transaction
                try:
                    c.rollback()
                except psycopg.Error:
                    pass
    for c in clients:
        c.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
