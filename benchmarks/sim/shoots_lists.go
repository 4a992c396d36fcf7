package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A list answer is assembled from runs of items encoded ahead of time, so that a list of 200,000
// Leases is encoded once and then written as it is, page by page if the client asks for pages: the
// head (type, list metadata), the runs, the tail. Both encodings allow that: a JSON array is items
// joined by commas, and a protobuf list is its ListMeta field followed by one length-delimited field
// per item (repeated fields concatenate), wrapped in the API server's runtime.Unknown envelope.

// encoding is how an answer's body is encoded.
type encoding int

const (
	jsonEncoding encoding = iota
	protobufEncoding
	encodings // the number of encodings
)

// encodingOf is the encoding a request asks for: protobuf when it accepts it, as an API server does.
func encodingOf(r *http.Request) encoding {
	if strings.Contains(r.Header.Get("Accept"), protobufContentType) {
		return protobufEncoding
	}
	return jsonEncoding
}

// contentType is the Content-Type of an answer in the encoding.
func (e encoding) contentType() string {
	if e == protobufEncoding {
		return protobufContentType
	}
	return "application/json"
}

// protobufObject is what the generated protobuf code of the API types offers.
type protobufObject interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// itemRun is list items encoded end to end: in JSON each preceded by a comma, in protobuf each as
// the list's field 2 (items) with its length. Any run of consecutive items is then a slice of data.
type itemRun struct {
	data []byte
	ends []int // ends[i] is where item i ends in data
}

// add encodes one item at the end of the run.
func (r *itemRun) add(enc encoding, item protobufObject) {
	if enc == jsonEncoding {
		r.data = append(r.data, ',')
		r.data = append(r.data, mustMarshal(item)...)
	} else {
		size := item.Size()
		r.data = binary.AppendUvarint(append(r.data, 0x12), uint64(size))
		r.data = append(r.data, make([]byte, size)...)
		if _, err := item.MarshalToSizedBuffer(r.data[len(r.data)-size:]); err != nil {
			panic(err) // the API types always encode
		}
	}
	r.ends = append(r.ends, len(r.data))
}

// len is the number of items in the run.
func (r *itemRun) len() int { return len(r.ends) }

// span returns items [from, to) of the run.
func (r *itemRun) span(from, to int) []byte {
	if from >= to {
		return nil
	}
	start := 0
	if from > 0 {
		start = r.ends[from-1]
	}
	return r.data[start:r.ends[to-1]]
}

// body is an answer's body in pieces, written one after the other.
type body struct {
	pieces [][]byte
}

// bytesBody is a body of one piece.
func bytesBody(b []byte) body { return body{pieces: [][]byte{b}} }

// len is the length of the body.
func (b body) len() int {
	n := 0
	for _, p := range b.pieces {
		n += len(p)
	}
	return n
}

// writeTo writes the body; the first error ends it.
func (b body) writeTo(w io.Writer) error {
	for _, p := range b.pieces {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// protobufPrefix starts every protobuf answer of an API server ("k8s" and a zero byte).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// listBody assembles a list of the type from its metadata and runs of its items, in the encoding
// they were encoded in. It copies no item.
func listBody(enc encoding, typ runtime.TypeMeta, meta metav1.ListMeta, runs ...[]byte) body {
	if enc == jsonEncoding {
		return jsonListBody(typ, meta, runs)
	}
	metaField := binary.AppendUvarint([]byte{0x0a}, uint64(meta.Size()))
	metaField = append(metaField, mustProtobufMarshal(&meta)...)
	raw := len(metaField)
	for _, r := range runs {
		raw += len(r)
	}
	typeBytes := mustProtobufMarshal(&typ)
	head := binary.AppendUvarint(append(append([]byte(nil), protobufPrefix...), 0x0a), uint64(len(typeBytes)))
	head = binary.AppendUvarint(append(append(head, typeBytes...), 0x12), uint64(raw))
	pieces := append([][]byte{head, metaField}, runs...)
	// runtime.Unknown's contentEncoding and contentType, both empty.
	return body{pieces: append(pieces, []byte{0x1a, 0x00, 0x22, 0x00})}
}

// jsonListBody is listBody in JSON: the first item's comma is left out.
func jsonListBody(typ runtime.TypeMeta, meta metav1.ListMeta, runs [][]byte) body {
	head := fmt.Sprintf(`{"kind":%q,"apiVersion":%q,"metadata":%s,"items":[`, typ.Kind, typ.APIVersion, mustMarshal(meta))
	pieces := [][]byte{[]byte(head)}
	first := true
	for _, r := range runs {
		if len(r) == 0 {
			continue
		}
		if first {
			r, first = r[1:], false
		}
		pieces = append(pieces, r)
	}
	return body{pieces: append(pieces, []byte("]}"))}
}

// mustMarshal encodes v, one of the API types, which cannot fail to encode.
func mustMarshal(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// mustProtobufMarshal encodes one of the API types in protobuf, which cannot fail.
func mustProtobufMarshal(obj interface{ Marshal() ([]byte, error) }) []byte {
	data, err := obj.Marshal()
	if err != nil {
		panic(err)
	}
	return data
}

// listRead is how a client asked for a list.
type listRead struct {
	// cached is set when the list names a resourceVersion ("0" is the usual one): the API server
	// answers it from its watch cache. Without one the read is consistent (fresh from etcd).
	cached bool
	// limit is the most items a page may carry; 0 for all. kube-apiserver's watch cache ignores the
	// limit of a resourceVersion=0 list (cacher.computeListLimit), so a cached read sets none.
	limit int
	// offset and at come from a continue token: where the page starts, and the moment the first page
	// was served, whose state every page shows. at is zero for a first page.
	offset int
	at     time.Time
}

// errBadRequest marks a list request the API server would answer 400 Bad Request.
var errBadRequest = errors.New("bad request")

// parseListRead reads a list's query: resourceVersion, limit and continue.
func parseListRead(q url.Values) (listRead, error) {
	rv, limitParam, token := q.Get("resourceVersion"), q.Get("limit"), q.Get("continue")
	read := listRead{cached: rv != ""}
	if limitParam != "" {
		limit, err := strconv.ParseInt(limitParam, 10, 64)
		if err != nil {
			return read, fmt.Errorf("%w: limit %q is not a number", errBadRequest, limitParam)
		}
		if limit > 0 && rv != "0" {
			read.limit = int(min(limit, int64(maxExtraObjects)+1))
		}
	}
	if token == "" {
		return read, nil
	}
	if read.cached {
		return read, fmt.Errorf("%w: specifying resource version is not allowed when using continue", errBadRequest)
	}
	offset, at, err := parseContinue(token)
	if err != nil {
		return read, fmt.Errorf("%w: continue key is not valid: %v", errBadRequest, err)
	}
	read.offset, read.at = offset, at
	return read, nil
}

// continueToken names the next page: its first item and the moment the list was first served.
func continueToken(offset int, at time.Time) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset) + "/" + strconv.FormatInt(at.UnixNano(), 10)))
}

func parseContinue(token string) (int, time.Time, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, time.Time{}, err
	}
	offsetText, atText, ok := strings.Cut(string(raw), "/")
	offset, err1 := strconv.Atoi(offsetText)
	nanos, err2 := strconv.ParseInt(atText, 10, 64)
	if !ok || err1 != nil || err2 != nil || offset < 0 {
		return 0, time.Time{}, fmt.Errorf("%q is not offset/time", raw)
	}
	return offset, time.Unix(0, nanos).UTC(), nil
}

// errGone marks a continue token past the end of the list: the list shrank since the first page.
var errGone = errors.New("the provided continue parameter is too old")

// page is the range [from, to) of a list of total items that a read gets, and the list metadata
// that says whether more remain.
func (read listRead) page(total int, at time.Time) (from, to int, meta metav1.ListMeta, err error) {
	if read.offset > total {
		return 0, 0, meta, errGone
	}
	from, to = read.offset, total
	if read.limit > 0 && total-from > read.limit {
		to = from + read.limit
		remaining := int64(total - to)
		meta.Continue, meta.RemainingItemCount = continueToken(to, at), &remaining
	}
	return from, to, meta, nil
}
