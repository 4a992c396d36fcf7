package dwdproc

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FreePort returns a loopback address whose port was free a moment ago. The port is below the
// kernel's range of ephemeral ports, from which the source port of every outgoing connection is drawn:
// a replica keeps its addresses across restarts, and a port of that range could be some connection's
// by the time it starts again (a restart in the chaos suite failed so, binding its metrics port, while
// the other test packages ran). Where the range cannot be read or no port below it is free, any free
// port.
func FreePort() (string, error) {
	if low := ephemeralLow(); low > minPort {
		for range 50 {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(minPort+rand.IntN(low-minPort)))
			if l, err := net.Listen("tcp", addr); err == nil {
				l.Close()
				return addr, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// minPort is the lowest port FreePort picks: above the well-known and most registered services'.
const minPort = 10000

// ephemeralLow returns the first port of the kernel's ephemeral range, 0 when it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}

// OK reports whether a GET of url answers 200 within a second (a /readyz).
func OK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Scrape reads the metrics served at addr (host:port, path /metrics), waiting two seconds at most;
// nil when they cannot be read. With names, it asks for those families only (client_golang's name[]
// parameter): a test that polls one metric several times a second then makes neither the process
// nor itself encode, compress and parse every other family.
func Scrape(ctx context.Context, addr string, names ...string) map[string]*dto.MetricFamily {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	target := url.URL{Scheme: "http", Host: addr, Path: "/metrics"}
	if len(names) > 0 {
		target.RawQuery = url.Values{"name[]": names}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return families
}

// Sum adds up the samples of the counter or gauge name whose labels include every "k=v" of match.
func Sum(families map[string]*dto.MetricFamily, name string, match ...string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		if LabelsMatch(m.GetLabel(), match...) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// LabelsMatch reports whether labels include every "k=v" of match.
func LabelsMatch(labels []*dto.LabelPair, match ...string) bool {
	for _, kv := range match {
		k, v, _ := strings.Cut(kv, "=")
		found := false
		for _, l := range labels {
			found = found || l.GetName() == k && l.GetValue() == v
		}
		if !found {
			return false
		}
	}
	return true
}
