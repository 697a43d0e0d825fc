//go:build linux

package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"

	"github.com/pgturnstile/pgturnstile/internal/testcert"
)

// certFiles is a key and certificate in PEM files, as client_tls_key_file
// and client_tls_cert_file take them.
type certFiles struct{ Key, Cert string }

// writeCerts makes a server certificate of each kind the TLS workloads use
// ("ecdsa": P-256, "rsa": 2048 bits) in dir, for 127.0.0.1, signed by a
// throwaway CA. Both poolers get the same files; pgbench's sslmode=require
// does not verify them. chown hands them to the OS user the poolers run as.
func writeCerts(dir string, chown func(string) error) (map[string]certFiles, error) {
	ca, err := testcert.NewCA(dir, "pgturnstile bench CA")
	if err != nil {
		return nil, err
	}
	out := map[string]certFiles{}
	for _, kind := range []string{"ecdsa", "rsa"} {
		var key crypto.Signer
		switch kind {
		case "ecdsa":
			key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		case "rsa":
			key, err = rsa.GenerateKey(rand.Reader, 2048)
		}
		if err != nil {
			return nil, err
		}
		server := testcert.Server{CommonName: "127.0.0.1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		cert, keyFile, err := ca.Issue(dir, "tls-"+kind, server, key)
		if err != nil {
			return nil, fmt.Errorf("%s certificate: %v", kind, err)
		}
		for _, f := range []string{keyFile, cert} {
			if err := chown(f); err != nil {
				return nil, err
			}
		}
		out[kind] = certFiles{Key: keyFile, Cert: cert}
	}
	return out, nil
}
