package prober

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// No error, log line or Event of the prober quotes the token, the client key or the client
// certificate of a kubeconfig Secret, whatever is wrong with it: each case below runs the probe of a
// shoot whose dependents are scaled down (so that the ProbeFailing Event, which carries the last
// error, is recorded too), logging at every verbosity through the zap logger dwd runs with.

// credentials are what a kubeconfig Secret must never let out: a token, and a client key and
// certificate.
type credentials struct {
	token           string
	certPEM, keyPEM []byte
}

func newCredentials(t *testing.T, ca *testCA, user string) credentials {
	t.Helper()
	random := make([]byte, 16)
	_, err := rand.Read(random)
	require.NoError(t, err)
	c := credentials{token: "dwd-test-token-" + hex.EncodeToString(random)}
	c.certPEM, c.keyPEM = ca.issue(t, user, x509.ExtKeyUsageClientAuth)
	return c
}

// forms are the ways credentials can be written or quoted: as they are, base64-encoded as in a
// kubeconfig's -data fields, and the base64 body of each PEM block.
func (c credentials) forms() map[string]string {
	forms := map[string]string{"token": c.token, "token, base64": base64.StdEncoding.EncodeToString([]byte(c.token))}
	for name, p := range map[string][]byte{"client key": c.keyPEM, "client certificate": c.certPEM} {
		forms[name+", base64"] = base64.StdEncoding.EncodeToString(p)
		block, _ := pem.Decode(p)
		forms[name+", PEM body"] = base64.StdEncoding.EncodeToString(block.Bytes)
	}
	return forms
}

// secretMaterial is the credentials of a kubeconfig, other credentials of the same CA (for a key
// that does not match the certificate), and the shoot's CA, which is public and may be quoted.
type secretMaterial struct {
	credentials
	other credentials
	ca    *testCA
}

func newSecretMaterial(t *testing.T) secretMaterial {
	t.Helper()
	ca := newTestCA(t, "shoot-ca")
	return secretMaterial{credentials: newCredentials(t, ca, "system:dependency-watchdog"), other: newCredentials(t, ca, "someone-else"), ca: ca}
}

// leakWindow is how many consecutive characters of a form count as quoting it.
const leakWindow = 12

// leaked lists the forms of either credentials of which out holds leakWindow or more consecutive
// characters, leaving out those that the other credentials and the CA hold too, in any base64
// alignment: what they share is structure (the token's prefix, PEM headers, algorithm identifiers,
// the issuer, the validity), not secret.
func (m secretMaterial) leaked(out string) []string {
	var found []string
	for _, pair := range [][2]credentials{{m.credentials, m.other}, {m.other, m.credentials}} {
		shared := structure(pair[1], m.ca)
		for name, form := range pair[0].forms() {
			for i := 0; i+leakWindow <= len(form); i++ {
				w := form[i : i+leakWindow]
				if strings.Contains(out, w) && !strings.Contains(shared, w) {
					found = append(found, fmt.Sprintf("%s of %s (%q)", name, pair[0].token, w))
					break
				}
			}
		}
	}
	sort.Strings(found)
	return found
}

// structure is what other credentials and the CA show of themselves in every form and every base64
// alignment.
func structure(other credentials, ca *testCA) string {
	var texts []string
	for _, raw := range [][]byte{[]byte(other.token), other.certPEM, other.keyPEM, ca.pem, ca.cert.Raw} {
		texts = append(texts, string(raw))
		if block, _ := pem.Decode(raw); block != nil {
			texts = append(texts, base64.StdEncoding.EncodeToString(block.Bytes))
			raw = block.Bytes
		}
		for pad := range 3 {
			texts = append(texts, base64.StdEncoding.EncodeToString(append(make([]byte, pad), raw...)))
		}
	}
	for _, p := range [][]byte{other.certPEM, other.keyPEM, ca.pem} {
		for pad := range 3 {
			texts = append(texts, base64.StdEncoding.EncodeToString(append(make([]byte, pad), p...)))
		}
	}
	return strings.Join(texts, "\n")
}

// secretCase is a kubeconfig Secret with something wrong, and the words its error must hold.
type secretCase struct {
	name string
	data func(server string, m secretMaterial) map[string][]byte
	want string
}

// kubeconfigData is a Secret's data holding a kubeconfig for server, with the shoot's CA and user.
func kubeconfigData(server string, m secretMaterial, user map[string]any) map[string][]byte {
	return map[string][]byte{KubeconfigKey: tlsKubeconfig(server, map[string]any{"certificate-authority-data": m.ca.pem}, user)}
}

// fullUser is a user with every credential of the material.
func fullUser(m secretMaterial) map[string]any {
	return map[string]any{"token": m.token, "client-certificate-data": m.certPEM, "client-key-data": m.keyPEM}
}

// withUser is fullUser with the given fields changed (nil deletes one).
func withUser(m secretMaterial, fields map[string]any) map[string]any {
	u := fullUser(m)
	for k, v := range fields {
		if v == nil {
			delete(u, k)
		} else {
			u[k] = v
		}
	}
	return u
}

func brokenSecrets() []secretCase {
	kc := func(user func(secretMaterial) map[string]any) func(string, secretMaterial) map[string][]byte {
		return func(server string, m secretMaterial) map[string][]byte { return kubeconfigData(server, m, user(m)) }
	}
	return []secretCase{
		{"garbage YAML", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: append([]byte("{{{\n"), kubeconfigData(server, m, fullUser(m))[KubeconfigKey]...)}
		}, "invalid kubeconfig"},
		{"cut off in the token", func(server string, m secretMaterial) map[string][]byte {
			data := kubeconfigData(server, m, fullUser(m))[KubeconfigKey]
			return map[string][]byte{KubeconfigKey: data[:bytes.Index(data, []byte(m.token))+len(m.token)/2]}
		}, "invalid kubeconfig"},
		{"the token alone", func(_ string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: []byte(m.token)}
		}, "invalid kubeconfig"},
		{"a Secret manifest", func(server string, m secretMaterial) map[string][]byte {
			manifest := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: access}\ndata:\n  kubeconfig: %s\n  token: %s\n",
				base64.StdEncoding.EncodeToString(kubeconfigData(server, m, fullUser(m))[KubeconfigKey]), m.token)
			return map[string][]byte{KubeconfigKey: []byte(manifest)}
		}, "invalid kubeconfig"},
		{"the wrong key", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{"kubeconfig.yaml": kubeconfigData(server, m, fullUser(m))[KubeconfigKey], "token": []byte(m.token)}
		}, `no "kubeconfig" key`},
		{"an exec plugin", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/echo",
				"args": []string{m.token}, "env": []any{map[string]any{"name": "TOKEN", "value": m.token}}, "interactiveMode": "Never"}})
		}), "exec plugin"},
		{"an auth provider", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"auth-provider": map[string]any{"name": "oidc",
				"config": map[string]any{"id-token": m.token, "refresh-token": m.token}}})
		}), "auth provider"},
		{"a token file", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"tokenFile": "/var/run/secrets/token"})
		}), "refers to files"},
		{"a client certificate file", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"client-certificate": "/etc/dwd/tls.crt"})
		}), "refers to files"},
		{"a CA file", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: tlsKubeconfig(server, map[string]any{"certificate-authority": "/etc/dwd/ca.crt"}, fullUser(m))}
		}, "refers to files"},
		{"the client key as the CA", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: tlsKubeconfig(server, map[string]any{"certificate-authority-data": m.keyPEM}, fullUser(m))}
		}, "root certificates"},
		{"a CA that is not PEM", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: tlsKubeconfig(server, map[string]any{"certificate-authority-data": []byte(m.token)}, fullUser(m))}
		}, "root certificates"},
		{"a client key of another certificate", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"client-key-data": m.other.keyPEM})
		}), "private key does not match"},
		{"key and certificate swapped", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"client-certificate-data": m.keyPEM, "client-key-data": m.certPEM})
		}), "switched"},
		{"a client key without its certificate (client-go leaves it unused)", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"client-certificate-data": nil})
		}), "certificate signed by unknown authority"},
		{"key data that is not base64", func(server string, m secretMaterial) map[string][]byte {
			data := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: %q}}]\n"+
				"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: %s, client-key-data: '%s!'}}]\n",
				server, m.token, strings.ReplaceAll(string(m.keyPEM), "\n", " "))
			return map[string][]byte{KubeconfigKey: []byte(data)}
		}, "base64"},
		{"a token and a password", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"username": "admin", "password": m.token})
		}), "more than one authentication method"},
		{"a token of the wrong type", kc(func(m secretMaterial) map[string]any {
			return withUser(m, map[string]any{"token": []string{m.token}})
		}), "cannot unmarshal"},
		{"no server", func(_ string, m secretMaterial) map[string][]byte { return kubeconfigData("", m, fullUser(m)) }, "no server"},
		{"another CA than the server's", kc(fullUser), "certificate signed by unknown authority"},
	}
}

// report is what the prober let out about a shoot: the error of its first probe cycle, its log and
// its Events.
type report struct {
	err    error
	log    string
	events []string
}

// reportBroken runs the probe of a shoot whose kubeconfig Secret holds data, its dependents scaled
// down, for enough cycles to record the ProbeFailing Event.
func reportBroken(t *testing.T, data func(string, secretMaterial) map[string][]byte, m secretMaterial) report {
	t.Helper()
	f := newCycleFixture(t, 3)
	var log logtest.Buffer
	f.m.Log = ctrlzap.New(ctrlzap.WriteTo(&log), ctrlzap.Level(zapcore.Level(-127)))
	f.scaledDown(t)
	setSecretData(t, f, data(cycleServer(t, f), m))
	_, err := f.p.cycle(context.Background())
	require.Error(t, err)
	for range failingEventAfter + 1 {
		f.p.run(context.Background())
	}
	r := report{err: err, log: log.String()}
	for len(f.recorder.Events) > 0 {
		r.events = append(r.events, <-f.recorder.Events)
	}
	return r
}

func TestBrokenKubeconfigSecretsAreReportedWithoutTheirSecrets(t *testing.T) {
	m := newSecretMaterial(t)
	for _, tc := range brokenSecrets() {
		t.Run(tc.name, func(t *testing.T) {
			r := reportBroken(t, tc.data, m)
			assert.Contains(t, r.err.Error(), tc.want)
			require.Contains(t, r.log, "Probe failing", "the failure is logged")
			require.NotEmpty(t, r.events, "the failure is recorded in an Event")
			assert.Empty(t, m.leaked(r.err.Error()), "the error: %s", r.err)
			assert.Empty(t, m.leaked(r.log), "the log:\n%s", r.log)
			assert.Empty(t, m.leaked(strings.Join(r.events, "\n")), "the Events: %q", r.events)
		})
	}
}

func TestLeakCheckFindsQuotedMaterial(t *testing.T) {
	m := newSecretMaterial(t)
	keyBody := m.forms()["client key, PEM body"]
	assert.Empty(t, m.leaked("x509: certificate signed by unknown authority"))
	assert.Empty(t, m.leaked(string(m.ca.pem)+base64.StdEncoding.EncodeToString(m.ca.pem)), "the CA is public")
	assert.NotEmpty(t, m.leaked("invalid: "+m.token[len(m.token)-leakWindow:]))
	assert.NotEmpty(t, m.leaked(`{"error":"`+keyBody[len(keyBody)-40:len(keyBody)-20]+`"}`))
	assert.NotEmpty(t, m.leaked(base64.StdEncoding.EncodeToString(m.certPEM)[100:]))
	assert.NotEmpty(t, m.leaked(string(m.other.keyPEM)), "the other credentials count too")
}

// leakingSecrets are broken kubeconfigs whose decoders' errors quote them: the decoders under
// restConfigFromSecret echo values in some of their errors, which KubeconfigError withholds.
func leakingSecrets() []secretCase {
	yamlUser := func(server string, m secretMaterial, userLines string) map[string][]byte {
		data := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: %q}\n"+
			"contexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user:\n%s", server, userLines)
		return map[string][]byte{KubeconfigKey: []byte(data)}
	}
	return []secretCase{
		// sigs.k8s.io/yaml's YAMLToJSON quotes the whole value under a map key it cannot convert (a null
		// key here).
		{"a null key over the credentials", func(server string, m secretMaterial) map[string][]byte {
			return yamlUser(server, m, fmt.Sprintf("    ~:\n      token: %s\n      client-key-data: %s\n",
				m.token, base64.StdEncoding.EncodeToString(m.keyPEM)))
		}, "invalid kubeconfig"},
		// go-yaml quotes a scalar that does not decode as its tag.
		{"a mistagged token", func(server string, m secretMaterial) map[string][]byte {
			return yamlUser(server, m, "    token: !!int "+m.token+"\n")
		}, "invalid kubeconfig"},
		// clientcmd's validation quotes a proxy-url it refuses, password included; the gate refuses
		// every proxy-url before, naming the field only.
		{"a proxy URL with a password and an unsupported scheme", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: tlsKubeconfig(server,
				map[string]any{"certificate-authority-data": m.ca.pem, "proxy-url": "ftp://dwd:" + m.token + "@127.0.0.1:1"}, map[string]any{"token": "t"})}
		}, "proxy-url"},
		// url.Parse quotes a URL it cannot parse, password included.
		{"a server URL with a password that does not parse", func(server string, m secretMaterial) map[string][]byte {
			return map[string][]byte{KubeconfigKey: tlsKubeconfig("https://dwd:"+m.token+"@shoot api:443",
				map[string]any{"certificate-authority-data": m.ca.pem}, map[string]any{"token": "t"})}
		}, "invalid kubeconfig server"},
	}
}

func TestBrokenKubeconfigSecretsThatQuoteThemselves(t *testing.T) {
	m := newSecretMaterial(t)
	for _, tc := range leakingSecrets() {
		t.Run(tc.name, func(t *testing.T) {
			r := reportBroken(t, tc.data, m)
			assert.Contains(t, r.err.Error(), tc.want)
			assert.Empty(t, m.leaked(r.err.Error()), "the error: %s", r.err)
			assert.Empty(t, m.leaked(r.log), "the log:\n%s", r.log)
			assert.Empty(t, m.leaked(strings.Join(r.events, "\n")), "the Events: %q", r.events)
		})
	}
}

func TestKubeconfigErrorWithholdsOnlyQuotedValues(t *testing.T) {
	kubeconfig := []byte("apiVersion: v1\nclusters:\n- cluster:\n    server: https://dwd:s3cr3t-pass@api.example:443\n" +
		"users:\n- user:\n    token: eyJhbGciOiJSUzI1NiJ9.payload.signature\n")
	cause := errors.New("yaml: line 3: mapping values are not allowed in this context")
	assert.Equal(t, "invalid kubeconfig: "+cause.Error(), KubeconfigError("invalid kubeconfig", cause, kubeconfig).Error(),
		"an error that quotes no value keeps its details")
	assert.ErrorIs(t, KubeconfigError("invalid kubeconfig", cause, kubeconfig), cause)
	for _, quoted := range []string{
		"cannot unmarshal !!int `eyJhbGciOiJSUzI1NiJ9.payload.signature` into string",
		`parse "https://dwd:s3cr3t-pass@api example": invalid character`,
		"truncated: ...JSUzI1NiJ9.pay...",
	} {
		err := KubeconfigError("invalid kubeconfig", errors.New(quoted), kubeconfig)
		assert.NotContains(t, err.Error(), "s3cr3t")
		assert.NotContains(t, err.Error(), "JSUzI1Ni")
		assert.Contains(t, err.Error(), "invalid kubeconfig (the details are withheld")
	}
	assert.Equal(t, "invalid kubeconfig: unknown field certificate-authority-data",
		KubeconfigError("invalid kubeconfig", errors.New("unknown field certificate-authority-data"), kubeconfig).Error(),
		"a field name is no value")
}
