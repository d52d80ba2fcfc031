package rdmacm

import (
	"errors"
	"strconv"
)

// EventType is an rdma_cm event (enum rdma_cm_event_type).
type EventType int

// The events, numbered as librdmacm numbers them.
const (
	EventAddrResolved    EventType = 0
	EventAddrError       EventType = 1
	EventRouteResolved   EventType = 2
	EventRouteError      EventType = 3
	EventConnectRequest  EventType = 4
	EventConnectResponse EventType = 5
	EventConnectError    EventType = 6
	EventUnreachable     EventType = 7
	EventRejected        EventType = 8
	EventEstablished     EventType = 9
	EventDisconnected    EventType = 10
	EventDeviceRemoval   EventType = 11
	EventMulticastJoin   EventType = 12
	EventMulticastError  EventType = 13
	EventAddrChange      EventType = 14
	EventTimewaitExit    EventType = 15
	numEventTypes                  = 16
)

var eventNames = [numEventTypes]string{
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
}

// String returns the name rdma_event_str gives the event.
func (e EventType) String() string {
	if e >= 0 && e < numEventTypes {
		return eventNames[e]
	}
	return "UNKNOWN EVENT " + strconv.Itoa(int(e))
}

// ConnParam is what a connect, accept or connect request carries
// (struct rdma_conn_param).
type ConnParam struct {
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	RetryCount         uint8 // the REQ's retry count (rdma_cm sends 7 whatever is asked)
	RNRRetryCount      uint8
	QPNum              uint32 // in an event: the peer's QPN
}

// Event is one rdma_cm event (struct rdma_cm_event).
type Event struct {
	Event EventType
	// ID is the CM ID the event is about; for CONNECT_REQUEST the new
	// ID of the connection, ListenID the listener's.
	ID, ListenID *CMID
	// Status: for REJECTED the REJ's reason (8 for "invalid service ID",
	// no listener on the port; 28 for a consumer reject), for
	// UNREACHABLE -110 (-ETIMEDOUT), else 0.
	Status int
	Param  ConnParam
	// UD: a UD ID's ESTABLISHED carries the peer's QPN, Q_Key and
	// address (struct rdma_ud_param; sidr.go); MULTICAST_JOIN the
	// group's (mcast.go).
	UD UDParam
	// JoinContext is, for MULTICAST_JOIN and MULTICAST_ERROR, the
	// context JoinMulticast was given (rdma_ud_param.private_data).
	JoinContext any

	mc *mcJoin // the join a MULTICAST_JOIN is for
}

// ErrNoEvent is returned by GetEvent when no event is waiting (a
// non-blocking rdma_get_cm_event's EAGAIN): run the world until one is.
var ErrNoEvent = errors.New("rdmacm: no event waiting (EAGAIN)")

// EventChannel is an rdma_cm event channel (struct rdma_event_channel)
// of one host: the events of the IDs created on it, in order.
type EventChannel struct {
	cm     *agent
	events []*Event
}

// GetEvent takes the oldest event waiting (rdma_get_cm_event).
func (ch *EventChannel) GetEvent() (*Event, error) {
	if len(ch.events) == 0 {
		return nil, ErrNoEvent
	}
	e := ch.events[0]
	copy(ch.events, ch.events[1:])
	ch.events[len(ch.events)-1] = nil
	ch.events = ch.events[:len(ch.events)-1]
	if e.Event == EventMulticastJoin {
		e.processJoin()
	}
	return e, nil
}

// Pending returns the number of events waiting.
func (ch *EventChannel) Pending() int { return len(ch.events) }

// Ack releases an event (rdma_ack_cm_event); nothing to do here, it is
// there so code reads as librdmacm code does.
func (e *Event) Ack() {}

func (ch *EventChannel) post(e *Event) { ch.events = append(ch.events, e) }

// drop removes the events waiting on the channel that keep returns
// false for, keeping the others in order: the kernel's rdma_cm drops an
// ID's unreported events when the ID is destroyed (ucma's
// ucma_destroy_private_ctx), and a group's when it is left
// (ucma_cleanup_mc_events).
func (ch *EventChannel) drop(gone func(*Event) bool) {
	kept := ch.events[:0]
	for _, e := range ch.events {
		if !gone(e) {
			kept = append(kept, e)
		}
	}
	clear(ch.events[len(kept):])
	ch.events = kept
}
