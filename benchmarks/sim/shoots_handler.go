package sim

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The paths, below a shoot's prefix, of the endpoints the prober calls.
const (
	versionPath = "version"
	nodesPath   = "api/v1/nodes"
	leasesPath  = "apis/coordination.k8s.io/v1/namespaces/" + nodeLeaseNamespace + "/leases"
)

var (
	notFoundJSON         = statusJSON(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	unauthorizedJSON     = statusJSON(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
	methodNotAllowedJSON = statusJSON(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	goneJSON             = statusJSON(http.StatusGone, metav1.StatusReasonExpired, errGone.Error())
)

// ServeHTTP answers a request for /shoots/<name>/<path> as that shoot's API server would in its
// scenario. A Down shoot closes the request unanswered, before authentication as a dead server would;
// otherwise a request without the bearer token is answered 401, one for an unknown shoot or path 404,
// one that is not a GET 405. Every answer carries a Date from the shoot's clock.
func (s *ShootServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, path := splitShootPath(r.URL.Path)
	endpoint := endpointOf(path)
	s.counts.received(endpoint)
	now := s.opts.Clock.Now()
	sh, st := s.lookup(name)
	ans := answer{s: s, w: w, date: now}
	if sh != nil {
		sh.requests.Add(1)
		sh.called(r.UserAgent(), endpoint == EndpointLeases || endpoint == EndpointNodes, now)
		ans.date = now.Add(st.ServerClockOffset)
	}
	switch {
	case sh != nil && st.Kind == Down:
		s.closeUnanswered(w)
	case !s.authenticated(r):
		ans.json(http.StatusUnauthorized, unauthorizedJSON)
	case sh == nil || endpoint == EndpointOther:
		ans.json(http.StatusNotFound, notFoundJSON)
	case r.Method != http.MethodGet:
		ans.json(http.StatusMethodNotAllowed, methodNotAllowedJSON)
	default:
		s.serveScenario(ans, r, sh, st, endpoint, now)
	}
}

// serveScenario answers an authenticated GET for one of the prober's endpoints of a shoot.
func (s *ShootServer) serveScenario(ans answer, r *http.Request, sh *shoot, st *scenarioState, endpoint Endpoint, now time.Time) {
	var read listRead
	if endpoint != EndpointVersion {
		var err error
		if read, err = parseListRead(r.URL.Query()); err != nil {
			ans.json(http.StatusBadRequest, statusJSON(http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error()))
			return
		}
		s.counts.listed(endpoint, read.cached)
	}
	switch st.Kind {
	case Throttled:
		ans.w.Header().Set("Retry-After", strconv.Itoa(st.retryAfterSeconds()))
		ans.json(http.StatusTooManyRequests, st.throttled)
		return
	case Slow:
		if !s.wait(r.Context(), st.Delay) {
			s.abandon()
		}
		now = s.opts.Clock.Now()
		ans.date = now.Add(st.ServerClockOffset)
	}
	enc := encodingOf(r)
	var b body
	var err error
	switch endpoint {
	case EndpointVersion:
		ans.json(http.StatusOK, versionJSON)
		return
	case EndpointNodes:
		b, err = s.nodeList(enc, sh, st, read, now)
	case EndpointLeases:
		b, err = s.leaseList(enc, sh, st, read, now)
	}
	switch {
	case errors.Is(err, errGone):
		ans.json(http.StatusGone, goneJSON)
	case endpoint == EndpointLeases && st.Kind == SlowBody:
		s.sendLate(r.Context(), ans, enc.contentType(), b, st.Delay)
	default:
		ans.send(enc.contentType(), http.StatusOK, b)
	}
}

// nodeList is the page of the shoot's NodeList (its nodes, then the scenario's extra nodes) that
// read asks for. Nodes do not age: a StaleCache answers them as they are.
func (s *ShootServer) nodeList(enc encoding, sh *shoot, st *scenarioState, read listRead, now time.Time) (body, error) {
	at := now
	if !read.at.IsZero() {
		at = read.at
	}
	n := len(sh.nodes)
	from, to, meta, err := read.page(n+st.ExtraNodes, at)
	if err != nil {
		return body{}, err
	}
	runs := [][]byte{sh.nodeRuns[enc].span(min(from, n), min(to, n))}
	if to > n {
		runs = append(runs, st.extraNodes.run(enc, st.ExtraNodes, st.since).span(max(from-n, 0), to-n))
	}
	return listBody(enc, nodeListType, meta, runs...), nil
}

// leaseList is the page of the shoot's node LeaseList (the nodes' leases, then the scenario's extra
// leases) that read asks for, as of now; as of the moment the first page was served for a following
// page; and as of CacheLag before the scenario was set for a StaleCache's cached read.
func (s *ShootServer) leaseList(enc encoding, sh *shoot, st *scenarioState, read listRead, now time.Time) (body, error) {
	at := now
	switch {
	case !read.at.IsZero():
		at = read.at
	case st.Kind == StaleCache && read.cached:
		at = st.since.Add(-st.CacheLag)
	}
	n := len(sh.nodes)
	from, to, meta, err := read.page(n+st.ExtraLeases, at)
	if err != nil {
		return body{}, err
	}
	times := leaseTimes{interval: s.opts.RenewInterval, nodeClockOffset: st.NodeClockOffset}
	nodeLeases := &itemRun{}
	for i := from; i < min(to, n); i++ {
		nodeLeases.add(enc, nodeLease(sh.nodes[i], times.node(at, sh.phases[i], st.kubelets[i])))
	}
	runs := [][]byte{nodeLeases.data}
	if to > n {
		runs = append(runs, st.extraLeases.run(enc, st.ExtraLeases, times.extra(at)).span(max(from-n, 0), to-n))
	}
	return listBody(enc, leaseListType, meta, runs...), nil
}

// sendLate answers 200 with the headers at once and the body, fixed already, after delay on the
// server's clock; a client that gives up first abandons it.
func (s *ShootServer) sendLate(ctx context.Context, ans answer, contentType string, b body, delay time.Duration) {
	ans.header(contentType, b.len())
	ans.w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(ans.w).Flush() // a client that went away is no error of the simulated server
	if !s.wait(ctx, delay) {
		s.abandon()
	}
	_ = b.writeTo(ans.w)
	s.counts.answered(http.StatusOK)
}

// abandon ends a request whose client gave up, or whose server stopped, while it was held back.
func (s *ShootServer) abandon() {
	s.counts.abandoned.Add(1)
	panic(http.ErrAbortHandler) // returning would answer 200 with an empty body
}

// answer writes one answer of a shoot's API server, dated by the shoot's clock.
type answer struct {
	s    *ShootServer
	w    http.ResponseWriter
	date time.Time
}

// header sets the headers of an answer.
func (a answer) header(contentType string, length int) {
	h := a.w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(length))
	h.Set("Date", a.date.UTC().Format(http.TimeFormat))
}

// json answers with a JSON body.
func (a answer) json(code int, b []byte) { a.send("application/json", code, bytesBody(b)) }

// send answers with a body of the given content type and counts the answer.
func (a answer) send(contentType string, code int, b body) {
	a.header(contentType, b.len())
	a.w.WriteHeader(code)
	_ = b.writeTo(a.w) // a client that went away is no error of the simulated server
	a.s.counts.answered(code)
}

// closeUnanswered ends a request without an answer, so that the client sees a transport error: an
// HTTP/1 connection is hijacked and closed; an HTTP/2 stream, which cannot be hijacked, is reset
// (net/http resets the stream, or closes an HTTP/1 connection, when the handler panics with
// http.ErrAbortHandler, and logs nothing). Resetting only the stream matters: client-go shares one
// HTTP/2 connection among all shoots of this server.
func (s *ShootServer) closeUnanswered(w http.ResponseWriter) {
	s.counts.closed.Add(1)
	if hijacker, ok := w.(http.Hijacker); ok {
		if conn, _, err := hijacker.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// authenticated reports whether the request carries the server's bearer token.
func (s *ShootServer) authenticated(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(s.opts.Token)) == 1
}

// wait waits for d on the server's clock and reports whether it passed before ctx ended.
func (s *ShootServer) wait(ctx context.Context, d time.Duration) bool {
	timer := s.opts.Clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// splitShootPath splits /shoots/<name>/<path> into the shoot's name and the path below its prefix;
// the name is empty when the path is not below a shoot's prefix.
func splitShootPath(p string) (name, path string) {
	rest, ok := strings.CutPrefix(p, shootsPrefix)
	if !ok {
		return "", ""
	}
	name, path, _ = strings.Cut(rest, "/")
	return name, path
}

// endpointOf returns the endpoint a path below a shoot's prefix asks for.
func endpointOf(path string) Endpoint {
	switch path {
	case versionPath:
		return EndpointVersion
	case nodesPath:
		return EndpointNodes
	case leasesPath:
		return EndpointLeases
	}
	return EndpointOther
}
