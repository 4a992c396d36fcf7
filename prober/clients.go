package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// KubeconfigKey is the key of the kubeconfig in the shoot access Secret.
const KubeconfigKey = "kubeconfig"

// nodeLeaseNamespace holds the kubelets' node leases in a shoot.
const nodeLeaseNamespace = "kube-node-lease"

// ShootClients builds the clients of the shoot API servers from their kubeconfig Secrets and keeps
// one per shoot namespace, rebuilt only when the Secret changes (its UID or resourceVersion), so that
// connections are reused across probes. client-go's transport sends HTTP/2 pings on idle connections
// (health checks), and every call is retried once on a fresh connection before its failure counts:
// the original disabled keep-alive because stale connections caused false scale-downs. client-go's
// own retries (of 429 answers with Retry-After, and of some connection errors) are off: a throttled
// shoot must show as throttled, not as a timeout.
//
// ShootClients is safe for concurrent use.
type ShootClients struct {
	// Timeout bounds every request (the config's probeTimeout).
	Timeout time.Duration
	// QPS and Burst limit each shoot client, as --kube-api-qps/--kube-api-burst do for the seed.
	QPS   float32
	Burst int
	// UserAgent is sent with every request (default "dwd-prober").
	UserAgent string
	// MaxBytes and MaxItems bound every answer: a body longer than MaxBytes, or a list of more than
	// MaxItems items, is an error wrapping ErrAnswerTooLarge. 0 means no bound.
	MaxBytes int64
	MaxItems int
	// MaxBytesInFlight bounds the bytes of the answers of all shoots held at once, from their arrival
	// until they are decoded; an answer with no room within its request's timeout makes the probe
	// inconclusive (reason memory_budget). 0 means no bound. Read when the first client is built.
	MaxBytesInFlight int64
	// AllowInsecure lets kubeconfigs skip the verification of the server's certificate
	// (insecure-skip-tls-verify) or name a plain http:// server: for labs only.
	AllowInsecure bool
	// Wrap, if set, wraps every shoot client's transport, e.g. to count requests.
	Wrap func(http.RoundTripper) http.RoundTripper

	mu      sync.Mutex
	clients map[string]*ShootClient
	budget  *answerBudget // built from MaxBytesInFlight with the first client; nil: no bound
}

// ShootClient talks to one shoot's API server.
type ShootClient struct {
	secretUID     types.UID
	secretVersion string
	core          *rest.RESTClient // /api/v1, and /version
	coordination  *rest.RESTClient // /apis/coordination.k8s.io/v1
	http          *http.Client
	maxItems      int
}

// ErrAnswerTooLarge is wrapped by the error of a shoot answer over the bounds of ShootClients.
var ErrAnswerTooLarge = errors.New("shoot answer too large")

// For returns the client for the shoot whose access Secret this is, building it when the Secret is
// new or changed. The error names what is wrong with the Secret, never its contents.
func (c *ShootClients) For(secret *corev1.Secret) (*ShootClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.clients[secret.Namespace]; ok && sc.secretUID == secret.UID && sc.secretVersion == secret.ResourceVersion {
		return sc, nil
	}
	if c.budget == nil && c.MaxBytesInFlight > 0 {
		c.budget = newAnswerBudget(c.MaxBytesInFlight)
	}
	sc, err := c.build(secret)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	if old, ok := c.clients[secret.Namespace]; ok {
		old.closeIdleConnections()
	}
	if c.clients == nil {
		c.clients = map[string]*ShootClient{}
	}
	c.clients[secret.Namespace] = sc
	return sc, nil
}

// Forget drops the client of a namespace and closes its idle connections.
func (c *ShootClients) Forget(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.clients[namespace]; ok {
		sc.closeIdleConnections()
		delete(c.clients, namespace)
	}
}

// Len returns the number of cached clients.
func (c *ShootClients) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

func (c *ShootClients) build(secret *corev1.Secret) (*ShootClient, error) {
	cfg, err := restConfigFromSecret(secret, c.AllowInsecure)
	if err != nil {
		return nil, err
	}
	cfg.Timeout, cfg.QPS, cfg.Burst = c.Timeout, c.QPS, c.Burst
	// Protobuf, as kube's own components use: decoding node and lease lists costs a fraction of JSON.
	// A server that cannot send protobuf answers JSON, which the client decodes just as well.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.UserAgent = c.UserAgent
	if cfg.UserAgent == "" {
		cfg.UserAgent = "dwd-prober"
	}
	if c.Wrap != nil {
		cfg.Wrap(c.Wrap)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return answerTransport{next: rt, maxBytes: c.MaxBytes, budget: c.budget}
	})
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the HTTP client: %w", err)
	}
	if cfg.QPS > 0 {
		// One budget per shoot, shared by its two REST clients.
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	// Only the two REST clients the probes use, not a whole clientset: a clientset builds a client
	// per API group, which thousands of shoots per replica would pay for in memory.
	core, err := restClientFor(cfg, httpClient, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	coordination, err := restClientFor(cfg, httpClient, "/apis", coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &ShootClient{secretUID: secret.UID, secretVersion: secret.ResourceVersion, core: core, coordination: coordination, http: httpClient, maxItems: c.MaxItems}, nil
}

// restClientFor builds the REST client of one API group version over the shared HTTP client.
func restClientFor(base *rest.Config, httpClient *http.Client, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.APIPath, cfg.GroupVersion = apiPath, &gv
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c, err := rest.RESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		// The error may quote the server URL, password and all; what else the config holds is secret.
		return nil, KubeconfigError(fmt.Sprintf("building the %s client", gv), err, []byte(base.Host+" "+base.BearerToken+" "+base.Password))
	}
	return c, nil
}

// Read is how a list was read: which kind of read, and the shoot API server's Date header of the
// answer (zero when it sent none).
type Read struct {
	// Consistent is a read with resourceVersion unset, which the API server serves as fresh as etcd;
	// otherwise it was a resourceVersion=0 read, which its watch cache may serve from the past.
	Consistent bool
	Date       time.Time
}

// Nodes lists the shoot's Nodes: from the API server's watch cache, or consistently.
func (c *ShootClient) Nodes(ctx context.Context, consistent bool) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	_, err := c.list(ctx, consistent, c.core.Get().Resource("nodes"), list)
	if err == nil {
		err = c.bounded(len(list.Items), &list.ListMeta)
	}
	return list.Items, err
}

// NodeLeases lists the kubelets' Leases: from the API server's watch cache, or consistently.
func (c *ShootClient) NodeLeases(ctx context.Context, consistent bool) ([]coordinationv1.Lease, Read, error) {
	list := &coordinationv1.LeaseList{}
	read, err := c.list(ctx, consistent, c.coordination.Get().Namespace(nodeLeaseNamespace).Resource("leases"), list)
	if err == nil {
		err = c.bounded(len(list.Items), &list.ListMeta)
	}
	return list.Items, read, err
}

// list sends a list request and decodes the answer into obj. The request asks for at most MaxItems+1
// items, so that an API server that pages the list (a consistent read) sends no more than that.
func (c *ShootClient) list(ctx context.Context, consistent bool, req *rest.Request, obj runtime.Object) (Read, error) {
	opts := &metav1.ListOptions{ResourceVersion: "0"}
	if consistent {
		opts.ResourceVersion = ""
	}
	if c.maxItems > 0 {
		opts.Limit = int64(c.maxItems) + 1
	}
	read := Read{Consistent: consistent}
	err := c.retryOnce(ctx, func() error {
		var err error
		read.Date, err = c.call(ctx, c.maxItems, func(ctx context.Context) error {
			return req.VersionedParams(opts, scheme.ParameterCodec).MaxRetries(0).Do(ctx).Into(obj)
		})
		return err
	})
	return read, err
}

// call sends one request and decodes its answer with send, under an answerMeta for answerTransport
// to fill (maxItems: the list's bound, 0 for no list), and returns the answer's Date. The answer's
// bytes go back to the budget once send has decoded them. An answer answerTransport refused (over a
// bound, or the budget) fails with answerTransport's error, whatever client-go made of it. An error
// after the API server answered is an answeredError.
func (c *ShootClient) call(ctx context.Context, maxItems int, send func(context.Context) error) (time.Time, error) {
	answer := &answerMeta{maxItems: maxItems}
	err := send(context.WithValue(ctx, answerKey{}, answer))
	answer.release()
	if answer.refused != nil {
		err = answer.refused
	}
	if err != nil && answer.answered {
		err = answeredError{err}
	}
	return answer.date, err
}

// answeredError is an error of a request that the API server answered: an error status, or an answer
// that could not be read, decoded or held.
type answeredError struct{ error }

func (e answeredError) Unwrap() error { return e.error }

// bounded fails a list that is over MaxItems or that the API server cut short: a partial list is never
// an answer.
func (c *ShootClient) bounded(items int, meta *metav1.ListMeta) error {
	switch {
	case c.maxItems > 0 && items > c.maxItems:
		return fmt.Errorf("%w: more than %d items", ErrAnswerTooLarge, c.maxItems)
	case meta.Continue != "" || meta.RemainingItemCount != nil:
		return fmt.Errorf("%w: the API server cut the list short", ErrAnswerTooLarge)
	}
	return nil
}

// retryOnce runs call, and once more on fresh connections when it failed without an answer from
// the API server on a connection that broke (a stale or broken connection). An error status or any
// other answer the probe could not use (answeredError) is an answer, a timeout already took
// probeTimeout, and an answer over the bounds or the budget would be as large again: none of them is
// retried.
func (c *ShootClient) retryOnce(ctx context.Context, call func() error) error {
	err := call()
	var status apierrors.APIStatus
	var netErr net.Error
	if err == nil || errors.As(err, &status) || errors.As(err, new(answeredError)) || ctx.Err() != nil || errors.Is(err, ErrAnswerTooLarge) || errors.As(err, new(inconclusive)) ||
		errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return err
	}
	c.closeIdleConnections()
	return call()
}

// closeIdleConnections closes the idle connections of the client's transport. http.Client's own
// CloseIdleConnections stops at client-go's outermost wrapper, which does not implement it; this
// unwraps every wrapper down to the transport. The transport may be shared with other shoots of the
// same TLS settings (client-go's TLS cache): closing their idle connections too is harmless.
func (c *ShootClient) closeIdleConnections() {
	utilnet.CloseIdleConnectionsFor(c.http.Transport)
}
