package config

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fuzzSeeds are inputs that reach the decoder's corners: YAML anchors, aliases and merge keys, tags,
// several documents, JSON, duplicate and unknown keys, wrong types, and values at the bounds.
var fuzzSeeds = []string{
	"", "null", "---\n---\n", "[]", "{}", "!!map {}", "\xef\xbb\xbfkubeConfigSecretName: x\n",
	"a: &a [*a]\n", "a: &a {b: 1}\nc: {<<: *a, <<: *a}\n",
	"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n",
	`{"kubeConfigSecretName": "probe", "probeInterval": "1e3s", "nodeLeaseFailureFraction": 1e-400}`,
	"probeInterval: 9223372036854775807ns\nbackoffJitterFactor: .inf\n",
	"watchDuration: !!int 5\nservicesAndDependantSelectors: {etcd: {podSelectors: [{matchExpressions: [{key: a, operator: In}]}]}}\n",
}

// FuzzDecodeProberConfig checks that no input panics; that a config comes
// back exactly when there are no errors, each naming its field; that strict
// decoding is lenient decoding plus the unknown keys; that decoding is
// deterministic; and that a returned config is valid, fully defaulted
// (defaulting it again changes nothing), and written out as JSON (which is
// YAML) decodes strictly to the same config (see requireRoundTrip). Seeds: the testdata files, a
// minimal config and fuzzSeeds.
func FuzzDecodeProberConfig(f *testing.F) {
	addTestdataSeeds(f)
	f.Add([]byte(minimalProber))
	f.Add([]byte(strings.Replace(minimalProber, "probe\n", "probe\nnodeLeaseFailureFraction: 1\nbackoffJitterFactor: 0\n", 1)))
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, errs := decodeProberConfig(data)
		again, againErrs := decodeProberConfig(data)
		require.Equal(t, cfg, again, "not deterministic")
		require.Equal(t, errs, againErrs, "not deterministic")
		checkDecodeResult(t, cfg == nil, errs)
		lenient, unknown, lenientErrs := DecodeProberConfigLenient(data)
		checkDecodeResult(t, lenient == nil, lenientErrs)
		require.Equal(t, errs, append(unknown, lenientErrs...), "strict = lenient + unknown keys")
		if cfg != nil {
			require.Empty(t, ValidateProberConfig(cfg))
			// The prober's longest jittered period cannot overflow a time.Duration.
			require.Less(t, float64(cfg.ProbeInterval.Duration)*(1+*cfg.BackoffJitterFactor), float64(math.MaxInt64))
			defaulted := *cfg
			SetProberDefaults(&defaulted)
			require.Equal(t, cfg, &defaulted, "not fully defaulted")
			requireRoundTrip(t, cfg, decodeProberConfig)
		}
	})
}

// FuzzDecodeWeederConfig is FuzzDecodeProberConfig for the weeder; also,
// every pod selector of a returned config converts to a labels.Selector, as
// the weeder converts it when it starts.
func FuzzDecodeWeederConfig(f *testing.F) {
	addTestdataSeeds(f)
	f.Add([]byte(minimalWeeder))
	f.Add([]byte("servicesAndDependantSelectors:\n Y:\n  podSelectors:\n  - matchLabels: {}"))
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, errs := decodeWeederConfig(data)
		again, againErrs := decodeWeederConfig(data)
		require.Equal(t, cfg, again, "not deterministic")
		require.Equal(t, errs, againErrs, "not deterministic")
		checkDecodeResult(t, cfg == nil, errs)
		lenient, unknown, lenientErrs := DecodeWeederConfigLenient(data)
		checkDecodeResult(t, lenient == nil, lenientErrs)
		require.Equal(t, errs, append(unknown, lenientErrs...), "strict = lenient + unknown keys")
		if cfg != nil {
			require.Empty(t, ValidateWeederConfig(cfg))
			defaulted := *cfg
			SetWeederDefaults(&defaulted)
			require.Equal(t, cfg, &defaulted, "not fully defaulted")
			requireRoundTrip(t, cfg, decodeWeederConfig)
			// The weeder converts every pod selector when it starts: a valid config must not fail there.
			for service, deps := range cfg.ServicesAndDependantSelectors {
				for i, s := range deps.PodSelectors {
					_, err := metav1.LabelSelectorAsSelector(s)
					require.NoError(t, err, "service %s, pod selector %d", service, i)
				}
			}
		}
	})
}

// checkDecodeResult requires errors exactly when no config came back, and
// every error to name a field.
func checkDecodeResult(t *testing.T, noConfig bool, errs field.ErrorList) {
	t.Helper()
	require.Equal(t, noConfig, len(errs) > 0, "errors: %v", errs)
	for _, e := range errs {
		require.NotNil(t, e)
		require.NotEmpty(t, e.Field)
	}
}

// requireRoundTrip requires cfg, written out as JSON, to decode without
// errors to a config that writes out the same: the same config, up to an
// empty map or list that the encoding leaves out (matchLabels: {}).
func requireRoundTrip[T any](t *testing.T, cfg *T, decode func([]byte) (*T, field.ErrorList)) {
	t.Helper()
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	again, errs := decode(data)
	require.Empty(t, errs, "%s", data)
	dataAgain, err := json.Marshal(again)
	require.NoError(t, err)
	require.Equal(t, string(data), string(dataAgain))
}
