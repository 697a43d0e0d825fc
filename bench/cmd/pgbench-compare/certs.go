//go:build linux

package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certFiles is a key and certificate in PEM files, as client_tls_key_file
// and client_tls_cert_file take them.
type certFiles struct{ Key, Cert string }

// writeCerts makes a self-signed server certificate of each kind the TLS
// workloads use ("ecdsa": P-256, "rsa": 2048 bits) in dir, for 127.0.0.1.
// Both poolers get the same files; pgbench's sslmode=require does not
// verify them. chown hands them to the OS user the poolers run as.
func writeCerts(dir string, chown func(string) error) (map[string]certFiles, error) {
	out := map[string]certFiles{}
	for _, kind := range []string{"ecdsa", "rsa"} {
		var key crypto.Signer
		var err error
		switch kind {
		case "ecdsa":
			key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		case "rsa":
			key, err = rsa.GenerateKey(rand.Reader, 2048)
		}
		if err != nil {
			return nil, err
		}
		cf, err := writeCert(dir, kind, key)
		if err != nil {
			return nil, fmt.Errorf("%s certificate: %v", kind, err)
		}
		for _, f := range []string{cf.Key, cf.Cert} {
			if err := chown(f); err != nil {
				return nil, err
			}
		}
		out[kind] = cf
	}
	return out, nil
}

func writeCert(dir, kind string, key crypto.Signer) (certFiles, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "127.0.0.1", Organization: []string{"pgturnstile bench"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return certFiles{}, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certFiles{}, err
	}
	cf := certFiles{Key: filepath.Join(dir, "tls-"+kind+".key"), Cert: filepath.Join(dir, "tls-"+kind+".crt")}
	if err := os.WriteFile(cf.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600); err != nil {
		return certFiles{}, err
	}
	if err := os.WriteFile(cf.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return certFiles{}, err
	}
	return cf, nil
}
