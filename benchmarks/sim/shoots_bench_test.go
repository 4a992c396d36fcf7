package sim

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// BenchmarkServeLeases measures the answer to the node-lease list, encoded per request.
func BenchmarkServeLeases(b *testing.B) { benchmarkServe(b, leasesPath) }

// BenchmarkServeHugeLeases measures the answer to a lease list with 200,000 extra leases, in
// protobuf: the extra leases are encoded once per renew interval, so a request only writes them.
func BenchmarkServeHugeLeases(b *testing.B) {
	s, err := NewShootServer(ShootServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	s.AddShoot("a", benchNodeNames("a", 3))
	if err := s.SetScenario("a", Scenario{ExtraLeases: 200_000}); err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/shoots/a/"+leasesPath+"?resourceVersion=0", nil)
	req.Header.Set("Authorization", "Bearer "+s.opts.Token)
	req.Header.Set("Accept", protobufContentType)
	w := &discardResponse{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		s.ServeHTTP(w, req)
	}
	if w.code != http.StatusOK || w.written < 200_000*50 {
		b.Fatalf("answered %d with %d bytes", w.code, w.written)
	}
}

// BenchmarkServeNodes measures the answer to the node list, encoded once per shoot.
func BenchmarkServeNodes(b *testing.B) { benchmarkServe(b, nodesPath) }

// benchmarkServe measures the handler alone for several shoot sizes, then whole requests from a
// client-go HTTP client over TLS and HTTP/2 (one connection, as client-go shares its transport among
// all shoots of a server), 8×GOMAXPROCS in flight, spread over many shoots as the prober spreads
// them. The client shares the CPUs with the server, so the requests per second are a lower bound.
func benchmarkServe(b *testing.B, path string) {
	for _, nodes := range []int{3, 10, 100} {
		b.Run(fmt.Sprintf("handler/nodes=%d", nodes), func(b *testing.B) { benchmarkHandler(b, path, nodes) })
	}
	b.Run("https/shoots=1000/nodes=10", func(b *testing.B) { benchmarkHTTPS(b, path, 1000, 10) })
}

func benchmarkHandler(b *testing.B, path string, nodes int) {
	s, err := NewShootServer(ShootServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	s.AddShoot("a", benchNodeNames("a", nodes))
	req := httptest.NewRequest(http.MethodGet, "/shoots/a/"+path+"?resourceVersion=0", nil)
	req.Header.Set("Authorization", "Bearer "+s.opts.Token)
	w := &discardResponse{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		s.ServeHTTP(w, req)
	}
	if w.code != http.StatusOK {
		b.Fatalf("answered %d", w.code)
	}
}

func benchmarkHTTPS(b *testing.B, path string, shoots, nodes int) {
	s, err := NewShootServer(ShootServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	urls := make([]string, shoots)
	for i := range urls {
		name := fmt.Sprintf("shoot-%04d", i)
		s.AddShoot(name, benchNodeNames(name, nodes))
		urls[i] = s.URL() + shootsPrefix + name + "/" + path + "?resourceVersion=0"
	}
	client := benchHTTPClient(b, s)
	var next atomic.Uint64
	b.SetParallelism(8) // many probes in flight, as the prober's workers have
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchGet(client, urls[next.Add(1)%uint64(len(urls))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// benchHTTPClient returns the HTTP client client-go would use for the server's shoots.
func benchHTTPClient(b *testing.B, s *ShootServer) *http.Client {
	cfg := &rest.Config{BearerToken: s.opts.Token, TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData()}}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return client
}

func benchGet(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func benchNodeNames(shoot string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-node-%d", shoot, i)
	}
	return names
}

// discardResponse is a ResponseWriter that keeps only the status code and the length of the last
// answer's body.
type discardResponse struct {
	header  http.Header
	code    int
	written int
}

func (d *discardResponse) Header() http.Header { return d.header }
func (d *discardResponse) Write(p []byte) (int, error) {
	d.written += len(p)
	return len(p), nil
}
func (d *discardResponse) WriteHeader(code int) { d.code, d.written = code, 0 }
