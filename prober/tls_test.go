package prober

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// The shoot's API server is verified as its kubeconfig says, as the original's clientcmd does: against
// the kubeconfig's CA (the system roots without one), under its tls-server-name, or, only where
// --allow-insecure-shoot-kubeconfigs allows it (labs), not at all with insecure-skip-tls-verify; the
// kubeconfig's client certificate is the one presented.

// testCA is a certificate authority of a TLS test; it issues server and client certificates.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate of the CA for cn, valid for usage and for names (DNS names or IPs) as
// long as the CA, with its key, in PEM.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: ca.cert.NotBefore, NotAfter: ca.cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// tlsShoot is a shoot API server on loopback that answers /version over TLS with a certificate of ca for
// names. When clientCA is set, it requires a client certificate of that CA.
func tlsShoot(t *testing.T, ca *testCA, clientCA *testCA, names ...string) *httptest.Server {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, "kube-apiserver", x509.ExtKeyUsageServerAuth, names...)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
	}))
	server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		server.TLS.ClientAuth, server.TLS.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	server.Config.ErrorLog = quietLog()
	server.StartTLS()
	t.Cleanup(server.Close)
	return server
}

// servedCertificate returns, in PEM, the certificate the TLS server at url serves (httptest's own
// certificate is its own CA).
func servedCertificate(t *testing.T, url string) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the certificate only
	require.NoError(t, err)
	defer conn.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: conn.ConnectionState().PeerCertificates[0].Raw})
}

// quietLog is the error log of a test server whose failed handshakes are what a test makes.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// tlsKubeconfig is a kubeconfig for server whose cluster has the given TLS fields ([]byte values are
// written base64-encoded, as kubeconfigs carry their -data fields) and whose user is user.
func tlsKubeconfig(server string, cluster, user map[string]any) []byte {
	c := map[string]any{"server": server}
	for k, v := range cluster {
		c[k] = v
	}
	data, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": c}},
		"contexts": []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u"}}},
		"users":    []any{map[string]any{"name": "u", "user": user}},
	})
	return data
}

// probeVersion builds the client of a Secret holding kubeconfig and calls the API server probe.
func probeVersion(t *testing.T, kubeconfig []byte) error {
	t.Helper()
	c, err := (&ShootClients{Timeout: 5 * time.Second}).For(secret("1", kubeconfig))
	require.NoError(t, err, "the kubeconfig is usable")
	return c.Version(context.Background())
}

// verification names how a probe failed to verify the server: "unknown authority", "wrong name", or
// "other" for any other error ("" for none).
func verification(err error) string {
	var authority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &authority):
		return "unknown authority"
	case errors.As(err, &hostname):
		return "wrong name"
	}
	return "other"
}

func TestShootTLSIsVerifiedAsTheKubeconfigSays(t *testing.T) {
	shootCA, otherCA := newTestCA(t, "shoot-ca"), newTestCA(t, "other-ca")
	token := map[string]any{"token": "t"}
	byIP := tlsShoot(t, shootCA, nil, "127.0.0.1")
	byName := tlsShoot(t, shootCA, nil, "api.shoot.internal") // valid for a name only, served on loopback
	tests := []struct {
		name    string
		server  *httptest.Server
		cluster map[string]any
		want    string // verification of the outcome
	}{
		{"the kubeconfig's CA", byIP, map[string]any{"certificate-authority-data": shootCA.pem}, ""},
		{"another CA", byIP, map[string]any{"certificate-authority-data": otherCA.pem}, "unknown authority"},
		{"no CA: the system roots", byIP, nil, "unknown authority"},
		{"insecure-skip-tls-verify: false", byIP, map[string]any{"insecure-skip-tls-verify": false}, "unknown authority"},
		{"the server's name is checked", byName, map[string]any{"certificate-authority-data": shootCA.pem}, "wrong name"},
		{"tls-server-name", byName, map[string]any{"certificate-authority-data": shootCA.pem, "tls-server-name": "api.shoot.internal"}, ""},
		{"another tls-server-name", byName, map[string]any{"certificate-authority-data": shootCA.pem, "tls-server-name": "api.other.internal"}, "wrong name"},
		{"tls-server-name with another CA", byName, map[string]any{"certificate-authority-data": otherCA.pem, "tls-server-name": "api.shoot.internal"}, "unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := probeVersion(t, tlsKubeconfig(tt.server.URL, tt.cluster, token))
			assert.Equal(t, tt.want, verification(err), "error: %v", err)
		})
	}
}

func TestInsecureKubeconfigsAreForLabsOnly(t *testing.T) {
	shootCA := newTestCA(t, "shoot-ca")
	server := tlsShoot(t, shootCA, nil, "127.0.0.1")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
	}))
	t.Cleanup(plain.Close)
	const token = "tok3n-that-must-not-show"
	user := map[string]any{"token": token}
	tests := []struct {
		name       string
		kubeconfig []byte
		field      string // named by the error when refused
		forLabs    bool   // --allow-insecure-shoot-kubeconfigs lets it through
	}{
		{"insecure-skip-tls-verify", tlsKubeconfig(server.URL, map[string]any{"insecure-skip-tls-verify": true}, user), "insecure-skip-tls-verify", true},
		{"a plain http:// server", tlsKubeconfig(plain.URL, nil, user), "not https", true},
		{"a host:port without a CA, which client-go talks to in plain HTTP",
			tlsKubeconfig(strings.TrimPrefix(plain.URL, "http://"), nil, user), "not https", true},
		{"proxy-url", tlsKubeconfig(server.URL, map[string]any{"certificate-authority-data": shootCA.pem,
			"proxy-url": "http://dwd:pr0xy-passw0rd@127.0.0.1:1"}, user), "proxy-url", false},
		{"impersonation", tlsKubeconfig(server.URL, map[string]any{"certificate-authority-data": shootCA.pem},
			map[string]any{"token": token, "as": "system:admin"}), "impersonates", false},
		{"impersonated groups", tlsKubeconfig(server.URL, map[string]any{"certificate-authority-data": shootCA.pem},
			map[string]any{"token": token, "as-groups": []string{"system:masters"}}), "impersonates", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&ShootClients{Timeout: 5 * time.Second}).For(secret("1", tt.kubeconfig))
			require.Error(t, err, "refused by default")
			assert.Contains(t, err.Error(), "kubeconfig Secret shoot--p--s/access")
			assert.Contains(t, err.Error(), tt.field)
			for _, secretValue := range []string{token, "pr0xy-passw0rd", "127.0.0.1"} {
				assert.NotContains(t, err.Error(), secretValue, "never the Secret's values")
			}

			lab := &ShootClients{Timeout: 5 * time.Second, AllowInsecure: true}
			c, err := lab.For(secret("1", tt.kubeconfig))
			if !tt.forLabs {
				require.Error(t, err, "refused even in a lab")
				assert.Contains(t, err.Error(), tt.field)
				return
			}
			require.NoError(t, err)
			assert.NoError(t, c.Version(context.Background()), "reached as written, unverified")
		})
	}
}

func TestInsecureSkipTLSVerifyWithACAIsRefused(t *testing.T) {
	// client-go refuses a CA with insecure-skip-tls-verify (which would not be verified as written);
	// the kubeconfig is then unusable, and the error says so without the CA.
	shootCA := newTestCA(t, "shoot-ca")
	server := tlsShoot(t, shootCA, nil, "127.0.0.1")
	_, err := (&ShootClients{}).For(secret("1", tlsKubeconfig(server.URL,
		map[string]any{"certificate-authority-data": shootCA.pem, "insecure-skip-tls-verify": true}, map[string]any{"token": "t"})))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "insecure")
	assert.NotContains(t, err.Error(), string(shootCA.pem[30:60]))
}

func TestTheKubeconfigsClientCertificateIsPresented(t *testing.T) {
	shootCA, clientCA, otherCA := newTestCA(t, "shoot-ca"), newTestCA(t, "client-ca"), newTestCA(t, "other-ca")
	server := tlsShoot(t, shootCA, clientCA, "127.0.0.1")
	cluster := map[string]any{"certificate-authority-data": shootCA.pem}
	certPEM, keyPEM := clientCA.issue(t, "system:dependency-watchdog", x509.ExtKeyUsageClientAuth)
	otherCertPEM, otherKeyPEM := otherCA.issue(t, "system:dependency-watchdog", x509.ExtKeyUsageClientAuth)
	tests := []struct {
		name string
		user map[string]any
		ok   bool
	}{
		{"the kubeconfig's client certificate", map[string]any{"client-certificate-data": certPEM, "client-key-data": keyPEM}, true},
		{"a token only", map[string]any{"token": "t"}, false},
		{"a client certificate of another CA", map[string]any{"client-certificate-data": otherCertPEM, "client-key-data": otherKeyPEM}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := probeVersion(t, tlsKubeconfig(server.URL, cluster, tt.user))
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestANewCAInTheSecretTakesEffectOnItsNextVersion(t *testing.T) {
	shootCA, otherCA := newTestCA(t, "shoot-ca"), newTestCA(t, "other-ca")
	server := tlsShoot(t, shootCA, nil, "127.0.0.1")
	clients := &ShootClients{Timeout: 5 * time.Second}
	versionWith := func(rv string, ca *testCA) error {
		c, err := clients.For(secret(rv, tlsKubeconfig(server.URL, map[string]any{"certificate-authority-data": ca.pem}, map[string]any{"token": "t"})))
		require.NoError(t, err)
		return c.Version(context.Background())
	}
	assert.Equal(t, "unknown authority", verification(versionWith("1", otherCA)))
	assert.NoError(t, versionWith("2", shootCA), "the corrected CA is used")
	// A verified connection of the version before stays with its client: the next version's CA decides.
	assert.Equal(t, "unknown authority", verification(versionWith("3", otherCA)))
}

func TestAShootOfAnotherCAIsNeverProbedNorScaled(t *testing.T) {
	// The cycle fixture's shoot serves httptest's certificate; with any other CA in the kubeconfig, the
	// API server probe fails and the probe reads no lease and scales nothing, however melted the
	// shoot. The prober reports it as a failed API server probe (result apiserver_failed): the
	// "Probe failing" log line, and the ProbeFailing Event once the dependents are scaled down.
	f := newCycleFixture(t, 5)
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	server := cycleServer(t, f)
	withCA := func(caPEM []byte) {
		setSecretData(t, f, map[string][]byte{KubeconfigKey: tlsKubeconfig(server,
			map[string]any{"certificate-authority-data": caPEM}, map[string]any{"token": "t"})})
	}

	withCA(newTestCA(t, "other-ca").pem)
	for i, result := range f.cycles(t, 6, 10*time.Second) {
		assert.Equal(t, resultAPIServer, result, "cycle %d", i)
	}
	_, started := f.flowStarted()
	assert.False(t, started)
	assert.Zero(t, f.shoot.cached.Load()+f.shoot.consistent.Load(), "no lease was read")

	// The same shoot with its own CA: probed, and its meltdown scaled down.
	withCA(servedCertificate(t, server))
	results := f.cycles(t, 6, 10*time.Second)
	assert.NotContains(t, results, resultAPIServer)
	assert.Positive(t, f.shoot.cached.Load(), "the leases are read")
	dir, started := f.flowStarted()
	require.True(t, started, "%v", results)
	assert.Equal(t, scaler.Down, dir)
}

// cycleServer returns the URL of the cycle fixture's shoot API server, from its kubeconfig Secret.
func cycleServer(t *testing.T, f *cycleFixture) string {
	t.Helper()
	raw, err := clientcmd.Load(cycleSecret(t, f).Data[KubeconfigKey])
	require.NoError(t, err)
	return raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster].Server
}

// cycleSecret reads the cycle fixture's kubeconfig Secret from its seed.
func cycleSecret(t *testing.T, f *cycleFixture) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cycleNS, Name: f.m.Config.KubeConfigSecretName}
	require.NoError(t, f.m.Reader.Get(context.Background(), key, s))
	return s
}

// setSecretData replaces the data of the cycle fixture's kubeconfig Secret: a new version of it.
func setSecretData(t *testing.T, f *cycleFixture, data map[string][]byte) {
	t.Helper()
	s := cycleSecret(t, f)
	s.Data = data
	require.NoError(t, f.m.Reader.(machineReader).Update(context.Background(), s))
}
