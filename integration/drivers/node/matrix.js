// node-postgres side of pgturnstile's driver matrix (see ../doc.go).
//
// Connects with the PG* environment, runs the scenarios with DRV_CLIENTS
// concurrent clients and prints one "<scenario> key=value…" line each; a
// scenario that fails prints "<scenario> ERROR <message>". The Go test
// (../node_test.go) compares the lines of the direct and pooled runs and the
// golden file. node-postgres has no COPY without pg-copy-streams, and no
// protocol pipelining: it sends a query when the previous one is answered,
// so "queued" (60 queries handed over at once) is its batch.
'use strict';

const crypto = require('crypto');
const { Client } = require('pg');
const Cursor = require('pg-cursor');

const env = (k) => parseInt(process.env[k], 10);
const CLIENTS = env('DRV_CLIENTS');
const TXNS = env('DRV_TXNS');
const PIPELINE = env('DRV_PIPELINE');
const ROWS = env('DRV_ROWS');
const ERROR_ROUNDS = env('DRV_ERROR_ROUNDS');

// Shared with scenarios_test.go.
const prepSelectSQL = 'SELECT $1::int AS client, $2::int AS seq';
const prepInsertSQL = 'INSERT INTO prep_log (client, seq) VALUES ($1, $2)';
const prepCheckSQL = 'SELECT count(*), count(DISTINCT (client, seq)), sum(client * 1000 + seq) FROM prep_log';
const pipeInsertSQL = 'INSERT INTO pipe_t (client, i, v) VALUES ($1, $2, $3)';
const pipeSelectSQL = 'SELECT v FROM pipe_t WHERE client = $1 AND i = $2';
const pipeCheckSQL = 'SELECT count(*) FROM pipe_t';
const errInsertSQL = 'INSERT INTO err_t (client) VALUES ($1)';
const errFailSQL = 'SELECT tagged_fail($1)';
const errCheckSQL = 'SELECT count(*) FROM err_t WHERE client = $1';
const rowsSQL = 'SELECT g, md5(g::text) FROM generate_series(1, 100000) AS g';
const typesSQL = 'SELECT $1::text, $2::bytea, $3::numeric, $4::timestamptz, ' +
  'md5($1::text), char_length($1::text), md5($2::bytea), $3::numeric::text, $4::timestamptz::text';
const typesText = 'h\u00e9llo w\u00f6rld \u2603 \u65e5\u672c\u8a9e \u{1F600} e\u0301 \u05e2\u05d1\u05e8\u05d9\u05ea\ttab\\back\'q"\n';
const typesNumeric = '-12345678901234567890.123456789012345678901234567890';
const typesTimestamptz = '2024-02-29 23:59:59.123456+00';

function line(scenario, kv) {
  return [scenario, ...Object.entries(kv).map(([k, v]) => `${k}=${v}`)].join(' ');
}

function codes(m) {
  const keys = Object.keys(m);
  if (keys.length === 1) return keys[0];
  return JSON.stringify(m);
}

async function each(clients, fn) {
  await Promise.all(clients.map((c, i) => fn(c, i + 1)));
}

async function prepared(clients) {
  let ok = 0;
  await each(clients, async (c, id) => {
    for (let seq = 1; seq <= TXNS; seq++) {
      await c.query('BEGIN');
      const r = await c.query({ name: 'prep_select', text: prepSelectSQL, values: [id, seq] });
      if (r.rows[0].client !== id || r.rows[0].seq !== seq) {
        throw new Error(`client ${id} seq ${seq}: got ${JSON.stringify(r.rows[0])}`);
      }
      await c.query({ name: 'prep_insert', text: prepInsertSQL, values: [id, seq] });
      await c.query('COMMIT');
      ok++;
    }
  });
  const r = await clients[0].query({ text: prepCheckSQL, rowMode: 'array' });
  const [n, d, sum] = r.rows[0];
  return line('prepared', { clients: CLIENTS, txns: CLIENTS * TXNS, ok, rows: n, distinct: d, sum });
}

async function queued(clients) {
  let ok = 0;
  await each(clients, async (c, id) => {
    const ps = [];
    for (let k = 0; k < PIPELINE; k++) {
      const i = Math.floor(k / 2) + 1;
      if (k % 2 === 0) ps.push(c.query(pipeInsertSQL, [id, i, `c${id}-${i}`]));
      else ps.push(c.query(pipeSelectSQL, [id, i]).then((r) => ({ i, r })));
    }
    for (const res of await Promise.all(ps)) {
      if (!res.r) continue;
      const want = `c${id}-${res.i}`;
      if (res.r.rows.length !== 1 || res.r.rows[0].v !== want) {
        throw new Error(`client ${id}: got ${JSON.stringify(res.r.rows)}, want ${want}`);
      }
      ok++;
    }
  });
  const r = await clients[0].query(pipeCheckSQL);
  return line('queued', { clients: CLIENTS, statements: PIPELINE, ok, rows: r.rows[0].count });
}

async function error(clients) {
  let own = 0;
  let rolledBack = 0;
  const first = {};
  const next = {};
  const code = (e) => (e && e.code) || 'none';
  await each(clients, async (c, id) => {
    for (let r = 0; r < ERROR_ROUNDS; r++) {
      await c.query('BEGIN');
      await c.query(errInsertSQL, [id]);
      let e1 = null;
      await c.query(errFailSQL, [id]).catch((e) => { e1 = e; });
      let e2 = null;
      await c.query('SELECT 1').catch((e) => { e2 = e; });
      await c.query('ROLLBACK');
      const res = await c.query(errCheckSQL, [id]);
      first[code(e1)] = (first[code(e1)] || 0) + 1;
      next[code(e2)] = (next[code(e2)] || 0) + 1;
      if (e1 && e1.message === `client ${id} failed`) own++;
      if (res.rows[0].count === '0') rolledBack++;
    }
  });
  return line('error', {
    clients: CLIENTS, rounds: ERROR_ROUNDS, first: codes(first),
    own_message: own, next: codes(next), rolled_back: rolledBack,
  });
}

function rowsLine(scenario, hash, n) {
  return line(scenario, { n, sha256: hash.digest('hex').slice(0, 16) });
}

async function rows(c) {
  const r = await c.query({ text: rowsSQL, rowMode: 'array' });
  const h = crypto.createHash('sha256');
  for (const [g, m] of r.rows) h.update(`${g}|${m}\n`);
  return rowsLine('rows', h, r.rows.length);
}

// rowsCursor reads through pg-cursor, 1000 rows per Execute, outside a
// transaction: the client sends no Sync until the cursor is closed.
async function rowsCursor(c) {
  const cursor = c.query(new Cursor(rowsSQL, [], { rowMode: 'array' }));
  const h = crypto.createHash('sha256');
  let n = 0;
  for (;;) {
    const batch = await cursor.read(1000);
    if (batch.length === 0) break;
    for (const [g, m] of batch) {
      h.update(`${g}|${m}\n`);
      n++;
    }
  }
  await cursor.close();
  return rowsLine('rows_cursor', h, n);
}

async function types(c) {
  const bytea = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const r = await c.query({ text: typesSQL, values: [typesText, bytea, typesNumeric, typesTimestamptz], rowMode: 'array' });
  const [t, b, n, ts, textMD5, chars, byteaMD5, numText, tsText] = r.rows[0];
  // node-postgres parses timestamptz into a Date: milliseconds only.
  const roundtrip = t === typesText && Buffer.compare(b, bytea) === 0 && n === typesNumeric &&
    ts.getTime() === Date.UTC(2024, 1, 29, 23, 59, 59, 123);
  if (!roundtrip) throw new Error(`round trip: ${JSON.stringify([t, b.toString('hex'), n, ts])}`);
  return `types text_md5=${textMD5} chars=${chars} bytea_md5=${byteaMD5} numeric=${numText} timestamptz=${tsText} roundtrip=${roundtrip}`;
}

async function main() {
  const clients = [];
  for (let i = 0; i < CLIENTS; i++) {
    const c = new Client();
    await c.connect();
    clients.push(c);
  }
  let failed = false;
  const run = async (scenario, fn) => {
    try {
      console.log(await fn());
    } catch (e) {
      failed = true;
      console.log(`${scenario} ERROR ${String(e && e.stack || e).replace(/\n/g, ' | ')}`);
    }
  };
  await run('prepared', () => prepared(clients));
  await run('queued', () => queued(clients));
  await run('error', () => error(clients));
  await run('rows', () => rows(clients[0]));
  await run('rows_cursor', () => rowsCursor(clients[0]));
  await run('types', () => types(clients[0]));
  await Promise.all(clients.map((c) => c.end()));
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
