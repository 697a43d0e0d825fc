package main
import (
 _ "github.com/jackc/pgx/v5"
 _ "github.com/jackc/pgx/v5/pgconn"
 _ "github.com/jackc/pgx/v5/pgproto3"
 _ "github.com/lib/pq"
 _ "golang.org/x/crypto/pbkdf2"
)
func main(){}
