package apimetrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
)

func TestMetricsLint(t *testing.T) {
	metricstest.Lint(t, nil, Collectors...)
}

// Every request is counted by API, client and answer; a 429 also as throttled, and a failed request
// as "error". The throttled count of each API is there from the start.
func TestCountRequests(t *testing.T) {
	codes := []int{http.StatusOK, http.StatusTooManyRequests}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[0])
		codes = codes[1:]
	}))
	defer srv.Close()
	c := &http.Client{Transport: CountRequests("shoot", "test")(http.DefaultTransport)}
	assert.Contains(t, metricstest.Series(throttled), map[string]string{"api": "seed"})
	for range 2 {
		resp, err := c.Get(srv.URL)
		require.NoError(t, err)
		resp.Body.Close()
	}
	srv.Close()
	_, err := c.Get(srv.URL)
	require.Error(t, err)

	assert.Equal(t, 1.0, testutil.ToFloat64(requests.WithLabelValues("shoot", "test", "200")))
	assert.Equal(t, 1.0, testutil.ToFloat64(requests.WithLabelValues("shoot", "test", "429")))
	assert.Equal(t, 1.0, testutil.ToFloat64(requests.WithLabelValues("shoot", "test", "error")))
	assert.Equal(t, 1.0, testutil.ToFloat64(throttled.WithLabelValues("shoot")))
}
