package access

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Recorder returns an EventRecorder that passes Events on to next only while may reports that the
// replica may write them, and drops them otherwise: under an RBAC that grants no Events (the one
// Gardener gives the original, which records none), every Event would otherwise end in a "forbidden"
// log line of the event broadcaster.
func Recorder(next record.EventRecorder, may func() bool) record.EventRecorder {
	return gated{next: next, may: may}
}

// MayRecord returns the may func of Recorder for c: Events are written unless c found that the
// replica may not create them. Before the first answer they are written, and a refusal then is
// logged by the broadcaster once or twice at most.
func (c *Checker) MayRecord() func() bool {
	create := Permission{}
	for _, p := range c.Permissions {
		if p.Resource == "events" && p.Verb == "create" {
			create = p
		}
	}
	return func() bool {
		allowed, known := c.Allowed(create)
		return allowed || !known
	}
}

type gated struct {
	next record.EventRecorder
	may  func() bool
}

func (g gated) Event(object runtime.Object, eventtype, reason, message string) {
	if g.may() {
		g.next.Event(object, eventtype, reason, message)
	}
}

func (g gated) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	if g.may() {
		g.next.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

func (g gated) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	if g.may() {
		g.next.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
