package sim

import (
	"net/http"
	"sync/atomic"
)

// Endpoint is the kind of request a simulated API server answered.
type Endpoint string

const (
	// EndpointVersion is GET /version.
	EndpointVersion Endpoint = "version"
	// EndpointNodes is GET /api/v1/nodes.
	EndpointNodes Endpoint = "nodes"
	// EndpointLeases is GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases.
	EndpointLeases Endpoint = "leases"
	// EndpointOther is any other path, under a shoot's prefix or not.
	EndpointOther Endpoint = "other"
)

// answerCodes are the status codes a ShootServer answers with.
var answerCodes = []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound,
	http.StatusMethodNotAllowed, http.StatusGone, http.StatusTooManyRequests}

// Stats counts the requests a ShootServer received since it was created.
// Total = sum(ByCode) + Closed + Abandoned.
type Stats struct {
	Total uint64
	// ByEndpoint counts requests by the endpoint they asked for.
	ByEndpoint map[Endpoint]uint64
	// ByCode counts answered requests by status code (200, 400, 401, 404, 405, 410, 429).
	ByCode map[int]uint64
	// NodeLists and LeaseLists count the lists asked of shoots that answer (not Down), authenticated
	// and well-formed, by how they were asked, whatever the answer.
	NodeLists, LeaseLists ListReads
	// Closed counts requests whose connection (HTTP/1) or stream (HTTP/2) was closed without an
	// answer, because their shoot was Down.
	Closed uint64
	// Abandoned counts requests whose client gave up, or whose server stopped, before a Slow shoot
	// answered.
	Abandoned uint64
}

// ListReads counts lists by how they were asked.
type ListReads struct {
	// Consistent lists gave no resourceVersion: the API server reads them from etcd (or from a watch
	// cache it first brings up to date), so they are fresh.
	Consistent uint64
	// Cached lists gave one, "0" as a rule: the API server answers them from its watch cache, which
	// may lag.
	Cached uint64
}

// counters are the atomic counters behind Stats. The maps are filled once by newCounters and only
// read afterwards, so they need no lock.
type counters struct {
	total      atomic.Uint64
	byEndpoint map[Endpoint]*atomic.Uint64
	byCode     map[int]*atomic.Uint64
	closed     atomic.Uint64
	abandoned  atomic.Uint64
	// lists counts the lists by endpoint (nodes, leases) and read (consistent, cached).
	lists [2][2]atomic.Uint64
}

func newCounters() *counters {
	c := &counters{byEndpoint: map[Endpoint]*atomic.Uint64{}, byCode: map[int]*atomic.Uint64{}}
	for _, e := range []Endpoint{EndpointVersion, EndpointNodes, EndpointLeases, EndpointOther} {
		c.byEndpoint[e] = new(atomic.Uint64)
	}
	for _, code := range answerCodes {
		c.byCode[code] = new(atomic.Uint64)
	}
	return c
}

// received counts a request as it arrives.
func (c *counters) received(e Endpoint) {
	c.total.Add(1)
	c.byEndpoint[e].Add(1)
}

// listed counts a list as it is asked.
func (c *counters) listed(e Endpoint, cached bool) {
	endpoint, read := 0, 0
	if e == EndpointLeases {
		endpoint = 1
	}
	if cached {
		read = 1
	}
	c.lists[endpoint][read].Add(1)
}

// answered counts the status code a request was answered with, one of answerCodes.
func (c *counters) answered(code int) { c.byCode[code].Add(1) }

// snapshot returns the counters, leaving out endpoints and codes never seen.
func (c *counters) snapshot() Stats {
	s := Stats{Total: c.total.Load(), ByEndpoint: map[Endpoint]uint64{}, ByCode: map[int]uint64{},
		Closed: c.closed.Load(), Abandoned: c.abandoned.Load(),
		NodeLists:  ListReads{Consistent: c.lists[0][0].Load(), Cached: c.lists[0][1].Load()},
		LeaseLists: ListReads{Consistent: c.lists[1][0].Load(), Cached: c.lists[1][1].Load()}}
	for e, n := range c.byEndpoint {
		if v := n.Load(); v > 0 {
			s.ByEndpoint[e] = v
		}
	}
	for code, n := range c.byCode {
		if v := n.Load(); v > 0 {
			s.ByCode[code] = v
		}
	}
	return s
}
