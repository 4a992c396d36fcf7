package prober

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/fuzzinput"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The fuzz targets of the prober's pure decisions and of its kubeconfig gate. The structured targets
// read their input from a byte string through fuzzinput.Input, so that the fuzzer's mutations reach every
// field; run one with e.g. go test -run='^$' -fuzz='^FuzzDecideScaling$' -fuzztime=60s ./prober.

// fuzzBase is the moment around which the structured targets place their times.
var fuzzBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fuzzAt returns fuzzBase moved by a signed 16-bit number of seconds of in.
func fuzzAt(in *fuzzinput.Input) time.Time {
	return fuzzBase.Add(time.Duration(in.Int16()) * time.Second)
}

// --- The kubeconfig gate ---

// gateKubeconfig is a kubeconfig the gate accepts; the seeds below are variations of it.
const gateKubeconfig = `apiVersion: v1
kind: Config
current-context: shoot
clusters:
- name: shoot
  cluster:
    server: https://api.shoot.example:443
    tls-server-name: api.shoot.example
contexts:
- name: shoot
  context: {cluster: shoot, user: dwd}
users:
- name: dwd
  user:
%s`

// gateSeeds are kubeconfigs that must pass or be refused, credentials indented under users[0].user.
var gateSeeds = []string{
	"    token: abcdefghijklmnopqrstuvwxyz012345\n",
	"    username: admin\n    password: hunter2hunter2\n",
	"    client-certificate-data: bm90IGEgY2VydA==\n    client-key-data: bm90IGEga2V5\n",
	"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, 'touch /tmp/dwd-pwned']\n",
	"    exec: {command: gke-gcloud-auth-plugin, apiVersion: client.authentication.k8s.io/v1beta1, interactiveMode: Never}\n",
	"    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: 'https://issuer', client-id: dwd, refresh-token: r}\n",
	"    auth-provider: {name: gcp}\n",
	"    client-certificate: /etc/ssl/certs/client.pem\n    client-key: /etc/ssl/private/client.key\n",
	"    client-key: ../../key.pem\n",
	"    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
	"    token: t\n- name: other\n  user:\n    exec: {command: /bin/true, apiVersion: client.authentication.k8s.io/v1}\n",
	"    token: t\n- name: other\n  user: {tokenFile: /etc/shadow}\n",
	"    token: t\n    as: system:admin\n",
	"    token: t\n    as-groups: [system:masters]\n",
	"    token: t\n    as-uid: \"0\"\n",
	"    token: t\n    as-user-extra: {scopes: [all]}\n",
}

// gateClusters are cluster fields that must be refused, in place of gateKubeconfig's tls-server-name.
var gateClusters = []string{
	"insecure-skip-tls-verify: true",
	"proxy-url: http://proxy.example:3128",
	"proxy-url: socks5://127.0.0.1:1080",
}

// gateServers are servers that must be refused: plain HTTP, explicitly or by client-go's default for a
// host:port without a CA or client certificate.
var gateServers = []string{"http://api.shoot.example:80", "api.shoot.example:443", "127.0.0.1:6443"}

// FuzzKubeconfigGate feeds any bytes as the kubeconfig of a shoot's access Secret to
// ShootClients.For, and checks that
//   - nothing panics;
//   - a kubeconfig that parses and has a user with an exec plugin, an auth provider, a client
//     certificate or key file, a token file or impersonation, or a cluster with a CA file, a proxy or
//     insecure-skip-tls-verify, is refused, whichever user and cluster the current context names;
//   - whatever is accepted yields a rest.Config with an https server that neither runs a program nor
//     reads a file (no ExecProvider, no AuthProvider, no CertFile, KeyFile, CAFile, BearerTokenFile),
//     verifies the server (not Insecure), uses no proxy and impersonates no one;
//   - the decision is the same on a second try (no state leaks between Secrets).
func FuzzKubeconfigGate(f *testing.F) {
	for _, user := range gateSeeds {
		f.Add([]byte(fmt.Sprintf(gateKubeconfig, user)))
	}
	for _, cluster := range gateClusters {
		f.Add([]byte(strings.Replace(fmt.Sprintf(gateKubeconfig, gateSeeds[0]), "tls-server-name: api.shoot.example", cluster, 1)))
	}
	for _, server := range gateServers {
		f.Add([]byte(strings.Replace(fmt.Sprintf(gateKubeconfig, gateSeeds[0]), "https://api.shoot.example:443", server, 1)))
	}
	for _, s := range []string{
		"", "null", "{}", "apiVersion: v1\nkind: Config\n", "\x00\xff",
		strings.Replace(fmt.Sprintf(gateKubeconfig, gateSeeds[0]), "tls-server-name: api.shoot.example", "certificate-authority: /etc/ssl/ca.pem", 1),
		strings.Replace(fmt.Sprintf(gateKubeconfig, gateSeeds[0]), "server: https://api.shoot.example:443", "server: ''", 1),
		strings.Replace(fmt.Sprintf(gateKubeconfig, gateSeeds[0]), "current-context: shoot", "current-context: elsewhere", 1),
		`{"apiVersion":"v1","kind":"Config","current-context":"c","clusters":[{"name":"c","cluster":{"server":"https://a"}}],` +
			`"contexts":[{"name":"c","context":{"cluster":"c","user":"u"}}],"users":[{"name":"u","user":{"exec":{"command":"id"}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "access", UID: "u1", ResourceVersion: "1"},
			Data: map[string][]byte{KubeconfigKey: data}}
		_, err := (&ShootClients{Timeout: time.Second}).For(secret)
		cfg, cfgErr := restConfigFromSecret(secret, false)
		if err == nil {
			require.NoError(t, cfgErr, "For accepted what restConfigFromSecret refuses")
		}
		if cfgErr == nil {
			requireSafeConfig(t, cfg)
		}
		if refused := gateRefuses(data); refused != "" {
			require.Error(t, err, "accepted a kubeconfig with %s", refused)
			require.Error(t, cfgErr, "accepted a kubeconfig with %s", refused)
		}
		_, again := (&ShootClients{Timeout: time.Second}).For(secret)
		require.Equal(t, fmt.Sprint(err), fmt.Sprint(again), "not deterministic")
	})
}

// requireSafeConfig fails unless cfg, which the gate accepted, talks to an https server it verifies,
// directly and as its own user, with credentials that neither run a program nor read a file.
func requireSafeConfig(t *testing.T, cfg *rest.Config) {
	require.NotEmpty(t, cfg.Host)
	require.Nil(t, cfg.ExecProvider, "an exec plugin passed")
	require.Nil(t, cfg.AuthProvider, "an auth provider passed")
	require.Empty(t, cfg.CertFile+cfg.KeyFile+cfg.CAFile+cfg.BearerTokenFile, "a file reference passed")
	require.False(t, cfg.Insecure, "insecure-skip-tls-verify passed")
	require.Nil(t, cfg.Proxy, "a proxy passed")
	require.Zero(t, cfg.Impersonate.UserName+cfg.Impersonate.UID, "impersonation passed")
	require.Empty(t, cfg.Impersonate.Groups, "impersonation passed")
	require.Empty(t, cfg.Impersonate.Extra, "impersonation passed")
	u, _, err := rest.DefaultServerUrlFor(cfg)
	require.NoError(t, err)
	require.Equal(t, "https", u.Scheme, "a plain HTTP server passed")
}

// gateRefuses names what in data, read as clientcmd reads it, the gate must refuse in any user or
// cluster: what would run a program or read a file, impersonate, go through a proxy or skip the
// verification of the server; "" when nothing does or data does not parse.
func gateRefuses(data []byte) string {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return ""
	}
	for name, u := range raw.AuthInfos {
		switch {
		case u.Exec != nil:
			return "an exec plugin in user " + name
		case u.AuthProvider != nil:
			return "an auth provider in user " + name
		case u.ClientCertificate != "" || u.ClientKey != "" || u.TokenFile != "":
			return "a file in user " + name
		case u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0:
			return "impersonation in user " + name
		}
	}
	for name, c := range raw.Clusters {
		switch {
		case c.CertificateAuthority != "":
			return "a CA file in cluster " + name
		case c.ProxyURL != "":
			return "a proxy in cluster " + name
		case c.InsecureSkipTLSVerify:
			return "insecure-skip-tls-verify in cluster " + name
		}
	}
	return ""
}

// secretPlaceholder marks where FuzzKubeconfigErrorsWithholdSecrets puts the secret in a template.
const secretPlaceholder = "SECRET"

// FuzzKubeconfigErrorsWithholdSecrets puts a secret into a kubeconfig template (every SECRET in it)
// and checks that the error of ShootClients.For never quotes quoteWindow or more consecutive
// characters of the secret: the promise of KubeconfigError. A run that the error shows also when the
// secret is replaced by another of the same shape (see disguise) is the error's own text or the
// template's, not a quote, and does not count. The seeds put the secret where decoders are known to
// quote values: a server or proxy URL with a password that does not parse, a mistagged scalar, a
// value under a null key.
func FuzzKubeconfigErrorsWithholdSecrets(f *testing.F) {
	const token = "kx9Qw3VbT7pLm2ZrYd8N"
	for _, template := range []string{
		fmt.Sprintf(gateKubeconfig, "    token: SECRET\n"),
		fmt.Sprintf(gateKubeconfig, "    token: !!int SECRET\n"),
		fmt.Sprintf(gateKubeconfig, "    ~:\n      token: SECRET\n"),
		fmt.Sprintf(gateKubeconfig, "    token: \"SECRET\n"),
		fmt.Sprintf(gateKubeconfig, "    password: SECRET\n    username: [SECRET]\n"),
		fmt.Sprintf(gateKubeconfig, "    client-key-data: SECRET\n    client-certificate-data: SECRET\n"),
		strings.Replace(fmt.Sprintf(gateKubeconfig, "    token: t\n"), "https://api.shoot.example:443", "https://dwd:SECRET@shoot api:443", 1),
		strings.Replace(fmt.Sprintf(gateKubeconfig, "    token: t\n"), "https://api.shoot.example:443", "https://dwd:SECRET@api%zz:443", 1),
		strings.Replace(fmt.Sprintf(gateKubeconfig, "    token: t\n"), "tls-server-name: api.shoot.example", "proxy-url: ftp://dwd:SECRET@127.0.0.1:1", 1),
		strings.Replace(fmt.Sprintf(gateKubeconfig, "    token: t\n"), "tls-server-name: api.shoot.example", "insecure-skip-tls-verify: SECRET", 1),
		strings.Replace(fmt.Sprintf(gateKubeconfig, "    token: t\n"), "tls-server-name: api.shoot.example", "certificate-authority-data: SECRET", 1),
	} {
		f.Add(template, token)
	}
	// A secret that the punctuation KubeconfigError splits values at cuts into short pieces (the
	// quoting positions with such secrets are in testdata/fuzz).
	f.Add(fmt.Sprintf(gateKubeconfig, "    token: SECRET\n"), "ab/cd+ef/gh+ij/kl")
	f.Fuzz(func(t *testing.T, template, secret string) {
		if len(secret) < quoteWindow || !strings.Contains(template, secretPlaceholder) {
			t.Skip("no secret to quote")
		}
		msg := gateError(template, secret)
		other := gateError(template, disguise(secret))
		for i := 0; i+quoteWindow <= len(secret); i++ {
			w := secret[i : i+quoteWindow]
			if strings.Contains(msg, w) && !strings.Contains(other, w) {
				t.Fatalf("the error quotes %q of the secret %q: %s", w, secret, msg)
			}
		}
	})
}

// gateError returns the error text of ShootClients.For for the template with the secret in it, ""
// when it succeeds.
func gateError(template, secret string) string {
	data := strings.ReplaceAll(template, secretPlaceholder, secret)
	secretObj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "access"},
		Data: map[string][]byte{KubeconfigKey: []byte(data)}}
	if _, err := (&ShootClients{Timeout: time.Second}).For(secretObj); err != nil {
		return err.Error()
	}
	return ""
}

// disguise returns s with every letter and digit replaced by another of its kind (rot13, digits +5),
// punctuation kept: a secret of the same shape, which YAML and URLs parse the same way.
func disguise(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		case r >= '0' && r <= '9':
			return '0' + (r-'0'+5)%10
		}
		return r
	}, s)
}

// --- The scaling decision ---

// FuzzDecideScaling decides over candidates, a lease read and earlier sightings built from the input,
// and checks that
//   - nothing panics, whatever the leases hold (no renewTime, no or any leaseDurationSeconds, any
//     grace, duplicate names, leases of no candidate);
//   - the counts add up: Candidates is the number of distinct candidates with a lease, WithoutLease the
//     rest, Regressed <= Unknown, Expired+Unknown <= Candidates;
//   - fewer than 2 candidates with a lease never scale down: 0 scales up, 1 does nothing (the
//     original's rule), and neither do fewer candidates with a lease than without;
//   - no scale-down unless the expired fraction reaches the configured fraction, counting as expirable
//     only a lease whose same renewTime (same UID) this replica has watched for its stable window
//     (StableWindow): no single read decides a scale-down, and a lease without renewTime never counts;
//   - the decision is a pure function: the same on a second call, the same on the leases in reverse
//     order (their names being distinct, as in a namespace), and the sightings passed in unchanged;
//   - the sightings kept are of candidates only, with the lease's UID, never older than the one before;
//   - LeaseExpired is monotonic in time and threeQuarters is exact.
func FuzzDecideScaling(f *testing.F) {
	grace := int64(40 * time.Second)
	old, since, recent := int16(-100), int16(-60), int16(-2)
	f.Add([]byte{}, grace, 0.6)
	f.Add(scalingSeed(3, seedLease(0, old, &since), seedLease(1, old, &since), seedLease(2, old, &since)), grace, 0.6) // a meltdown
	f.Add(scalingSeed(3, seedLease(0, old, &since), seedLease(1, old, &since), seedLease(2, recent, &recent)), grace, 0.6)
	f.Add(scalingSeed(3, seedLease(0, old, nil), seedLease(1, old, nil), seedLease(2, old, nil)), grace, 0.6) // first sight
	f.Add(scalingSeed(1, seedLease(0, old, &since)), grace, 0.6)                                              // one candidate
	f.Add(scalingSeed(4, seedLease(0, old, &since), seedLease(1, old, &since)), grace, 0.6)                   // two without lease
	f.Add(scalingSeed(2, seedLease(0, old, &since), seedLease(0, recent, nil), seedLease(5, old, &since)), grace, 1.0)
	f.Add(scalingSeed(2, append(seedLease(0, old, &since)[:4], 1, 127, 255, 255, 255, 0)), int64(1<<62), 0.01)
	many := make([][]byte, 255)
	for i := range many {
		many[i] = seedLease(i, old, &since)
	}
	f.Add(scalingSeed(16, many...), grace, 0.6)
	f.Fuzz(func(t *testing.T, data []byte, grace int64, fraction float64) {
		if !(fraction > 0 && fraction <= 1) {
			t.Skip("config validation holds nodeLeaseFailureFraction in (0, 1]")
		}
		in := fuzzinput.Input(data)
		candidates, read, seen := scalingInput(&in)
		g := time.Duration(grace)
		seenBefore := maps.Clone(seen)
		d, keep := DecideScaling(candidates, read, seen, g, fraction)
		require.Equal(t, seenBefore, seen, "DecideScaling changed the sightings passed in")

		checkCounts(t, d, candidates, read)
		checkAction(t, d, fraction, expirable(candidates, read, seen))
		checkKept(t, keep, candidates, read, seen)

		d2, keep2 := DecideScaling(candidates, read, seen, g, fraction)
		require.Equal(t, d, d2, "not deterministic")
		require.Equal(t, keep, keep2, "not deterministic")
		if distinctNames(read.Leases) {
			reversed := read
			reversed.Leases = slices.Clone(read.Leases)
			slices.Reverse(reversed.Leases)
			d3, keep3 := DecideScaling(candidates, reversed, seen, g, fraction)
			require.Equal(t, d, d3, "depends on the order of the leases")
			require.Equal(t, keep, keep3, "depends on the order of the leases")
		}
		checkLeaseExpired(t, read, g)
	})
}

// scalingInput builds candidates (names n0..n15, any order, repeats allowed), a read of leases (names
// n0..n19, so some are of no candidate) and sightings from in.
func scalingInput(in *fuzzinput.Input) ([]string, LeaseRead, map[string]Sighting) {
	candidates := make([]string, in.Pick(17))
	for i := range candidates {
		candidates[i] = fmt.Sprintf("n%d", in.Pick(16))
	}
	sent := fuzzAt(in)
	read := LeaseRead{Sent: sent, Received: sent.Add(time.Duration(in.Byte()) * time.Second / 4), TrustAge: in.Bit()}
	seen := map[string]Sighting{}
	for range in.Pick(256) {
		lease := fuzzLease(in)
		if in.Bit() {
			seen[lease.Name] = Sighting{UID: types.UID(fmt.Sprint(in.Pick(3))), RenewTime: fuzzAt(in), Since: fuzzAt(in), Renewed: in.Bit()}
		}
		read.Leases = append(read.Leases, lease)
	}
	return candidates, read, seen
}

// scalingSeed encodes, in the format scalingInput reads, the candidates n0..n(candidates-1) and a read
// sent at fuzzBase, back 1 s later, whose clocks agree, of the given leases (see seedLease).
func scalingSeed(candidates int, leases ...[]byte) []byte {
	b := []byte{byte(candidates)}
	for i := range candidates {
		b = append(b, byte(i))
	}
	b = append(b, 0, 0, 4, 1, byte(len(leases)))
	for _, l := range leases {
		b = append(b, l...)
	}
	return b
}

// seedLease encodes lease n<name>, UID 0, renewed renew seconds from fuzzBase, without
// leaseDurationSeconds, and, unless since is nil, seen with that renewTime since *since seconds.
func seedLease(name int, renew int16, since *int16) []byte {
	b := []byte{byte(name), 0, 1, byte(uint16(renew) >> 8), byte(renew), 0}
	if since == nil {
		return append(b, 0)
	}
	return append(b, 1, 0, byte(uint16(renew)>>8), byte(renew), byte(uint16(*since)>>8), byte(*since), 0)
}

// fuzzLease builds one node lease from in: any of three UIDs, renewTime unset or around fuzzBase,
// leaseDurationSeconds unset or any int32.
func fuzzLease(in *fuzzinput.Input) coordinationv1.Lease {
	lease := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", in.Pick(20)), Namespace: nodeLeaseNamespace,
		UID: types.UID(fmt.Sprint(in.Pick(3)))}}
	if in.Pick(8) != 0 {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: fuzzAt(in)}
	}
	if in.Bit() {
		s := int32(uint32(in.Byte())<<24 | uint32(in.Byte())<<16 | uint32(in.Byte())<<8 | uint32(in.Byte()))
		lease.Spec.LeaseDurationSeconds = &s
	}
	return lease
}

// checkCounts checks the counts of d against the input, counted here independently.
func checkCounts(t *testing.T, d Decision, candidates []string, read LeaseRead) {
	t.Helper()
	withLease, without := 0, 0
	for _, name := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		if slices.ContainsFunc(read.Leases, func(l coordinationv1.Lease) bool { return l.Name == name }) {
			withLease++
		} else {
			without++
		}
	}
	require.Equal(t, withLease, d.Candidates, "candidates with a lease")
	require.Equal(t, without, d.WithoutLease, "candidates without a lease")
	require.LessOrEqual(t, d.Regressed, d.Unknown)
	require.LessOrEqual(t, d.Expired+d.Unknown, d.Candidates)
	require.GreaterOrEqual(t, d.Expired, 0)
}

// checkAction checks the action against the rules; expirable bounds the expired leases from above.
func checkAction(t *testing.T, d Decision, fraction float64, expirable int) {
	t.Helper()
	require.LessOrEqual(t, d.Expired, expirable, "a lease counts as expired that was not watched for its stable window")
	switch {
	case d.Candidates == 0:
		require.Equal(t, ScaleUp, d.Action, "no candidates: scale up if needed")
	case d.Candidates == 1:
		require.Equal(t, None, d.Action, "one candidate: nothing")
	case d.Candidates < d.WithoutLease:
		require.Equal(t, None, d.Action, "fewer candidates with a lease than without: nothing")
	}
	if d.Action == ScaleDown {
		require.GreaterOrEqual(t, float64(expirable)/float64(d.Candidates), fraction, "scaled down below the fraction")
		require.GreaterOrEqual(t, d.ExpiredFraction, fraction)
		require.GreaterOrEqual(t, d.Candidates, 2)
	}
}

// expirable counts the distinct candidates whose first lease in the read has a renewTime that this
// replica has seen unchanged, under the same UID, for at least its stable window: the only leases that
// can be expired.
func expirable(candidates []string, read LeaseRead, seen map[string]Sighting) int {
	n := 0
	for _, name := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		i := slices.IndexFunc(read.Leases, func(l coordinationv1.Lease) bool { return l.Name == name })
		if i < 0 || read.Leases[i].Spec.RenewTime == nil {
			continue
		}
		lease := &read.Leases[i]
		prev, ok := seen[name]
		if !ok || prev.UID != lease.UID || !prev.RenewTime.Equal(lease.Spec.RenewTime.Time) {
			continue
		}
		// Unrenewed since it was first seen, or, when the clocks are trusted, since renewTime plus the band.
		since := prev.Since
		if at := prev.RenewTime.Add(read.Band); read.TrustAge && at.Before(since) {
			since = at
		}
		if prev.Expired || read.Sent.Sub(since) >= StableWindow(lease) {
			n++
		}
	}
	return n
}

// checkKept checks the sightings DecideScaling returns to keep.
func checkKept(t *testing.T, keep map[string]Sighting, candidates []string, read LeaseRead, seen map[string]Sighting) {
	t.Helper()
	for name, s := range keep {
		require.Contains(t, candidates, name, "kept a sighting of no candidate")
		i := slices.IndexFunc(read.Leases, func(l coordinationv1.Lease) bool { return l.Name == name })
		require.GreaterOrEqual(t, i, 0, "kept a sighting of a lease not in the read")
		require.Equal(t, read.Leases[i].UID, s.UID)
		if prev, ok := seen[name]; ok && prev.UID == s.UID {
			require.False(t, s.RenewTime.Before(prev.RenewTime), "a sighting went back in time")
		}
	}
}

// checkLeaseExpired checks, for every lease of the read, that a lease expired when the read was sent
// is expired when it came back, and that threeQuarters(grace) is exactly floor(grace × 0.75).
func checkLeaseExpired(t *testing.T, read LeaseRead, grace time.Duration) {
	t.Helper()
	for i := range read.Leases {
		lease := &read.Leases[i]
		if !read.Received.Before(read.Sent) && LeaseExpired(lease, grace, read.Sent) {
			require.True(t, LeaseExpired(lease, grace, read.Received), "a lease came back to life")
		}
	}
	require.True(t, LeaseExpired(nil, grace, read.Sent), "a nil lease is expired")
	if grace >= 0 {
		want := new(big.Int).Div(new(big.Int).Mul(big.NewInt(int64(grace)), big.NewInt(3)), big.NewInt(4))
		require.Equal(t, want.Int64(), int64(threeQuarters(grace)), "threeQuarters(%d)", grace)
	}
}

func distinctNames(leases []coordinationv1.Lease) bool {
	names := make(map[string]bool, len(leases))
	for _, l := range leases {
		if names[l.Name] {
			return false
		}
		names[l.Name] = true
	}
	return true
}

// --- Candidate selection ---

// Vocabularies of the candidate input: each is a real value, a near miss, or nothing.
var (
	fuzzConditionTypes = []string{"KernelDeadlock", "DiskPressure", "NetworkUnavailable", "ReadonlyFilesystem", "Ready", "Custom",
		NodeConditionInPlaceUpdate, "inplaceupdate", ""}
	fuzzConditionStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown, "true", ""}
	fuzzReasons           = []string{InPlaceUpdateReasonReadyForUpdate, InPlaceUpdateReasonUpdateFailed, "CandidateForUpdate", "SelectedForUpdate",
		"UpdateSuccessful", "readyforupdate", ""}
	fuzzPhases = []string{"Running", "Pending", "Available", MachinePhaseFailed, MachinePhaseTerminating, MachinePhaseInPlaceUpdating,
		MachinePhaseInPlaceUpdateFailed, "failed", ""}
	fuzzPools = []string{"", "a", "b", "c"}
)

// FuzzCandidateNodes selects candidates among nodes and Machines built from the input and checks that
//   - nothing panics (nodes without labels, annotations or conditions; Machines of no node);
//   - the result is sorted, without repeats, and names only nodes given;
//   - a node is a candidate exactly when its documented rules say so: no not-managed-by-MCM annotation
//     (any value), a backing Machine neither Failed nor Terminating, none InPlaceUpdating or
//     InPlaceUpdateFailed, no InPlaceUpdate condition with reason ReadyForUpdate or UpdateFailed, no
//     update-result=failed label, no True condition of its pool's types (the defaults when the pool
//     configures none or is unknown);
//   - the result does not depend on the order of the nodes or the Machines;
//   - what a probe keeps of the nodes (slimNode) gives the same candidates.
func FuzzCandidateNodes(f *testing.F) {
	f.Add([]byte{})
	// Three healthy nodes, each backed by a Running Machine.
	f.Add([]byte{0, 3, 0, 0, 0, 0, 0, 0, 3, 0, 0, 1, 0, 2, 0})
	// n0 not managed by MCM; n1 in pool a with its Custom condition True; n2 update-result=failed; n3
	// ReadyForUpdate; n4 healthy but its Machine InPlaceUpdating; n5 healthy, Failed and Running
	// Machines; n6 without a Machine.
	f.Add([]byte{1, 7,
		1, 0, 0,
		2, 1, 1, 5, 0, 6,
		4, 0, 0,
		0, 1, 6, 1, 0,
		0, 0,
		0, 0,
		0, 0,
		7, 0, 0, 1, 0, 2, 0, 3, 0, 4, 5, 5, 3, 5, 0, 17, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzinput.Input(data)
		nodes, machines, spec := candidateInput(&in)
		got := CandidateNodes(nodes, machines, spec)
		require.True(t, slices.IsSorted(got), "not sorted: %v", got)
		require.Equal(t, len(slices.Compact(slices.Clone(got))), len(got), "repeats: %v", got)
		var want []string
		for i := range nodes {
			if isCandidate(&nodes[i], machines, spec) {
				want = append(want, nodes[i].Name)
			}
		}
		slices.Sort(want)
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(got))

		slim := make([]corev1.Node, len(nodes))
		for i := range nodes {
			slim[i] = slimNode(&nodes[i])
		}
		require.Equal(t, got, CandidateNodes(slim, machines, spec), "the nodes kept give other candidates")

		slices.Reverse(nodes)
		slices.Reverse(machines)
		require.Equal(t, got, CandidateNodes(nodes, machines, spec), "depends on the order of the input")
	})
}

// candidateInput builds up to 16 nodes (distinct names n0..), up to 32 Machines (of n0..n16 or of no
// node) and the pools' condition types from in.
func candidateInput(in *fuzzinput.Input) ([]corev1.Node, []MachineInfo, ProbeSpec) {
	spec := ProbeSpec{NodeMonitorGracePeriod: 40 * time.Second, WorkerNodeConditions: map[string][]string{"a": {"Custom"}, "b": {}}}
	if in.Bit() {
		spec.WorkerNodeConditions["c"] = []string{"Ready", "DiskPressure"}
	}
	nodes := make([]corev1.Node, in.Pick(17))
	for i := range nodes {
		nodes[i] = fuzzNode(in, fmt.Sprintf("n%d", i))
	}
	machines := make([]MachineInfo, in.Pick(33))
	for i := range machines {
		node := ""
		if n := in.Pick(18); n < 17 {
			node = fmt.Sprintf("n%d", n)
		}
		machines[i] = MachineInfo{Name: fmt.Sprintf("m%d", i), Node: node, Phase: fuzzPhases[in.Pick(len(fuzzPhases))]}
	}
	return nodes, machines, spec
}

// fuzzNode builds one node from in.
func fuzzNode(in *fuzzinput.Input, name string) corev1.Node {
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	flags := in.Byte()
	if flags&1 != 0 {
		node.Annotations = map[string]string{AnnotationNotManagedByMCM: []string{"1", "", "false"}[in.Pick(3)]}
	}
	if flags&2 != 0 {
		node.Labels = map[string]string{LabelWorkerPool: fuzzPools[in.Pick(len(fuzzPools))]}
	}
	if flags&4 != 0 {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[LabelNodeUpdateResult] = []string{NodeUpdateResultFailed, "successful", "Failed"}[in.Pick(3)]
	}
	for range in.Pick(5) {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type:   corev1.NodeConditionType(fuzzConditionTypes[in.Pick(len(fuzzConditionTypes))]),
			Status: fuzzConditionStatuses[in.Pick(len(fuzzConditionStatuses))],
			Reason: fuzzReasons[in.Pick(len(fuzzReasons))],
		})
	}
	return node
}

// isCandidate is CandidateNodes' documentation, rule by rule, for one node.
func isCandidate(node *corev1.Node, machines []MachineInfo, spec ProbeSpec) bool {
	if _, ok := node.Annotations[AnnotationNotManagedByMCM]; ok || node.Labels[LabelNodeUpdateResult] == NodeUpdateResultFailed {
		return false
	}
	backed := false
	for _, m := range machines {
		if m.Node != node.Name || m.Phase == MachinePhaseFailed || m.Phase == MachinePhaseTerminating {
			continue
		}
		if m.Phase == MachinePhaseInPlaceUpdating || m.Phase == MachinePhaseInPlaceUpdateFailed {
			return false
		}
		backed = true
	}
	conditionTypes := spec.WorkerNodeConditions[node.Labels[LabelWorkerPool]]
	if len(conditionTypes) == 0 {
		conditionTypes = DefaultNodeConditions
	}
	for _, c := range node.Status.Conditions {
		if c.Type == NodeConditionInPlaceUpdate && (c.Reason == InPlaceUpdateReasonReadyForUpdate || c.Reason == InPlaceUpdateReasonUpdateFailed) {
			return false
		}
		if c.Status == corev1.ConditionTrue && slices.Contains(conditionTypes, string(c.Type)) {
			return false
		}
	}
	return backed
}

// --- Shoots of Clusters (FuzzDecodeShoot, in shoot_test.go) ---

// fuzzDefaultGrace is the config's kcmNodeMonitorGraceDuration in the shoot checks.
const fuzzDefaultGrace = 40 * time.Second

// checkShootOfCluster wraps raw, if it is JSON, as the spec.shoot of a Cluster and decodes the Cluster
// as the informer does. shootOf must agree with decodeShoot's result want (nil: an error); and through
// the cache's trimCluster, a shoot that decodes must still decode, to the same decision (trimming may
// drop a field that does not decode: the rules do not read it), and trimming again changes nothing.
func checkShootOfCluster(t *testing.T, raw []byte, want *Shoot) {
	t.Helper()
	if !json.Valid(raw) {
		return
	}
	cluster := &unstructured.Unstructured{}
	doc := `{"apiVersion":"extensions.gardener.cloud/v1alpha1","kind":"Cluster","metadata":{"name":"shoot--p--s"},"spec":{"shoot":` + string(raw) + `}}`
	if err := cluster.UnmarshalJSON([]byte(doc)); err != nil {
		return // no Cluster reaches the prober
	}
	got, err := shootOf(cluster)
	if want == nil {
		require.Error(t, err, "shootOf decoded what decodeShoot refuses")
		return
	}
	require.NoError(t, err, "shootOf refused what decodeShoot decodes")
	require.Equal(t, want, got)

	trimmed, err := trimCluster(cluster)
	require.NoError(t, err)
	cached, err := shootOf(trimmed.(*unstructured.Unstructured))
	require.NoError(t, err, "the trimmed Cluster does not decode")
	again, err := trimCluster(trimmed)
	require.NoError(t, err)
	require.Equal(t, trimmed, again, "an informer may transform a trimmed Cluster again")
	run, spec, reason := Decide(want, fuzzDefaultGrace)
	cachedRun, cachedSpec, cachedReason := Decide(cached, fuzzDefaultGrace)
	require.Equal(t, run, cachedRun, "trimmed: %+v", cached)
	require.True(t, spec.Equal(cachedSpec), "trimmed: %+v", cached)
	require.Equal(t, reason, cachedReason, "trimmed: %+v", cached)
}

// checkDecidedShoot requires the decision over shoot to be consistent, its spec safe, and the same on
// a second call.
func checkDecidedShoot(t *testing.T, shoot *Shoot) {
	t.Helper()
	run, spec, reason := Decide(shoot, fuzzDefaultGrace)
	require.Equal(t, run, reason == "", "run=%v with reason %q", run, reason)
	if run {
		if grace, ok := shootGracePeriod(shoot); ok {
			require.Equal(t, min(max(grace, 16*time.Second), 10*time.Minute), spec.NodeMonitorGracePeriod)
		} else {
			require.Equal(t, fuzzDefaultGrace, spec.NodeMonitorGracePeriod)
		}
		for _, w := range shoot.Spec.Provider.Workers {
			conditions := spec.WorkerNodeConditions[w.Name]
			require.NotEmpty(t, conditions, "pool %q", w.Name)
			require.True(t, slices.IsSorted(conditions), "pool %q: %v", w.Name, conditions)
			require.Equal(t, len(conditions), len(slices.Compact(slices.Clone(conditions))), "pool %q: %v", w.Name, conditions)
		}
	}
	run2, spec2, reason2 := Decide(shoot, fuzzDefaultGrace)
	require.True(t, run == run2 && spec.Equal(spec2) && reason == reason2, "not deterministic")
}
