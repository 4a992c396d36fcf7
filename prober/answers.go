package prober

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"google.golang.org/protobuf/encoding/protowire"
)

// answerKey carries an *answerMeta in a request's context, for answerTransport to fill.
type answerKey struct{}

// answerMeta is what answerTransport saw of an answer: its Date header, what it holds of the
// replica's budget, and why it refused the answer, if it did. For a list, maxItems is how many items
// it may hold (0: any). It is used by its request's goroutine only.
type answerMeta struct {
	date     time.Time
	maxItems int
	hold     *budgetHold // nil without a budget
	refused  error
	// answered is set once the API server's answer (its status line and headers) arrived: whatever
	// fails after that, the API server was there.
	answered bool
}

// refuse records err, the first reason answerTransport refused the answer, and returns it. Callers
// return it instead of what client-go and net/http made of it: a read error that net/http turned into
// a bare timeout once the client's timeout passed keeps none of its cause. m may be nil.
func (m *answerMeta) refuse(err error) error {
	if m != nil && m.refused == nil {
		m.refused = err
	}
	return err
}

// release gives the answer's bytes back to the budget, once it has been decoded.
func (m *answerMeta) release() {
	if m.hold != nil {
		m.hold.release()
	}
}

// answerTransport bounds the answers of the shoot API servers and records the Date header of each
// in the request's answerMeta, if any:
//   - a body longer than maxBytes (0: no bound) is an error, on Content-Length and while reading;
//   - the answer's bytes are held in budget (nil: none) until it is decoded (see answerBudget);
//   - a list whose request bounds its items is counted before anything decodes it: the watch cache
//     ignores the limit of a resourceVersion=0 list, and decoding 200,000 leases costs far more memory
//     than their bytes.
type answerTransport struct {
	next     http.RoundTripper
	maxBytes int64
	budget   *answerBudget
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the transport underneath.
func (t answerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	meta, _ := req.Context().Value(answerKey{}).(*answerMeta)
	if meta != nil {
		meta.answered = true
		meta.date, _ = http.ParseTime(resp.Header.Get("Date"))
	}
	if t.maxBytes > 0 && resp.ContentLength > t.maxBytes {
		_ = resp.Body.Close()
		return nil, meta.refuse(fmt.Errorf("%w: %d bytes, more than %d", ErrAnswerTooLarge, resp.ContentLength, t.maxBytes))
	}
	if err := t.hold(req.Context(), resp, meta); err != nil {
		_ = resp.Body.Close()
		return nil, meta.refuse(err)
	}
	if t.maxBytes > 0 {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.maxBytes, meta: meta}
	}
	if meta == nil || meta.maxItems <= 0 || resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	return countedList(resp, meta)
}

// hold takes the answer's first bytes from the budget, waiting in line until ctx ends, and makes its
// body read no further than it holds.
func (t answerTransport) hold(ctx context.Context, resp *http.Response, meta *answerMeta) error {
	if t.budget == nil {
		return nil
	}
	h := &budgetHold{budget: t.budget}
	if meta != nil {
		meta.hold = h
	}
	known := resp.ContentLength >= 0
	first := int64(budgetChunk)
	if known {
		first = resp.ContentLength
	}
	if err := h.take(ctx, first); err != nil {
		return err
	}
	resp.Body = &budgetBody{ReadCloser: resp.Body, ctx: ctx, hold: h, meta: meta, known: known}
	return nil
}

// countedList reads a list answer and refuses it when it holds more than meta.maxItems items, or when
// it is in an encoding that cannot be counted; otherwise it hands the bytes on. Without a
// Content-Type, client-go decodes protobuf, as it asked for.
func countedList(resp *http.Response, meta *answerMeta) (*http.Response, error) {
	maxItems := meta.maxItems
	contentType := resp.Header.Get("Content-Type")
	mediaType := runtime.ContentTypeProtobuf
	if contentType != "" {
		mediaType, _, _ = mime.ParseMediaType(contentType)
	}
	if mediaType != runtime.ContentTypeProtobuf && mediaType != runtime.ContentTypeJSON {
		_ = resp.Body.Close()
		return nil, meta.refuse(fmt.Errorf("a list answer of Content-Type %q, which the watchdog neither asked for nor counts", mediaType))
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if mediaType == runtime.ContentTypeJSON {
		err = checkJSONListItems(data, maxItems)
	} else if n, countErr := countListItems(data); countErr == nil && n > maxItems {
		// A protobuf answer that cannot be counted fails to decode just as well, at no cost.
		err = fmt.Errorf("%w: %d items, more than %d", ErrAnswerTooLarge, n, maxItems)
	}
	if err != nil {
		return nil, meta.refuse(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// checkJSONListItems fails a JSON list answer of more than maxItems items, or one it cannot count.
//
// The items are counted on the stream of tokens, each item skipped unread (skipJSON), rather than
// refusing JSON above a small byte cap: a JSON list is legitimate (a server may not speak protobuf,
// the tests' and simulator's shoots answer JSON), and the count costs no allocation per item, so that
// a list of 200,000 leases is refused at the cost of its bytes. encoding/json's scanner bounds the
// nesting of every value it skips; a list that does not parse is refused, since client-go's decoder
// would only spend memory to fail on it too.
func checkJSONListItems(data []byte, maxItems int) error {
	n, err := countJSONListItems(data, maxItems)
	switch {
	case err != nil:
		return fmt.Errorf("the JSON list answer cannot be counted: %w", err)
	case n > maxItems:
		return fmt.Errorf("%w: more than %d items", ErrAnswerTooLarge, maxItems)
	}
	return nil
}

// countJSONListItems counts the elements of every top-level "items" array of a JSON object, stopping
// once there are more than maxItems.
func countJSONListItems(data []byte, maxItems int) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, errors.New("not a JSON object")
	}
	items := 0
	for dec.More() && items <= maxItems {
		key, err := dec.Token()
		if err != nil {
			return items, err
		}
		if key != "items" {
			if err := dec.Decode(&skipJSON{}); err != nil {
				return items, err
			}
			continue
		}
		n, err := countJSONArray(dec, maxItems-items)
		items += n
		if err != nil {
			return items, err
		}
	}
	return items, nil
}

// countJSONArray counts the elements of the array (or null) the decoder is at, stopping once there
// are more than maxItems.
func countJSONArray(dec *json.Decoder, maxItems int) (int, error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return 0, err
	case tok == nil:
		return 0, nil
	case tok != json.Delim('['):
		return 0, errors.New("items is not an array")
	}
	n := 0
	for dec.More() {
		if n++; n > maxItems {
			return n, nil
		}
		if err := dec.Decode(&skipJSON{}); err != nil {
			return n, err
		}
	}
	_, err = dec.Token() // the closing bracket
	return n, err
}

// skipJSON skips a JSON value: encoding/json checks it and hands it over without copying or
// decoding it.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

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
	meta *answerMeta // records the refusal; nil for a request without one
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, b.meta.refuse(fmt.Errorf("%w: more than the bound of bytes", ErrAnswerTooLarge))
	}
	return n, err
}
