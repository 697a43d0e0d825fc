// node-postgres through pgturnstile's sharding router
// (../../shard_drivers_test.go).
//
// Connects with the PG* environment (the cluster's name as the database).
// SHARD_KEYS names a file of one key a line, "colo<TAB>group<TAB>key": colo
// org (files, bigint), tenant (tenants, text) or dev (devices, uuid); group is
// the database Postgres places the key on (a transaction takes keys of one
// group). Each key is inserted once, the modes taking turns by key, in
// node-postgres's own ways (it sends every parameter as text):
//
//   v=1 simple  client.query(text): the key a literal (escapeLiteral, E'…'
//               when it has a backslash) in a simple Query
//   v=2 param   client.query(text, values): an unnamed Parse, Bind, Execute
//   v=3 named   client.query({name, text, values}): a named statement,
//               parsed once per connection and bound for each key
//   v=4 tx      client.query('BEGIN') (a simple Query), 5 keys of a group
//               as in v=2 (unnamed, on the extended protocol), COMMIT
//
// In v=4 the first transaction of each group inserts its keys with v=0 and
// ends with ROLLBACK, then the same keys are inserted again and committed: a
// rolled-back row left anywhere is a second row of its key.
//
// It prints "inserted <colo> <mode> <v> <n>" and "rolledback <colo> tx <n>",
// then reads every key back through the router and prints "read <colo>
// <rows>". Any error ends it with status 1.
'use strict';

const fs = require('fs');
const { Client } = require('pg');

const COLOS = ['org', 'tenant', 'dev'];
const MODES = ['simple', 'param', 'named', 'tx'];
const TABLE = { org: ['files', 'org_id'], tenant: ['tenants', 'name'], dev: ['devices', 'id'] };

function insertSQL(colo, value, v) {
  if (colo === 'org') return `INSERT INTO files (org_id, name, v) VALUES (${value}, 'node', ${v})`;
  const [table, col] = TABLE[colo];
  return `INSERT INTO ${table} (${col}, v) VALUES (${value}, ${v})`;
}

function check(r, key) {
  if (r.rowCount !== 1) throw new Error(`${JSON.stringify(key)}: ${r.rowCount} rows`);
}

async function main() {
  const byColo = Object.fromEntries(COLOS.map((c) => [c, []]));
  for (const line of fs.readFileSync(process.env.SHARD_KEYS, 'utf8').split('\n')) {
    if (line === '') continue;
    const i = line.indexOf('\t');
    const j = line.indexOf('\t', i + 1);
    byColo[line.slice(0, i)].push([line.slice(i + 1, j), line.slice(j + 1)]);
  }
  const c = new Client();
  await c.connect();
  for (const colo of COLOS) {
    const per = MODES.map(() => []);
    byColo[colo].forEach((gk, i) => per[i % MODES.length].push(gk));
    for (const [, key] of per[0]) check(await c.query(insertSQL(colo, c.escapeLiteral(key), 1)), key);
    for (const [, key] of per[1]) check(await c.query(insertSQL(colo, '$1', 2), [key]), key);
    for (const [, key] of per[2]) {
      check(await c.query({ name: `ins_${colo}`, text: insertSQL(colo, '$1', 3), values: [key] }), key);
    }
    const groups = new Map();
    for (const [group, key] of per[3]) {
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(key);
    }
    let rolled = 0;
    for (const group of [...groups.keys()].sort()) {
      const keys = groups.get(group);
      const first = keys.slice(0, 5);
      await c.query('BEGIN');
      for (const key of first) check(await c.query(insertSQL(colo, '$1', 0), [key]), key);
      await c.query('ROLLBACK');
      rolled += first.length;
      for (let at = 0; at < keys.length; at += 5) {
        await c.query('BEGIN');
        for (const key of keys.slice(at, at + 5)) check(await c.query(insertSQL(colo, '$1', 4), [key]), key);
        await c.query('COMMIT');
      }
    }
    MODES.forEach((mode, m) => console.log(`inserted ${colo} ${mode} ${m + 1} ${per[m].length}`));
    console.log(`rolledback ${colo} tx ${rolled}`);
  }
  for (const colo of COLOS) {
    const [table, col] = TABLE[colo];
    let rows = 0;
    for (const [, key] of byColo[colo]) {
      const r = await c.query({ text: `SELECT count(*) FROM ${table} WHERE ${col} = $1`, values: [key], rowMode: 'array' });
      rows += Number(r.rows[0][0]);
    }
    console.log(`read ${colo} ${rows}`);
  }
  await c.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
