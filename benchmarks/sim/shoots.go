package sim

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
)

// shootsPrefix starts the path of every shoot's API: https://<addr>/shoots/<name>/...
const shootsPrefix = "/shoots/"

// shutdownTimeout bounds how long Start waits for requests in flight when its context ends. They
// all end with the server's context, so it is a safety net only.
const shutdownTimeout = 5 * time.Second

// ShootServerOptions configure a ShootServer. Zero fields get defaults.
type ShootServerOptions struct {
	// ListenAddr is where the server listens; 127.0.0.1:0 (a free port) by default.
	ListenAddr string
	// Clock gives the renewTime of the leases, the Date of the answers and times the delays; the real
	// clock by default. The certificates are dated by the real clock, since clients verify them
	// against it.
	Clock clock.Clock
	// RenewInterval is how often the simulated kubelets renew their node leases, each on its own
	// schedule; 10s by default, the kubelet's.
	RenewInterval time.Duration
	// Token is the bearer token every request must carry, else it is answered 401; a random one by
	// default. Kubeconfig hands it out.
	Token string
	// NodeImages is how many container images each Node lists in its status, as a real node lists
	// those it pulled (each with a digest name, a tag name and a size); none by default.
	NodeImages int
}

// defaulted returns a copy of the options with the defaults filled in.
func (o ShootServerOptions) defaulted() ShootServerOptions {
	if o.ListenAddr == "" {
		o.ListenAddr = "127.0.0.1:0"
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = 10 * time.Second
	}
	if o.Token == "" {
		o.Token = rand.Text()
	}
	return o
}

// ShootServer is one HTTPS server that plays the kube-apiservers of many shoots, each under its own
// path prefix /shoots/<name>, which client-go keeps when it is part of a kubeconfig's server URL. It
// answers what a prober asks (GET /version, the Nodes, the node Leases) in the Scenario set per
// shoot, and counts what it was asked.
//
// Lifecycle: NewShootServer listens, Start serves in a goroutine the server owns, and the end of
// Start's context or Close stops it; Close waits for it.
//
// Locking: the shoots and their scenarios are changed only by AddShoot, RemoveShoot and SetScenario,
// under the write lock of mu; a request reads its shoot and scenario once under the read lock and is
// answered from that snapshot. A shoot's node names, renew phases and encoded Nodes never change
// after AddShoot; a scenario's extra objects are encoded by the first request that needs them, under
// that scenario's own locks, never under mu. A shoot's last caller and its probe window (ProbeStats)
// are guarded by that shoot's own callerMu; readers take it under mu's read lock, a request after it
// released mu. Counters are atomics. A ShootServer is safe for concurrent use.
type ShootServer struct {
	opts     ShootServerOptions
	listener net.Listener
	tls      *servingTLS
	counts   *counters

	// lifecycle guards the next four fields, which Start and Close change.
	lifecycle sync.Mutex
	closed    bool
	cancel    context.CancelFunc // ends the serving context
	stopped   chan struct{}      // closed when serving has stopped; nil before Start
	serveErr  error              // why serving stopped early; written before stopped is closed

	mu     sync.RWMutex
	shoots map[string]*shoot
}

// shoot is the state of one simulated shoot.
type shoot struct {
	nodes []string
	// phases are the renew phases of the nodes' leases, by node.
	phases []time.Duration
	// nodeRuns are the Nodes, encoded once in each encoding.
	nodeRuns [encodings]*itemRun
	requests atomic.Uint64
	scenario *scenarioState // guarded by ShootServer.mu

	// callerMu guards caller and probes.
	callerMu sync.Mutex
	caller   Caller
	probes   ProbeStats
}

// Caller is who last asked a shoot's API server, by User-Agent (dwd sends its replica's name there),
// and since when.
type Caller struct {
	// Agent is the User-Agent of the last request.
	Agent string
	// Since is when the first of the requests from Agent in a row arrived: the handover of a shoot to
	// another replica shows as a new Agent and Since.
	Since time.Time
	// Last is when the last request arrived.
	Last time.Time
}

// called records a request from agent at now; probe says it was a probe (a list of the Nodes or
// the node Leases).
func (sh *shoot) called(agent string, probe bool, now time.Time) {
	sh.callerMu.Lock()
	defer sh.callerMu.Unlock()
	if sh.caller.Agent != agent || sh.caller.Since.IsZero() {
		sh.caller.Agent, sh.caller.Since = agent, now
	}
	sh.caller.Last = now
	if probe {
		sh.probes.observe(agent, now)
	}
}

// NewShootServer generates the server's CA and serving certificate and starts listening, so that
// URL and Kubeconfig are known before Start. Connections wait in the listen backlog until Start. Close
// releases the listener.
func NewShootServer(opts ShootServerOptions) (*ShootServer, error) {
	opts = opts.defaulted()
	if err := nonNegative("renewInterval", opts.RenewInterval); err != nil {
		return nil, err
	}
	serving, err := newServingTLS(time.Now())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", opts.ListenAddr, err)
	}
	return &ShootServer{opts: opts, listener: ln, tls: serving, counts: newCounters(), shoots: map[string]*shoot{}}, nil
}

// Start serves HTTPS (HTTP/2 or HTTP/1.1, as the client offers) in a goroutine the server owns and
// returns at once: the server listens since NewShootServer. It serves until ctx ends or Close is
// called, then shuts down gracefully; request contexts derive from ctx, so a Slow answer in flight
// ends at once. Shutting down takes about a second while HTTP/2 clients are connected: Go's HTTP/2
// server gives them that long to leave after its GOAWAY. Start may be called once.
func (s *ShootServer) Start(ctx context.Context) error {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.stopped != nil || s.closed {
		return errors.New("shoot server already started or closed")
	}
	ctx, cancel := context.WithCancel(ctx)
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{s.tls.cert}, MinVersion: tls.VersionTLS12},
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
	}
	s.cancel, s.stopped = cancel, make(chan struct{})
	go s.serve(ctx, srv)
	return nil
}

// serve serves until ctx ends, then stops accepting, waits for the requests in flight (which end with
// ctx) and closes the connections. It closes s.stopped when done.
func (s *ShootServer) serve(ctx context.Context, srv *http.Server) {
	defer close(s.stopped)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(s.listener, "", "") }()
	select {
	case err := <-served:
		s.serveErr = fmt.Errorf("serving: %w", err)
		return
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close() // the safety net ran out: drop what is left
	}
	<-served // http.ErrServerClosed
}

// Close stops the server, as the end of Start's context does, and waits until it has stopped. It
// returns the error that stopped serving early, if any. Close releases the listener also when Start
// was never called; it may be called more than once.
func (s *ShootServer) Close() error {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.stopped == nil {
		return s.listener.Close()
	}
	s.cancel()
	<-s.stopped
	return s.serveErr
}

// URL returns the server's base URL, https://127.0.0.1:<port> by default.
func (s *ShootServer) URL() string { return "https://" + s.listener.Addr().String() }

// CAData returns the PEM of the server's own CA, which signed its serving certificate for 127.0.0.1
// and localhost.
func (s *ShootServer) CAData() []byte { return s.tls.caPEM }

// AddShoot adds a Healthy shoot with the given nodes, each with a node lease that its kubelet renews
// every RenewInterval: the renewTime is computed when the leases are listed, so no goroutine runs per
// node. It replaces a shoot of the same name, with its scenario and request count. name must be one
// path segment.
func (s *ShootServer) AddShoot(name string, nodes []string) {
	now := s.opts.Clock.Now()
	sh := &shoot{nodes: append([]string(nil), nodes...)}
	for _, n := range sh.nodes {
		sh.phases = append(sh.phases, renewPhase(n, s.opts.RenewInterval))
	}
	sh.scenario = newScenarioState(Scenario{}, now, make([]kubelet, len(sh.nodes)))
	for enc := range encodings {
		sh.nodeRuns[enc] = nodeRun(enc, sh.nodes, now, s.opts.NodeImages)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shoots[name] = sh
}

// RemoveShoot removes a shoot; its requests are answered 404 from then on and it leaves Requests.
func (s *ShootServer) RemoveShoot(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shoots, name)
}

// SetScenario sets how a shoot's API server behaves from its next request on; the moment it is set
// is when a StaleCache's cache stops, when the kubelets a Meltdown expires stop renewing (those
// stopped already stay stopped since they stopped), and when the others resume. It fails for an
// unknown shoot or an invalid scenario.
func (s *ShootServer) SetScenario(name string, sc Scenario) error {
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("shoot %q: %w", name, err)
	}
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.shoots[name]
	if !ok {
		return fmt.Errorf("shoot %q not found", name)
	}
	expired := sc.expiredLeases(len(sh.nodes))
	kubelets := make([]kubelet, len(sh.nodes))
	for i, k := range sh.scenario.kubelets {
		kubelets[i] = k.next(i < expired, now, sh.phases[i], s.opts.RenewInterval)
	}
	sh.scenario = newScenarioState(sc, now, kubelets)
	return nil
}

// Kubeconfig returns a kubeconfig (YAML) for a shoot, added or not: its server is URL()/shoots/<name>,
// its certificate-authority-data CAData and its user the server's bearer token.
func (s *ShootServer) Kubeconfig(name string) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.URL() + shootsPrefix + name, CertificateAuthorityData: s.tls.caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: s.opts.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		panic(fmt.Sprintf("encoding a kubeconfig: %v", err)) // a Config of plain strings always encodes
	}
	return data
}

// Requests returns how many requests each shoot received since it was added, whatever the answer.
// Stats.Total also counts requests for unknown shoots and paths.
func (s *ShootServer) Requests() map[string]uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	requests := make(map[string]uint64, len(s.shoots))
	for name, sh := range s.shoots {
		requests[name] = sh.requests.Load()
	}
	return requests
}

// Callers returns, per shoot that received a request, who asked last and since when.
func (s *ShootServer) Callers() map[string]Caller {
	s.mu.RLock()
	defer s.mu.RUnlock()
	callers := make(map[string]Caller, len(s.shoots))
	for name, sh := range s.shoots {
		sh.callerMu.Lock()
		if !sh.caller.Last.IsZero() {
			callers[name] = sh.caller
		}
		sh.callerMu.Unlock()
	}
	return callers
}

// Stats returns the counts of all requests received since the server was created.
func (s *ShootServer) Stats() Stats { return s.counts.snapshot() }

// lookup returns a shoot and its scenario, or nils when there is no such shoot.
func (s *ShootServer) lookup(name string) (*shoot, *scenarioState) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sh, ok := s.shoots[name]
	if !ok {
		return nil, nil
	}
	return sh, sh.scenario
}

// ExpiredSince returns the moment at which the leases of a melted shoot had aged enough to decide a
// scale-down: when at least fraction of its node leases had gone unrenewed for age (a prober's
// grace × 0.75). The melted kubelets stopped renewing when the Meltdown was set (or an earlier one
// that still holds them), each after its own last renewal, so this is some time after that. The
// second result is false when the shoot is not in a Meltdown whose expired leases reach fraction.
func (s *ShootServer) ExpiredSince(name string, age time.Duration, fraction float64) (time.Time, bool) {
	sh, st := s.lookup(name)
	if sh == nil || st.Kind != Meltdown || len(sh.nodes) == 0 {
		return time.Time{}, false
	}
	need := int(math.Ceil(fraction * float64(len(sh.nodes))))
	expired := st.expiredLeases(len(sh.nodes))
	if need < 1 || expired < need {
		return time.Time{}, false
	}
	crossed := make([]time.Time, 0, expired)
	for _, k := range st.kubelets[:expired] {
		crossed = append(crossed, k.frozen.Add(age))
	}
	slices.SortFunc(crossed, time.Time.Compare)
	return crossed[need-1], true
}

// RenewedAgain returns when the leases of a shoot whose kubelets resumed after a Meltdown stopped
// proving one: the first moment at which fewer than fraction of its node leases still showed the
// renewal made before they stopped (each resumed kubelet renews at its first renew instant after the
// resume). No probe can find the shoot healthy before. The second result is false unless the last
// scenario change resumed kubelets stopped by a Meltdown whose expired leases reached fraction.
func (s *ShootServer) RenewedAgain(name string, fraction float64) (time.Time, bool) {
	sh, st := s.lookup(name)
	if sh == nil || st.Kind == Meltdown || len(sh.nodes) == 0 {
		return time.Time{}, false
	}
	need := int(math.Ceil(fraction * float64(len(sh.nodes))))
	var renewed []time.Time
	for i, k := range st.kubelets {
		if !k.resumed.IsZero() && k.resumed.Equal(st.since) {
			renewed = append(renewed, k.firstRenewalAfterResume(sh.phases[i], s.opts.RenewInterval))
		}
	}
	if need < 1 || len(renewed) < need {
		return time.Time{}, false
	}
	slices.SortFunc(renewed, time.Time.Compare)
	return renewed[len(renewed)-need], true
}

// Melt is when a melted shoot's kubelets stopped renewing: Stopped, the moment the Meltdown that
// stopped them was set, and LastRenewal, the latest renewal among their leases, at most one renew
// interval before it.
type Melt struct {
	Stopped, LastRenewal time.Time
}

// Melted returns when the kubelets of a shoot in a Meltdown stopped renewing; false when it is not in
// one or none of its leases expire.
func (s *ShootServer) Melted(name string) (Melt, bool) {
	sh, st := s.lookup(name)
	if sh == nil || st.Kind != Meltdown {
		return Melt{}, false
	}
	var m Melt
	for _, k := range st.kubelets[:st.expiredLeases(len(sh.nodes))] {
		if k.stopped.After(m.Stopped) {
			m.Stopped = k.stopped
		}
		if k.frozen.After(m.LastRenewal) {
			m.LastRenewal = k.frozen
		}
	}
	return m, !m.Stopped.IsZero()
}

// scenarioState is a scenario as set, with what its answers need that does not change until the
// next SetScenario: the moment it was set, and its extra objects once encoded.
type scenarioState struct {
	Scenario
	since time.Time
	// kubelets are how the shoot's node leases renew, by node.
	kubelets    []kubelet
	throttled   []byte // the 429 answer
	extraNodes  extraNodes
	extraLeases extraLeases
}

func newScenarioState(sc Scenario, now time.Time, kubelets []kubelet) *scenarioState {
	return &scenarioState{Scenario: sc, since: now, kubelets: kubelets, throttled: throttledJSON(sc.retryAfterSeconds())}
}
