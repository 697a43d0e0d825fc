// Package drivers is pgturnstile's driver matrix: real client drivers, in
// their default settings, run the same scenarios against PostgreSQL directly
// and through pgturnstile in transaction mode, and must get identical
// results.
//
// Drivers: pgx v5 (QueryExecModeCacheStatement — its default —,
// CacheDescribe, DescribeExec, Exec, SimpleProtocol, and SendBatch in each),
// lib/pq, libpq through psql and pgbench (-M simple, extended, prepared),
// node-postgres (named queries and pg-cursor; programs in node/), psycopg 3
// (prepare_threshold=0 and pipeline mode; programs in python/) and pgjdbc
// (prepareThreshold=1, batches, setFetchSize with autocommit off; programs
// in java/, compiled at test time).
//
// Scenarios, as far as a driver can do them:
//
//	prepared  10 concurrent clients, each 100 transactions that run the same
//	          prepared statements (1,000 transactions in all)
//	pipeline  10 concurrent clients, each one pipeline/batch of 60 statements
//	copy      COPY FROM STDIN of 100,000 rows from a file, then COPY TO STDOUT,
//	          compared byte for byte with the file
//	error     an error mid-transaction (tagged with the client id), the next
//	          statement refused with 25P02, ROLLBACK, then a good query
//	rows      a 100,000-row result, hashed
//	types     unicode text, bytea, numeric and timestamptz sent as parameters
//	          and compared exactly, on the way in and on the way back
//
// Each run prints one line per scenario (or a few); the test compares the
// lines of the direct run, of the pgturnstile run and of the golden file
// testdata/<driver>.golden (regenerate with `go test ./integration/drivers
// -update`). Each pgturnstile run has its own pooler with pool_mode =
// transaction and default_pool_size = 2, shared by the run's 10 or more
// clients. TestNoCrossTalk tags every query with its client id and a nonce
// and checks every row and error that comes back; TestPgbenchPrepared50
// runs pgbench -M prepared -c 50 -j 2 -T 10 through a pool of 10.
//
// The sharding router's driver programs (java/Shard.java, python/shard.py,
// node/shard.js) are not run here: package integration's TestShardDrivers
// runs them against its two-server shard rig.
//
// TestMain starts one throwaway PostgreSQL 15, as in package integration.
// The non-Go runtimes are installed by scripts/test-deps.sh; a missing one
// fails its test with that command, it is never skipped. -short skips the
// whole package.
//
// Linux only: the tests run PostgreSQL and the pooler as child processes
// (process groups, Pdeathsig, credentials), so every file has the build
// tag linux.
package drivers
