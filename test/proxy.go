package test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// Proxy is a loopback TCP proxy in front of the API server that a test can cut, to play a replica
// that loses its connection (a network partition) while the others keep theirs.
type Proxy struct {
	target   string
	listener net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port) on a free loopback port; it stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting a proxy: %v", err)
	}
	p := &Proxy{target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// ConfigThrough returns a copy of cfg that reaches the API server through a new proxy.
func ConfigThrough(t testing.TB, cfg *rest.Config) (*rest.Config, *Proxy) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatalf("parsing the API server address %q: %v", cfg.Host, err)
	}
	p := NewProxy(t, u.Host)
	proxied := rest.CopyConfig(cfg)
	u.Host = p.listener.Addr().String()
	proxied.Host = u.String()
	return proxied, p
}

// Cut drops every open connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) serve() {
	for {
		client, err := p.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if !p.track(client) {
			_ = client.Close()
			continue
		}
		p.wg.Go(func() { p.forward(client) })
	}
}

// track registers a connection unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

// forward copies both ways between client and the target until either side closes.
func (p *Proxy) forward(client net.Conn) {
	defer p.untrack(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
}

func (p *Proxy) close() {
	_ = p.listener.Close()
	p.Cut()
	p.wg.Wait()
}

// StartProxy starts a proxy to target (host:port) on a free loopback port outside a test, as the
// benchmarks do to cut a replica from the seed; Close stops it.
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr is the proxy's loopback address, host:port.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Close stops a proxy started by StartProxy: it stops listening, drops every connection and waits
// for them to end.
func (p *Proxy) Close() { p.close() }
