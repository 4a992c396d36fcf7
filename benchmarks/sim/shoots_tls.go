package sim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// certValidity is how long the generated CA and serving certificate are valid.
const certValidity = 24 * time.Hour

// servingTLS is the TLS identity of a ShootServer: its own CA and a serving certificate for
// 127.0.0.1 and localhost signed by it.
type servingTLS struct {
	caPEM []byte
	cert  tls.Certificate
}

// newServingTLS generates an ECDSA P-256 CA and a serving certificate signed by it, both valid from
// now (less a minute of clock skew) for a day.
func newServingTLS(now time.Time) (*servingTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	caTemplate := certTemplate(now, "dwd-sim-shoots-ca")
	caTemplate.IsCA = true
	caTemplate.BasicConstraintsValid = true
	caTemplate.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	cert, err := newServingCert(now, caCert, caKey)
	if err != nil {
		return nil, err
	}
	return &servingTLS{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert: cert}, nil
}

// newServingCert generates a serving certificate for 127.0.0.1 and localhost signed by the CA.
func newServingCert(now time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the serving key: %w", err)
	}
	template := certTemplate(now, "127.0.0.1")
	template.KeyUsage = x509.KeyUsageDigitalSignature
	template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	template.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	template.DNSNames = []string{"localhost"}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing the serving certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// certTemplate returns the fields common to both certificates, with a random serial number.
func certTemplate(now time.Time, commonName string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand never fails
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
	}
}
