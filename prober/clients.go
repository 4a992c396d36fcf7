package prober

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/flowcontrol"

	"google.golang.org/protobuf/encoding/protowire"
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
	// Wrap, if set, wraps every shoot client's transport, e.g. to count requests.
	Wrap func(http.RoundTripper) http.RoundTripper

	mu      sync.Mutex
	clients map[string]*ShootClient
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
	cfg, err := restConfigFromSecret(secret)
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
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return answerTransport{next: rt, maxBytes: c.MaxBytes} })
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

// restConfigFromSecret parses the kubeconfig in secret. Credentials that would make the watchdog run
// a program or read its own files (exec plugins, auth providers, file paths) are refused before
// anything is read or run.
func restConfigFromSecret(secret *corev1.Secret) (*rest.Config, error) {
	data, ok := secret.Data[KubeconfigKey]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("no %q key", KubeconfigKey)
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, KubeconfigError("invalid kubeconfig", err, data)
	}
	if err := refuseExternalCredentials(raw); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return nil, KubeconfigError("invalid kubeconfig", err, data)
	}
	if cfg.Host == "" {
		return nil, errors.New("kubeconfig names no server")
	}
	return cfg, nil
}

// refuseExternalCredentials rejects a kubeconfig whose credentials live outside it.
func refuseExternalCredentials(raw *clientcmdapi.Config) error {
	for _, user := range raw.AuthInfos {
		switch {
		case user.Exec != nil || user.AuthProvider != nil:
			return errors.New("kubeconfig uses an exec plugin or auth provider, which the watchdog does not run")
		case user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "":
			return errors.New("kubeconfig refers to files; it must carry its credentials inline")
		}
	}
	for _, cluster := range raw.Clusters {
		if cluster.CertificateAuthority != "" {
			return errors.New("kubeconfig refers to files; it must carry its CA inline")
		}
	}
	return nil
}

// Version calls GET /version, the API server probe.
func (c *ShootClient) Version(ctx context.Context) error {
	return c.retryOnce(ctx, func() error {
		return c.core.Get().AbsPath("/version").MaxRetries(0).Do(ctx).Error()
	})
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
		answer := &answerMeta{maxItems: c.maxItems}
		err := req.VersionedParams(opts, scheme.ParameterCodec).MaxRetries(0).Do(context.WithValue(ctx, answerKey{}, answer)).Into(obj)
		read.Date = answer.date
		return err
	})
	return read, err
}

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
// the API server on a connection that broke (a stale or broken connection). An error status is an
// answer, a timeout already took probeTimeout, and an answer over the bounds would be as large again:
// none of them is retried.
func (c *ShootClient) retryOnce(ctx context.Context, call func() error) error {
	err := call()
	var status apierrors.APIStatus
	var netErr net.Error
	if err == nil || errors.As(err, &status) || ctx.Err() != nil || errors.Is(err, ErrAnswerTooLarge) ||
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

// answerKey carries an *answerMeta in a request's context, for answerTransport to fill.
type answerKey struct{}

// answerMeta is what answerTransport saw of an answer (its Date header), and, for a list, how many
// items it may hold (0: any).
type answerMeta struct {
	date     time.Time
	maxItems int
}

// answerTransport bounds the bodies of answers to maxBytes (0: no bound) and records the Date header
// of each answer in the request's answerMeta, if any. A list in protobuf whose request bounds its
// items is counted before anything decodes it: the watch cache ignores the limit of a
// resourceVersion=0 list, and decoding 200,000 leases costs far more memory than their bytes.
type answerTransport struct {
	next     http.RoundTripper
	maxBytes int64
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the transport underneath.
func (t answerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if meta, ok := req.Context().Value(answerKey{}).(*answerMeta); ok {
		meta.date, _ = http.ParseTime(resp.Header.Get("Date"))
	}
	if t.maxBytes <= 0 {
		return resp, nil
	}
	if resp.ContentLength > t.maxBytes {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrAnswerTooLarge, resp.ContentLength, t.maxBytes)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.maxBytes}
	meta, _ := req.Context().Value(answerKey{}).(*answerMeta)
	if meta == nil || meta.maxItems <= 0 || resp.StatusCode != http.StatusOK ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), runtime.ContentTypeProtobuf) {
		return resp, nil
	}
	return countedList(resp, meta.maxItems)
}

// countedList reads a protobuf list answer and fails it when it holds more than maxItems items;
// otherwise it hands the bytes on.
func countedList(resp *http.Response, maxItems int) (*http.Response, error) {
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if n, err := countListItems(data); err == nil && n > maxItems {
		return nil, fmt.Errorf("%w: %d items, more than %d", ErrAnswerTooLarge, n, maxItems)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// protobufMagic starts every object kube encodes in protobuf.
var protobufMagic = []byte("k8s\x00")

// countListItems counts the items of a list in kube's protobuf encoding: the magic, then a
// runtime.Unknown whose field 2 (raw) holds the list, whose field 2 (items) repeats once per item.
func countListItems(data []byte) (int, error) {
	if !bytes.HasPrefix(data, protobufMagic) {
		return 0, errors.New("no protobuf magic")
	}
	list, err := protoField(data[len(protobufMagic):], 2)
	if err != nil {
		return 0, err
	}
	items := 0
	err = protoFields(list, func(num protowire.Number, _ []byte) {
		if num == 2 {
			items++
		}
	})
	return items, err
}

// protoField returns the bytes of the first length-delimited field num of a message.
func protoField(msg []byte, num protowire.Number) ([]byte, error) {
	var found []byte
	err := protoFields(msg, func(n protowire.Number, value []byte) {
		if n == num && found == nil {
			found = value
		}
	})
	if err == nil && found == nil {
		err = fmt.Errorf("no field %d", num)
	}
	return found, err
}

// protoFields calls each with the number and, for a length-delimited field, the bytes of every field
// of a message.
func protoFields(msg []byte, each func(protowire.Number, []byte)) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		var value []byte
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return protowire.ParseError(m)
			}
			value, n = v, m
		} else if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
			return protowire.ParseError(n)
		}
		each(num, value)
		msg = msg[n:]
	}
	return nil
}

// boundedBody fails a read past its bound, so that an answer without Content-Length is cut off too.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("%w: more than the bound of bytes", ErrAnswerTooLarge)
	}
	return n, err
}
