package sim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// Fault is a wrong answer of a shoot's API server that no Scenario plays: a broken server rather
// than a lying one. A FaultServer plays it in front of a ShootServer.
type Fault int

const (
	// NoFault passes every request to the ShootServer.
	NoFault Fault = iota
	// ServerError answers every request 500 Internal Server Error with a Status body.
	ServerError
	// MalformedJSON answers the node and lease lists 200 with a body that is not JSON; GET /version
	// is answered by the ShootServer.
	MalformedJSON
	// LeaseWithoutRenewTime answers the lease list as the ShootServer does, in JSON, with every
	// lease's spec.renewTime left out.
	LeaseWithoutRenewTime
)

// faultNames are the names of the faults, in order.
var faultNames = []string{"NoFault", "ServerError", "MalformedJSON", "LeaseWithoutRenewTime"}

// String returns the name of the fault.
func (f Fault) String() string {
	if f >= 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

var serverErrorJSON = statusJSON(http.StatusInternalServerError, metav1.StatusReasonInternalError, "simulated internal error")

// malformedJSON is a list body cut off in the middle.
var malformedJSON = []byte(`{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[{"metadata":{"name":`)

// FaultServer is an HTTPS server in front of a ShootServer, with the same certificate (so a shoot's
// CA still verifies it) and the same paths: each shoot answers with its Fault, or, without one, as
// the ShootServer does, which also counts the request. Point a shoot's kubeconfig at it with
// Kubeconfig.
//
// Lifecycle: NewFaultServer listens and serves in a goroutine the server owns; Close stops it and
// waits. Locking: mu guards faults; a request reads its shoot's fault once under it.
type FaultServer struct {
	shoots   *ShootServer
	listener net.Listener
	srv      *http.Server
	served   chan struct{}

	mu     sync.Mutex
	faults map[string]Fault
}

// NewFaultServer starts a FaultServer on a free loopback port in front of shoots.
func NewFaultServer(shoots *ShootServer) (*FaultServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	f := &FaultServer{shoots: shoots, listener: ln, served: make(chan struct{}), faults: map[string]Fault{}}
	f.srv = &http.Server{
		Handler:           f,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{shoots.tls.cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(f.served)
		_ = f.srv.ServeTLS(ln, "", "") // http.ErrServerClosed after Close
	}()
	return f, nil
}

// Close stops the server and waits until it has stopped; requests in flight are cut.
func (f *FaultServer) Close() error {
	err := f.srv.Close()
	<-f.served
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// SetFault sets how a shoot answers from its next request on; NoFault removes its fault.
func (f *FaultServer) SetFault(name string, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault == NoFault {
		delete(f.faults, name)
		return
	}
	f.faults[name] = fault
}

func (f *FaultServer) fault(name string) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.faults[name]
}

// Kubeconfig is the ShootServer's kubeconfig of a shoot with its server at this FaultServer.
func (f *FaultServer) Kubeconfig(name string) ([]byte, error) {
	cfg, err := clientcmd.Load(f.shoots.Kubeconfig(name))
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, err
		}
		u.Host = f.listener.Addr().String()
		c.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

// ServeHTTP answers a request for /shoots/<name>/<path> with the shoot's fault.
func (f *FaultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, path := splitShootPath(r.URL.Path)
	endpoint := endpointOf(path)
	switch f.fault(name) {
	case ServerError:
		f.shoots.ServeHTTP(httptest.NewRecorder(), r) // counted as asked
		writeJSON(w, http.StatusInternalServerError, serverErrorJSON)
	case MalformedJSON:
		if endpoint != EndpointNodes && endpoint != EndpointLeases {
			f.shoots.ServeHTTP(w, r)
			return
		}
		f.shoots.ServeHTTP(httptest.NewRecorder(), r)
		writeJSON(w, http.StatusOK, malformedJSON)
	case LeaseWithoutRenewTime:
		if endpoint != EndpointLeases {
			f.shoots.ServeHTTP(w, r)
			return
		}
		f.serveWithoutRenewTime(w, r)
	default:
		f.shoots.ServeHTTP(w, r)
	}
}

// serveWithoutRenewTime asks the ShootServer for the lease list in JSON and answers it without the
// leases' renewTimes.
func (f *FaultServer) serveWithoutRenewTime(w http.ResponseWriter, r *http.Request) {
	asJSON := r.Clone(context.WithoutCancel(r.Context()))
	asJSON.Header.Set("Accept", "application/json")
	rec := httptest.NewRecorder()
	f.shoots.ServeHTTP(rec, asJSON)
	if rec.Code != http.StatusOK {
		writeJSON(w, rec.Code, rec.Body.Bytes())
		return
	}
	list := &coordinationv1.LeaseList{}
	if err := json.Unmarshal(rec.Body.Bytes(), list); err != nil {
		writeJSON(w, http.StatusInternalServerError, serverErrorJSON)
		return
	}
	for i := range list.Items {
		list.Items[i].Spec.RenewTime = nil
	}
	body, err := json.Marshal(list)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, serverErrorJSON)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// writeJSON answers code with a JSON body, dated now.
func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
	w.WriteHeader(code)
	_, _ = w.Write(body) // a client that went away is no error of the simulated server
}

// KubeconfigWithOtherCA is a shoot's kubeconfig whose certificate-authority-data is a CA that did not
// sign the server's certificate: a client must refuse the server.
func (s *ShootServer) KubeconfigWithOtherCA(name string) ([]byte, error) {
	other, err := newServingTLS(time.Now())
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(s.Kubeconfig(name))
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.CertificateAuthorityData = other.caPEM
	}
	return clientcmd.Write(*cfg)
}
