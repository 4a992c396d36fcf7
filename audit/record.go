package audit

import (
	"encoding/json"
	"fmt"
	"time"
)

// Events of a Record.
const (
	EventStart   = "start"
	EventRenew   = "renew"
	EventAcquire = "acquire"
	EventRelease = "release"
	EventSend    = "send"
	EventWrite   = "write"
)

// Kinds of a write.
const (
	KindScale  = "scale"
	KindDelete = "delete"
)

// Results of a write other than an API error's reason (see Result).
const (
	ResultOK       = "ok"
	ResultConflict = "conflict"
	// ResultCanceled: the write's context ended (its deadline at the fence, or the work stopped).
	ResultCanceled = "canceled"
	// ResultError: an error with no API reason (a connection refused, say).
	ResultError = "error"
	// ResultUnanswered: a write on record as sent whose result is not (the process was killed, or its
	// file could not be written, while the request was in flight).
	ResultUnanswered = "unanswered"
)

// Causes of a release the checker adds: a valid hold that ended because its fence passed.
const CauseFenceExpired = "fence-expired"

// Record is one line of an audit file. Event tells the kinds apart; the fields after Pid belong to
// some events only.
type Record struct {
	Event       string
	Wall        time.Time
	Mono        time.Duration // on the writing process's monotonic clock, since its Log was opened
	Member      string
	Incarnation string
	Group       string
	Pid         int

	// start
	Partitions int
	// PartitionFunction is the group's (sharding.Partitions); "" in files of versions before it, which
	// all used xxhash64-mod-v1.
	PartitionFunction string
	RenewDeadline     time.Duration
	LeaseDuration     time.Duration
	// renew
	Fence time.Time
	// acquire, release, send, write
	Partition int
	// acquire, release
	Cause string
	// send, write: a send is written before the request, a write with the result after it; ID pairs
	// them (a write without an ID has no send line, as in files of earlier versions).
	ID        uint64
	Kind      string
	Namespace string
	Object    string
	Sent      time.Time
	// write
	Result string
}

// wireRecord is a Record as a line holds it: only the fields of its event.
type wireRecord struct {
	Event         string     `json:"event"`
	Wall          time.Time  `json:"wall"`
	Mono          int64      `json:"mono"`
	Member        string     `json:"member"`
	Incarnation   string     `json:"incarnation"`
	Group         string     `json:"group"`
	Pid           int        `json:"pid"`
	Partitions    int        `json:"partitions,omitempty"`
	PartitionFn   string     `json:"partitionFunction,omitempty"`
	RenewDeadline string     `json:"renewDeadline,omitempty"`
	LeaseDuration string     `json:"leaseDuration,omitempty"`
	Fence         *time.Time `json:"fence,omitempty"`
	Partition     *int       `json:"partition,omitempty"`
	Cause         string     `json:"cause,omitempty"`
	ID            uint64     `json:"id,omitempty"`
	Kind          string     `json:"kind,omitempty"`
	Namespace     string     `json:"namespace,omitempty"`
	Object        string     `json:"object,omitempty"`
	Result        string     `json:"result,omitempty"`
	Sent          *time.Time `json:"sent,omitempty"`
}

// MarshalJSON writes the fields of r's event.
func (r Record) MarshalJSON() ([]byte, error) {
	w := wireRecord{Event: r.Event, Wall: r.Wall, Mono: int64(r.Mono), Member: r.Member, Incarnation: r.Incarnation,
		Group: r.Group, Pid: r.Pid, Cause: r.Cause, ID: r.ID, Kind: r.Kind, Namespace: r.Namespace, Object: r.Object, Result: r.Result}
	switch r.Event {
	case EventStart:
		w.Partitions, w.RenewDeadline, w.LeaseDuration = r.Partitions, r.RenewDeadline.String(), r.LeaseDuration.String()
		w.PartitionFn = r.PartitionFunction
	case EventRenew:
		w.Fence = &r.Fence
	case EventAcquire, EventRelease:
		w.Partition = &r.Partition
	case EventSend, EventWrite:
		w.Partition, w.Sent = &r.Partition, &r.Sent
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a line and checks that it has what its event needs.
func (r *Record) UnmarshalJSON(data []byte) error {
	var w wireRecord
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*r = Record{Event: w.Event, Wall: w.Wall, Mono: time.Duration(w.Mono), Member: w.Member, Incarnation: w.Incarnation,
		Group: w.Group, Pid: w.Pid, Partitions: w.Partitions, PartitionFunction: w.PartitionFn, Cause: w.Cause, ID: w.ID, Kind: w.Kind, Namespace: w.Namespace,
		Object: w.Object, Result: w.Result}
	if w.Fence != nil {
		r.Fence = *w.Fence
	}
	if w.Partition != nil {
		r.Partition = *w.Partition
	}
	if w.Sent != nil {
		r.Sent = *w.Sent
	}
	var err error
	if w.RenewDeadline != "" {
		if r.RenewDeadline, err = time.ParseDuration(w.RenewDeadline); err != nil {
			return fmt.Errorf("renewDeadline: %w", err)
		}
	}
	if w.LeaseDuration != "" {
		if r.LeaseDuration, err = time.ParseDuration(w.LeaseDuration); err != nil {
			return fmt.Errorf("leaseDuration: %w", err)
		}
	}
	return r.validate(w.Partition != nil)
}

// validate checks that r has the fields its event needs.
func (r *Record) validate(hasPartition bool) error {
	switch {
	case r.Wall.IsZero():
		return fmt.Errorf("event %q without wall time", r.Event)
	case r.Member == "" || r.Group == "":
		return fmt.Errorf("event %q without member or group", r.Event)
	}
	switch r.Event {
	case EventStart:
		if r.Partitions < 1 {
			return fmt.Errorf("start with partitions %d; want at least 1", r.Partitions)
		}
	case EventRenew:
		if r.Fence.IsZero() {
			return fmt.Errorf("renew without fence")
		}
	case EventAcquire, EventRelease:
		if !hasPartition || r.Partition < 0 {
			return fmt.Errorf("%s without a partition", r.Event)
		}
	case EventSend, EventWrite:
		if !hasPartition || r.Namespace == "" || r.Sent.IsZero() {
			return fmt.Errorf("%s without partition, namespace or sent time", r.Event)
		}
		if r.Event == EventSend && r.ID == 0 {
			return fmt.Errorf("send without id")
		}
	default:
		return fmt.Errorf("unknown event %q", r.Event)
	}
	return nil
}
