package access

import (
	"fmt"
	"unicode/utf8"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// NoteLimit is the longest note, in bytes, the API server accepts in an events.k8s.io/v1 Event.
const NoteLimit = 1024

// Recorder returns an events.k8s.io recorder that passes Events on to next only while may reports
// that the replica may write them, and drops them otherwise: under an RBAC that grants no Events (the
// one Gardener gives the original, which records none), every Event would otherwise end in a
// "forbidden" log line of the event broadcaster. Since every Event of dwd goes through it, it also
// cuts notes to NoteLimit, which the API server would refuse whole.
func Recorder(next recorder.EventRecorder, may func() bool) recorder.EventRecorder {
	return gated{next: next, may: may}
}

// MayRecord returns the may func of Recorder for c: Events are written unless c found that the
// replica may not create events.k8s.io Events. Before the first answer they are written, and a
// refusal then is logged by the broadcaster once or twice at most.
func (c *Checker) MayRecord() func() bool {
	create := Permission{}
	for _, p := range c.Permissions {
		if p.Group == eventsv1.GroupName && p.Resource == "events" && p.Verb == "create" {
			create = p
		}
	}
	return func() bool {
		allowed, known := c.Allowed(create)
		return allowed || !known
	}
}

type gated struct {
	next recorder.EventRecorder
	may  func() bool
}

func (g gated) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if g.may() {
		g.next.Eventf(regarding, related, eventtype, reason, action, "%s", cut(fmt.Sprintf(note, args...)))
	}
}

func (g gated) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	if g.may() {
		g.next.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, "%s", cut(fmt.Sprintf(note, args...)))
	}
}

// cut shortens note to at most NoteLimit bytes, on a rune boundary, ending it with "…" when it was cut.
func cut(note string) string {
	if len(note) <= NoteLimit {
		return note
	}
	const ellipsis = "…"
	end := NoteLimit - len(ellipsis)
	for end > 0 && !utf8.RuneStart(note[end]) {
		end--
	}
	return note[:end] + ellipsis
}
