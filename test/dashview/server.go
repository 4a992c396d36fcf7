package dashview

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/deploy/deploytest"
)

//go:embed page
var page embed.FS

// Server serves the page, the dashboards and Prometheus' API on a loopback port.
//
// Lifecycle: Start listens and serves in a goroutine the Server owns; Close stops it and waits.
type Server struct {
	// URL is the server's address, http://127.0.0.1:<port>.
	URL string

	srv    *http.Server
	served chan struct{}
	err    error // what Serve returned other than ErrServerClosed; read after served is closed
}

// Start serves the page at /, the dashboards of deploy/grafana at /dashboards/<file>, and proxies
// /api/v1/ to the Prometheus at prometheus.
func Start(prometheus string) (*Server, error) {
	handler, err := newHandler(prometheus)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), served: make(chan struct{}),
		srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.served
	return errors.Join(err, s.err)
}

// newHandler routes the page, the dashboards and the proxy.
func newHandler(prometheus string) (http.Handler, error) {
	target, err := url.Parse(prometheus)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("the Prometheus address %q: want http://host:port", prometheus)
	}
	dashboards, err := deploytest.Dashboards()
	if err != nil {
		return nil, err
	}
	files, err := fs.Sub(page, "page")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServerFS(files))
	mux.Handle("/api/v1/", httputil.NewSingleHostReverseProxy(target))
	mux.HandleFunc("/dashboards/", func(w http.ResponseWriter, r *http.Request) {
		data, ok := dashboards[path.Base(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	return mux, nil
}
