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

// Trace is the structured log of a simulation. A nil *Trace records
// nothing, so emitters can call Add unconditionally and pay nothing when
// tracing is off (check Enabled before building fields).
type Trace struct {
	events []Event
	// Hook, if set, sees each event as it is added (a live ladder view).
	Hook func(*Event)
}

// Enabled reports whether t records events.
func (t *Trace) Enabled() bool { return t != nil }

// Add records e.
func (t *Trace) Add(e Event) {
	if t == nil {
		return
	}
	t.events = append(t.events, e)
	if t.Hook != nil {
		t.Hook(&t.events[len(t.events)-1])
	}
}

// Events returns the recorded events in order. The slice is the trace's
// own; do not modify it.
func (t *Trace) Events() []Event {
	if t == nil {
		return nil
	}
	return t.events
}

// WriteText writes one line per event, in the text form of AppendText.
func (t *Trace) WriteText(w io.Writer) error {
	var b []byte
	for i := range t.Events() {
		b = t.events[i].AppendText(b[:0])
		b = append(b, '\n')
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
