// Package testcert makes throwaway certificates as PEM files: a CA and the
// server and client certificates it signs. The tests that need TLS (the
// pooler's, the end-to-end ones, the LDAP server's) and the benchmark's TLS
// logins use it.
package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// CA is a throwaway certificate authority, valid from an hour ago for a day.
type CA struct {
	Cert *x509.Certificate
	File string         // its certificate, PEM
	Pool *x509.CertPool // holding only it, for a client that verifies
	key  crypto.Signer
}

// serial numbers the certificates made in this process.
var serial atomic.Int64

// NewCA makes a CA named name (an ECDSA P-256 key) and writes its
// certificate to dir/ca.crt.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: cert, File: filepath.Join(dir, "ca.crt"), Pool: x509.NewCertPool(), key: key}
	ca.Pool.AddCert(cert)
	if err := writePEM(ca.File, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// Server names a server certificate: its common name and the addresses and
// host names it is for.
type Server struct {
	CommonName string
	IPs        []net.IP
	DNSNames   []string
}

// Localhost is a server certificate for 127.0.0.1.
var Localhost = Server{CommonName: "127.0.0.1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}

// Issue signs a server certificate for key (nil: a new ECDSA P-256 one)
// and writes it and the key, PKCS#8, to dir/base.crt and dir/base.key (the
// key readable by its owner only).
func (ca *CA) Issue(dir, base string, s Server, key crypto.Signer) (certFile, keyFile string, err error) {
	return ca.sign(dir, base, key, &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.CommonName},
		IPAddresses: s.IPs, DNSNames: s.DNSNames,
		// Key encipherment too: TLS 1.2's RSA key exchange needs it.
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// IssueClient signs a client certificate whose common name is cn, for a new
// ECDSA P-256 key, and writes both as Issue does.
func (ca *CA) IssueClient(dir, base, cn string) (certFile, keyFile string, err error) {
	return ca.sign(dir, base, nil, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// sign completes tmpl (serial, validity), signs it for key (nil: a new
// ECDSA P-256 one) and writes the certificate and the key.
func (ca *CA) sign(dir, base string, key crypto.Signer, tmpl *x509.Certificate) (certFile, keyFile string, err error) {
	if key == nil {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return "", "", err
		}
	}
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return "", "", err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", pk, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
