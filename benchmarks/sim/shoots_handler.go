package sim

import (
	"context"
	"crypto/subtle"
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
)

// ServeHTTP answers a request for /shoots/<name>/<path> as that shoot's API server would in its
// scenario. A Down shoot closes the request unanswered, before authentication as a dead server would;
// otherwise a request without the bearer token is answered 401, one for an unknown shoot or path 404,
// one that is not a GET 405.
func (s *ShootServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, path := splitShootPath(r.URL.Path)
	endpoint := endpointOf(path)
	s.counts.received(endpoint)
	sh, sc := s.lookup(name)
	if sh != nil {
		sh.requests.Add(1)
		sh.called(r.UserAgent(), s.opts.Clock.Now())
	}
	switch {
	case sh != nil && sc.Kind == Down:
		s.closeUnanswered(w)
	case !s.authenticated(r):
		s.write(w, http.StatusUnauthorized, unauthorizedJSON)
	case sh == nil || endpoint == EndpointOther:
		s.write(w, http.StatusNotFound, notFoundJSON)
	case r.Method != http.MethodGet:
		s.write(w, http.StatusMethodNotAllowed, methodNotAllowedJSON)
	default:
		s.serveScenario(w, r, sh, sc, endpoint)
	}
}

// serveScenario answers an authenticated GET for one of the prober's endpoints of a shoot.
func (s *ShootServer) serveScenario(w http.ResponseWriter, r *http.Request, sh *shoot, sc Scenario, endpoint Endpoint) {
	switch sc.Kind {
	case Throttled:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		s.write(w, http.StatusTooManyRequests, throttledJSON)
		return
	case Slow:
		if !s.wait(r.Context(), sc.Delay) {
			s.counts.abandoned.Add(1)
			panic(http.ErrAbortHandler) // returning would answer 200 with an empty body
		}
	}
	proto := acceptsProtobuf(r)
	switch {
	case endpoint == EndpointVersion:
		s.write(w, http.StatusOK, versionJSON)
	case endpoint == EndpointNodes && proto:
		s.writeAs(w, protobufContentType, http.StatusOK, sh.nodesProtobuf)
	case endpoint == EndpointNodes:
		s.write(w, http.StatusOK, sh.nodesJSON)
	case endpoint == EndpointLeases && proto:
		s.writeAs(w, protobufContentType, http.StatusOK,
			leaseListProtobuf(sh.nodes, sc.expiredLeases(len(sh.nodes)), s.opts.Clock.Now(), s.opts.ExpiredAge))
	case endpoint == EndpointLeases:
		s.write(w, http.StatusOK, sh.leases.render(sc.expiredLeases(len(sh.nodes)), s.opts.Clock.Now(), s.opts.ExpiredAge))
	}
}

// acceptsProtobuf reports whether the client asks for protobuf, as kube clients configured for it
// do ("application/vnd.kubernetes.protobuf, application/json"); the lists are then answered in
// protobuf, everything else in JSON, as an API server does.
func acceptsProtobuf(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), protobufContentType)
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

// write answers with a JSON body and counts the answer.
func (s *ShootServer) write(w http.ResponseWriter, code int, body []byte) {
	s.writeAs(w, "application/json", code, body)
}

// writeAs answers with a body of the given content type and counts the answer.
func (s *ShootServer) writeAs(w http.ResponseWriter, contentType string, code int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body) // a client that went away is no error of the simulated server
	s.counts.answered(code)
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
