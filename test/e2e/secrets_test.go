package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// scanWindow is the length of the runs of a long secret's encodings the scanner looks for: long
// enough that no log line has one by chance, short enough that a piece of a PEM body or of a
// base64 blob is found.
const scanWindow = 32

// minSecret is the shortest secret form matched whole; shorter ones could match by chance.
const minSecret = 16

// secretScanner finds secret material in log lines: raw, as a PEM body, or base64-encoded at any
// offset of a larger blob (a kubeconfig in a Secret's data, a certificate in a kubeconfig).
type secretScanner struct {
	windows map[string]string // a run of scanWindow characters of a secret's form → which secret
	whole   map[string]string // a form shorter than scanWindow → which secret
}

func newSecretScanner() *secretScanner {
	return &secretScanner{windows: map[string]string{}, whole: map[string]string{}}
}

// add registers secret under the name what, in every form a log line could carry it.
func (s *secretScanner) add(what string, secret []byte) error {
	var forms []string
	forms = append(forms, normalize(string(secret)))
	forms = append(forms, base64Forms(secret)...)
	for rest := secret; ; {
		block, next := pem.Decode(rest)
		if block == nil {
			break
		}
		forms = append(forms, base64Forms(block.Bytes)...)
		rest = next
	}
	added := false
	for _, f := range forms {
		switch {
		case len(f) > scanWindow:
			for i := 0; i+scanWindow <= len(f); i++ {
				s.windows[f[i:i+scanWindow]] = what
			}
		case len(f) >= minSecret:
			s.whole[f] = what
		default:
			continue
		}
		added = true
	}
	if !added {
		return fmt.Errorf("%s: too short (%d bytes) to look for", what, len(secret))
	}
	return nil
}

// base64Forms are the runs of characters that data contributes to any standard or URL base64
// encoding it is part of: for each of the three offsets it can start at, its encoding without the
// characters its neighbours share.
func base64Forms(data []byte) []string {
	var forms []string
	for offset := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, offset), data...))
		enc = strings.TrimRight(enc, "=")
		if offset > 0 {
			enc = enc[min(4, len(enc)):] // the first group holds a neighbour's bytes
		}
		enc = enc[:max(0, len(enc)-4)] // so may the last
		url := strings.NewReplacer("+", "-", "/", "_").Replace(enc)
		forms = append(forms, enc, url)
	}
	return forms
}

// normalize takes out of a line what can fall into a secret's text in a log: line breaks, real or
// escaped, and blanks.
func normalize(line string) string {
	return strings.NewReplacer(`\r`, "", `\n`, "", "\r", "", "\n", "", " ", "", "\t", "").Replace(line)
}

// scanLine returns the name of the secret line carries, if any.
func (s *secretScanner) scanLine(line string) (string, bool) {
	n := normalize(line)
	for i := 0; i+scanWindow <= len(n); i++ {
		if what, ok := s.windows[n[i:i+scanWindow]]; ok {
			return what, true
		}
	}
	for f, what := range s.whole {
		if strings.Contains(n, f) {
			return what, true
		}
	}
	return "", false
}

// scanFiles scans every line of the files and returns "file:line: secret" for each that carries
// one, and how many lines it read.
func (s *secretScanner) scanFiles(paths []string) (findings []string, lines int, err error) {
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, lines, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for n := 1; sc.Scan(); n++ {
			lines++
			if what, ok := s.scanLine(sc.Text()); ok {
				findings = append(findings, fmt.Sprintf("%s:%d: %s", path, n, what))
			}
		}
		err = errors.Join(sc.Err(), f.Close())
		if err != nil {
			return nil, lines, fmt.Errorf("%s: %w", path, err)
		}
	}
	return findings, lines, nil
}

// addKubeconfig registers every credential and CA of a kubeconfig.
func (s *secretScanner) addKubeconfig(what string, kubeconfig []byte) error {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	secrets := map[string][]byte{}
	for name, c := range cfg.Clusters {
		secrets["CA of cluster "+name] = c.CertificateAuthorityData
	}
	for name, u := range cfg.AuthInfos {
		secrets["client certificate of user "+name] = u.ClientCertificateData
		secrets["client key of user "+name] = u.ClientKeyData
		secrets["token of user "+name] = []byte(u.Token)
		secrets["password of user "+name] = []byte(u.Password)
	}
	n := 0
	for name, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		if err := s.add(what+": "+name, secret); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s: no credential or CA in it", what)
	}
	return nil
}

// addSeedSecrets registers the seed's kubeconfig and every shoot's kubeconfig Secret in the seed.
func (s *secretScanner) addSeedSecrets(ctx context.Context, seed *sim.Seed) error {
	if err := s.addKubeconfig("the seed's kubeconfig", seed.Env.KubeConfig); err != nil {
		return err
	}
	secrets := &corev1.SecretList{}
	if err := seed.Env.Client.List(ctx, secrets); err != nil {
		return err
	}
	n := 0
	for _, secret := range secrets.Items {
		if secret.Name != sim.KubeconfigSecretName {
			continue
		}
		if err := s.addKubeconfig("Secret "+client.ObjectKeyFromObject(&secret).String(), secret.Data["kubeconfig"]); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no shoot kubeconfig Secret in the seed")
	}
	return nil
}

// requireNoSecretsInLogs fails the test naming every line of the logs in dir (*.log) that carries a
// secret of the seed, and requires that the logs hold debug lines, so that the scan covered them.
func requireNoSecretsInLogs(t *testing.T, ctx context.Context, seed *sim.Seed, dir string) {
	t.Helper()
	scanner := newSecretScanner()
	require.NoError(t, scanner.addSeedSecrets(ctx, seed))
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs, "no replica log in %s", dir)
	findings, lines, err := scanner.scanFiles(logs)
	require.NoError(t, err)
	require.Positive(t, lines)
	assert.Empty(t, findings, "secret material in the replicas' logs")
	debug, err := countLines(logs, `"level":"debug"`)
	require.NoError(t, err)
	require.Positive(t, debug, "the logs hold no debug line: the scan did not cover the debug level")
	t.Logf("Scanned %d log lines (%d at debug) of %d replica logs for secret material: none", lines, debug, len(logs))
}

// countLines counts the lines of the files that contain s.
func countLines(paths []string, s string) (int, error) {
	n := 0
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		n += strings.Count(string(data), s)
	}
	return n, nil
}

// TestSecretScannerFindsPlantedSecrets plants a kubeconfig's credentials in a log in the ways a log
// line could carry them, and checks that the scanner names each of those lines and no other.
func TestSecretScannerFindsPlantedSecrets(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	token := rand.Text()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["shoot"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["shoot"] = &clientcmdapi.AuthInfo{Token: token, ClientKeyData: keyPEM}
	kubeconfig, err := clientcmd.Write(*cfg)
	require.NoError(t, err)

	scanner := newSecretScanner()
	require.NoError(t, scanner.addKubeconfig("planted", kubeconfig))

	body := base64.StdEncoding.EncodeToString(der)
	escapedPEM, err := json.Marshal(string(keyPEM))
	require.NoError(t, err)
	secretJSON, err := json.Marshal(corev1.Secret{Data: map[string][]byte{"kubeconfig": kubeconfig}})
	require.NoError(t, err)
	lines := []string{
		`{"level":"info","msg":"Probing","shoot":"shoot--sim--s0001","kubeconfigSecret":"shoot-access-dependency-watchdog-probe"}`,
		`{"level":"debug","msg":"Request","header":"Authorization: Bearer ` + token + `"}`,
		`{"level":"debug","msg":"Client","key":` + string(escapedPEM) + `}`,
		`{"level":"debug","msg":"Piece","text":"…` + body[20:20+scanWindow] + `…"}`,
		`{"level":"debug","msg":"Secret","object":` + string(secretJSON) + `}`,
		`I0101 00:00:00.000000 1 x.go:1] token ` + base64.StdEncoding.EncodeToString([]byte("x"+token)),
		`{"level":"info","msg":"Scaled down","deployment":"kube-controller-manager","replicas":0}`,
	}
	log := filepath.Join(t.TempDir(), "dwd-0.log")
	require.NoError(t, os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	findings, n, err := scanner.scanFiles([]string{log})
	require.NoError(t, err)
	assert.Equal(t, len(lines), n)
	var found []string
	for _, f := range findings {
		where, _, _ := strings.Cut(strings.TrimPrefix(f, log+":"), ":")
		found = append(found, where)
	}
	assert.Equal(t, []string{"2", "3", "4", "5", "6"}, found, "findings: %v", findings)
	for _, f := range findings {
		assert.Contains(t, f, "planted: ", "a finding names the secret")
	}

	assert.Error(t, newSecretScanner().add("short", []byte("abc")), "a secret too short to look for is an error")
	assert.Error(t, newSecretScanner().addKubeconfig("empty", []byte("apiVersion: v1\nkind: Config\n")))
}
