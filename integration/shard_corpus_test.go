//go:build linux

package integration

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnroutableCorpusIsValidSQL gives the router's refusal corpus its
// ground truth: PostgreSQL itself runs every statement of
// shard/testdata/unroutable.sql against shard/testdata/schema.sql (each
// in a transaction rolled back; VACUUM alone, as it must be). The shard
// package's TestUnroutableCorpus then holds the scanner to refusing each
// one: so a refusal is never of SQL that Postgres would call a syntax
// error (42601), and never of SQL that is not valid at all.
func TestUnroutableCorpusIsValidSQL(t *testing.T) {
	needPG(t)
	const db = "shardcorpus"
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 3*time.Minute)
	if _, err := su.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = su.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	})
	conn := directSuperuser(t, db)
	schema, err := os.ReadFile("../shard/testdata/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PgConn().Exec(ctx, string(schema)).Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("../shard/testdata/unroutable.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		sql := strings.TrimSpace(sc.Text())
		if sql == "" || strings.HasPrefix(sql, "--") {
			continue
		}
		n++
		text := "BEGIN; " + sql + "; ROLLBACK"
		if strings.HasPrefix(sql, "VACUUM") {
			text = sql
		}
		if _, err := conn.PgConn().Exec(ctx, text).ReadAll(); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				t.Errorf("%s: Postgres says %s: %s", sql, pe.Code, pe.Message)
			} else {
				t.Fatalf("%s: %v", sql, err)
			}
			if _, err := conn.PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 500 {
		t.Fatalf("corpus has %d statements, want at least 500", n)
	}
}
