package deploy

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

// gardenerLoggingLabel is the label by which gardenlet's fluent-operator selects a seed's custom
// logging resources (gardener/gardener, v1beta1constants.LabelKeyCustomLoggingResource and its value).
var gardenerLoggingLabel = map[string]string{"fluentbit.gardener/type": "seed"}

// clusterFilter and clusterParser are the parts of fluent-operator's fluentbit.fluent.io/v1alpha2
// ClusterFilter and ClusterParser the tree writes; decoding into them strictly fails on any other field.
type clusterFilter struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   loggingObjMeta `json:"metadata"`
	Spec       struct {
		Match   string `json:"match"`
		Filters []struct {
			Parser *struct {
				KeyName     string `json:"keyName"`
				Parser      string `json:"parser"`
				ReserveData bool   `json:"reserveData"`
			} `json:"parser,omitempty"`
			Modify *struct {
				Rules []struct {
					Rename map[string]string `json:"rename"`
				} `json:"rules"`
			} `json:"modify,omitempty"`
		} `json:"filters"`
	} `json:"spec"`
}

type clusterParser struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   loggingObjMeta `json:"metadata"`
	Spec       struct {
		JSON struct {
			TimeKey    string `json:"timeKey"`
			TimeFormat string `json:"timeFormat"`
		} `json:"json"`
	} `json:"spec"`
}

type loggingObjMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// loggingObjects returns the one ClusterFilter of objs and the ClusterParser it names, decoded strictly.
func loggingObjects(t *testing.T, objs []*unstructured.Unstructured) (clusterFilter, clusterParser) {
	t.Helper()
	var filters []clusterFilter
	parsers := map[string]clusterParser{}
	for _, o := range objs {
		data, err := json.Marshal(o.Object)
		require.NoError(t, err)
		switch o.GetKind() {
		case "ClusterFilter":
			var f clusterFilter
			require.NoError(t, yaml.UnmarshalStrict(data, &f), "ClusterFilter %s", o.GetName())
			filters = append(filters, f)
		case "ClusterParser":
			var p clusterParser
			require.NoError(t, yaml.UnmarshalStrict(data, &p), "ClusterParser %s", o.GetName())
			parsers[p.Metadata.Name] = p
		}
	}
	require.Len(t, filters, 1, "one ClusterFilter")
	f := filters[0]
	require.NotEmpty(t, f.Spec.Filters)
	require.NotNil(t, f.Spec.Filters[0].Parser, "the filter parses first")
	p, ok := parsers[f.Spec.Filters[0].Parser.Parser]
	require.True(t, ok, "the ClusterParser %s the filter names", f.Spec.Filters[0].Parser.Parser)
	return f, p
}

// parseLogLine does to a container's log line what the filter and parser do in fluent-bit: decode the
// JSON, read its time with the parser's time format, rename the keys. It fails where fluent-bit would
// leave the line unparsed, and on a rename whose key the line does not have.
func parseLogLine(f clusterFilter, p clusterParser, line string) (map[string]any, time.Time, error) {
	record := map[string]any{}
	if err := json.Unmarshal([]byte(line), &record); err != nil {
		return nil, time.Time{}, fmt.Errorf("not JSON: %w", err)
	}
	layout, err := strptimeLayout(p.Spec.JSON.TimeFormat)
	if err != nil {
		return nil, time.Time{}, err
	}
	ts, _ := record[p.Spec.JSON.TimeKey].(string)
	at, err := time.Parse(layout, ts)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("time key %q: %w", p.Spec.JSON.TimeKey, err)
	}
	for _, item := range f.Spec.Filters[1:] {
		if item.Modify == nil {
			continue
		}
		for _, rule := range item.Modify.Rules {
			for from, to := range rule.Rename {
				v, ok := record[from]
				if !ok {
					return nil, time.Time{}, fmt.Errorf("no key %q to rename to %q", from, to)
				}
				delete(record, from)
				record[to] = v
			}
		}
	}
	return record, at, nil
}

// strptimeLayout translates the strptime directives fluent-bit's time formats use here into a Go
// time layout; it refuses any other.
func strptimeLayout(format string) (string, error) {
	directives := map[byte]string{'Y': "2006", 'm': "01", 'd': "02", 'H': "15", 'M': "04", 'S': "05", 'z': "Z07:00", 'L': "000"}
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			b.WriteByte(format[i])
			continue
		}
		i++
		if i == len(format) {
			return "", fmt.Errorf("time format %q ends in %%", format)
		}
		d, ok := directives[format[i]]
		if !ok {
			return "", fmt.Errorf("time format %q: directive %%%c unknown here", format, format[i])
		}
		b.WriteString(d)
	}
	return b.String(), nil
}

func TestGardenerLoggingFollowsGardenersConventions(t *testing.T) {
	f, p := loggingObjects(t, mustBuild(t, "overlays/gardener"))
	for _, labels := range []map[string]string{f.Metadata.Labels, p.Metadata.Labels} {
		for k, v := range gardenerLoggingLabel {
			assert.Equal(t, v, labels[k], "fluent-operator selects the seed's resources by %s", k)
		}
	}
	assert.NotEqual(t, "dependency-watchdog", f.Metadata.Name, "Gardener's name for the original's filter")
	assert.NotEqual(t, "dependency-watchdog-parser", p.Metadata.Name, "Gardener's name for the original's parser")
	assert.Equal(t, "log", f.Spec.Filters[0].Parser.KeyName, "the container runtime's key of the line")
	assert.True(t, f.Spec.Filters[0].Parser.ReserveData, "the record keeps its other keys (the pod's)")

	// The part applies alone, for dwd run as the original through Gardener's image override.
	var alone []string
	for _, o := range mustBuild(t, "overlays/gardener/logging") {
		alone = append(alone, o.GetKind()+"/"+o.GetName())
	}
	assert.ElementsMatch(t, []string{"ClusterFilter/" + f.Metadata.Name, "ClusterParser/" + p.Metadata.Name}, alone)
}

func TestGardenerLogFilterSelectsDwdsContainersOnly(t *testing.T) {
	objs := mustBuild(t, "overlays/gardener")
	f, _ := loggingObjects(t, objs)
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, w := range workloads(t, objs) {
		for _, c := range w.template.Spec.Containers {
			tag := fmt.Sprintf("kubernetes.var.log.containers.%s-0_%s_%s-%s.log", w.meta.Name, w.meta.Namespace, c.Name, id)
			matched, err := path.Match(f.Spec.Match, tag)
			require.NoError(t, err)
			assert.True(t, matched, "%s matches %s", f.Spec.Match, tag)
		}
	}
	other := "kubernetes.var.log.containers.gardener-resource-manager-5f7d_garden_gardener-resource-manager-" + id + ".log"
	matched, err := path.Match(f.Spec.Match, other)
	require.NoError(t, err)
	assert.False(t, matched, "%s matches another component's %s", f.Spec.Match, other)
}

func TestGardenerLogParserRefusesWhatIsNoDwdLine(t *testing.T) {
	f, p := loggingObjects(t, mustBuild(t, "overlays/gardener"))
	for name, line := range map[string]string{
		"klog":                 `I1128 09:40:12.123456       1 main.go:42] Starting replica`,
		"epoch time":           `{"level":"info","ts":1764322812.5,"logger":"dwd","msg":"Starting replica"}`,
		"no logger":            `{"level":"info","ts":"2026-11-28T09:40:12Z","msg":"Starting replica"}`,
		"console time encoder": `{"level":"info","ts":"2026-11-28 09:40:12","logger":"dwd","msg":"Starting replica"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := parseLogLine(f, p, line)
			assert.Error(t, err)
		})
	}
}

func TestGardenerLogParserReadsWhatDwdLogs(t *testing.T) {
	env.Require(t)
	bin := test.BuildDwd(t)
	objs := mustBuild(t, "overlays/gardener")
	f, p := loggingObjects(t, objs)
	for _, w := range workloads(t, objs) {
		c := w.template.Spec.Containers[0]
		t.Run(w.meta.Name, func(t *testing.T) {
			l := prepare(t, objs, w, c, env.Namespace(t), env.Namespace(t), bin)
			out := runUntilStarted(t, l, time.Duration(*w.template.Spec.TerminationGracePeriodSeconds)*time.Second)
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, startLine) {
					line = l
				}
			}
			require.NotEmpty(t, line, "dwd logged its start line:\n%s", out)
			record, at, err := parseLogLine(f, p, line)
			require.NoError(t, err, line)
			assert.WithinDuration(t, time.Now(), at, time.Minute, "the line's time, as the parser reads it")
			assert.Equal(t, map[string]any{"severity": "info", "log": startLine, "source": "dwd"},
				map[string]any{"severity": record["severity"], "log": record["log"], "source": record["source"]}, line)
		})
	}
}
