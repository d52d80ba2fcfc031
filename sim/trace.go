package sim

import (
	"io"
	"strconv"
	"strings"
)

// Kind names what a trace event records. The packages that emit events
// define their kinds (fabric: frame-tx, frame-drop, ...; later the NIC:
// qp-state, completion, ...); a kind is a short kebab-case word that never
// changes once golden files depend on it.
type Kind string

// DropCause is why the fabric lost a frame: the drop= field of its
// frame-drop or queue-drop event, for a reader that must tell the causes
// apart (the ladder); the why= field says the same for people, with the
// numbers, and is never parsed.
type DropCause string

// The causes of a frame-drop or queue-drop event.
const (
	DropFault     DropCause = "fault"      // a drop rule of the fault plan
	DropQueueFull DropCause = "queue-full" // the egress queue had no room
	DropMTU       DropCause = "mtu"        // the IP packet exceeds the link's MTU
	DropNoRoute   DropCause = "no-route"   // the switch has no port for the destination MAC
	DropLinkDown  DropCause = "link-down"  // held back by the fault plan, then its link went down
	DropRunt      DropCause = "runt"       // too short for its Ethernet header: a switch cannot read where it goes
)

// Field returns the event field that records c.
func (c DropCause) Field() Field { return Field{Key: "drop", Value: string(c)} }

// Field is one key=value of a trace event, kept in the order added.
type Field struct {
	Key, Value string
}

// Event is one entry of the trace: what happened, when, where.
type Event struct {
	Time   Time
	Node   string // the node it happened at ("" for the fabric itself)
	QPN    uint32 // the queue pair it concerns, when HasQPN
	HasQPN bool
	Kind   Kind
	Fields []Field
}

// Get returns the value of the first field named key.
func (e *Event) Get(key string) (string, bool) {
	for _, f := range e.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// AppendText appends the event's stable one-line text form:
//
//	12.288µs a frame-tx qp=0x000011 opcode=RC_SEND_ONLY psn=2
//
// Values holding spaces are quoted (strconv.Quote).
func (e *Event) AppendText(b []byte) []byte {
	b = append(b, e.Time.String()...)
	b = append(b, ' ')
	if e.Node != "" {
		b = append(b, e.Node...)
	} else {
		b = append(b, '-')
	}
	b = append(b, ' ')
	b = append(b, e.Kind...)
	if e.HasQPN {
		b = append(b, " qp=0x"...)
		b = appendHex24(b, e.QPN)
	}
	for _, f := range e.Fields {
		b = append(b, ' ')
		b = append(b, f.Key...)
		b = append(b, '=')
		if f.Value == "" || strings.ContainsAny(f.Value, " \t\n\"=") {
			b = strconv.AppendQuote(b, f.Value)
		} else {
			b = append(b, f.Value...)
		}
	}
	return b
}

// String returns the text form.
func (e *Event) String() string { return string(e.AppendText(nil)) }

func appendHex24(b []byte, v uint32) []byte {
	const digits = "0123456789abcdef"
	for shift := 20; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xF])
	}
	return b
}

// DefaultTraceLimit is how many events a Trace keeps when its Limit is
// 0. An event with its fields takes a few hundred bytes, so a full trace
// holds some tens of megabytes: a run of any length, a runaway included,
// keeps its memory bounded (Hook still sees every event, to stream the
// whole log to a file).
const DefaultTraceLimit = 1 << 17

// Trace is the structured log of a simulation. A nil *Trace records
// nothing, so emitters can call Add unconditionally and pay nothing when
// tracing is off (check Enabled before building fields).
//
// A Trace keeps the first Limit events it is given and drops the rest
// (Full says so): the start of a run is what a ladder draws and a reader
// follows, and a run that never settles must not grow without bound.
type Trace struct {
	events []Event
	// Hook, if set, sees each event as it is added (a live ladder view,
	// or a stream to a file), kept or not.
	Hook func(*Event)
	// Limit is how many events the trace keeps: 0 means
	// DefaultTraceLimit, a negative value no limit (the caller bounds the
	// run).
	Limit int
	// Off, if set, makes the trace take nothing and report itself
	// disabled, Hook or not: a trace whose reader wants no more events
	// (a verbs.Cluster's part, once the program's trace is full).
	Off bool
}

// Enabled reports whether t records events: false for a nil trace, and
// for a full one without a Hook (it would only count them), so that
// emitters stop building events nobody keeps.
func (t *Trace) Enabled() bool {
	return t != nil && !t.Off && (t.Hook != nil || !t.Full())
}

func (t *Trace) limit() int {
	if t.Limit == 0 {
		return DefaultTraceLimit
	}
	return t.Limit
}

// Add records e, unless the trace is Full; the Hook sees it either way.
func (t *Trace) Add(e Event) {
	if t == nil || t.Off {
		return
	}
	if t.Full() {
		if t.Hook != nil {
			t.Hook(&e)
		}
		return
	}
	t.events = append(t.events, e)
	if t.Hook != nil {
		t.Hook(&t.events[len(t.events)-1])
	}
}

// Full reports whether the trace holds Limit events and records no more.
func (t *Trace) Full() bool {
	return t != nil && t.Limit >= 0 && len(t.events) >= t.limit()
}

// Events returns the recorded events in order: the first Limit, when
// Full. The slice is the trace's own; do not
// modify it.
func (t *Trace) Events() []Event {
	if t == nil {
		return nil
	}
	return t.events
}

// Clear forgets the events kept so far, keeping their storage: for a
// trace that is emptied as it is read (each part of a verbs.Cluster
// records into one, which the cluster hands on between steps).
func (t *Trace) Clear() {
	if t != nil {
		clear(t.events)
		t.events = t.events[:0]
	}
}

// WriteText writes one line per event kept, in the text form of
// AppendText, and, if the trace is Full, a last line starting with '#'
// that says so.
func (t *Trace) WriteText(w io.Writer) error {
	var b []byte
	for i := range t.Events() {
		b = t.events[i].AppendText(b[:0])
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if t.Full() {
		b = append(b[:0], "# the trace is full: it keeps its first "...)
		b = strconv.AppendInt(b, int64(len(t.events)), 10)
		b = append(b, " events and recorded no later ones\n"...)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// Text returns the whole trace in text form.
func (t *Trace) Text() string {
	var sb strings.Builder
	_ = t.WriteText(&sb)
	return sb.String()
}
