package apimetrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_api_requests_total", Help: "Requests to the seed and shoot API servers by client and answer (HTTP code, or error).",
	}, []string{"api", "client", "code"})
	throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dwd_api_throttled_requests_total", Help: "Requests answered 429 Too Many Requests, by API.",
	}, []string{"api"})
)

// Collectors are the package's metrics.
var Collectors = []prometheus.Collector{requests, throttled}

var registerOnce sync.Once

// register registers the metrics once, each API's throttled count at zero, so that a rate over it is
// 0 rather than no data until the first 429.
func register() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(Collectors...)
		for _, api := range []string{"seed", "shoot"} {
			throttled.WithLabelValues(api)
		}
	})
}

// CountRequests wraps a transport so that every request is counted in dwd_api_requests_total under
// api ("seed" or "shoot") and client (its "error" answers exported at zero from the start), and every
// 429 in dwd_api_throttled_requests_total.
func CountRequests(api, client string) func(http.RoundTripper) http.RoundTripper {
	register()
	// A request that got no answer is counted from the start at zero, so that an error ratio over
	// the client is 0 rather than no data until the first one.
	requests.WithLabelValues(api, client, "error")
	return func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, api: api, client: client}
	}
}

type countingTransport struct {
	next        http.RoundTripper
	api, client string
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the transport underneath.
func (t countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			throttled.WithLabelValues(t.api).Inc()
		}
	}
	requests.WithLabelValues(t.api, t.client, code).Inc()
	return resp, err
}
