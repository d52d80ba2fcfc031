package nic

// Per-port hardware counters named and ordered as rxe's
// (drivers/infiniband/sw/rxe/rxe_hw_counters.c, as in Debian 12's 6.1
// kernel, the conformance target), so that a run of rocesim and a run of
// real rxe can be compared counter by counter. On a real system they are
// /sys/class/infiniband/rxe0/ports/1/hw_counters/<name> and
// `rdma statistic show`.

// Counter names one per-port counter. The values are rxe's enum
// rxe_counters order.
type Counter uint8

// The counters, in rxe's order. Each comment says when rxe counts.
const (
	CounterSentPkts            Counter = iota // sent_pkts: every packet handed to the network (requests, responses, ACKs)
	CounterRcvdPkts                           // rcvd_pkts: every packet accepted after header and ICRC checks (a bad ICRC is dropped uncounted)
	CounterDuplicateRequest                   // duplicate_request: responder got a request with a PSN before the expected one
	CounterOutOfSeqRequest                    // out_of_seq_request: responder got a PSN after the expected one and sent a sequence-error NAK (once per gap)
	CounterRcvdRNRErr                         // rcvd_rnr_err: requester received an RNR NAK
	CounterSendRNRErr                         // send_rnr_err: responder sent an RNR NAK
	CounterRcvdSeqErr                         // rcvd_seq_err: requester received a PSN-sequence-error NAK
	CounterAckDeferred                        // ack_deferred: the completer deferred a response to run later
	CounterRetryExceededErr                   // retry_exceeded_err: retry_cnt exhausted (RETRY_EXC_ERR)
	CounterRetryRNRExceededErr                // retry_rnr_exceeded_err: rnr_retry exhausted (RNR_RETRY_EXC_ERR)
	CounterCompleterRetryErr                  // completer_retry_err: the requester went back to retransmit (timeout or sequence NAK)
	CounterSendErr                            // send_err: a packet could not be handed to the network
	CounterLinkDowned                         // link_downed: the port went down
	CounterRDMASends                          // rdma_sends: a SEND work request completed at the requester (signaled or not)
	CounterRDMARecvs                          // rdma_recvs: a receive completed successfully (RECV or RECV_RDMA_WITH_IMM)
	numCounters
)

// NumCounters is the number of counters.
const NumCounters = int(numCounters)

var counterNames = [numCounters]string{
	CounterSentPkts:            "sent_pkts",
	CounterRcvdPkts:            "rcvd_pkts",
	CounterDuplicateRequest:    "duplicate_request",
	CounterOutOfSeqRequest:     "out_of_seq_request",
	CounterRcvdRNRErr:          "rcvd_rnr_err",
	CounterSendRNRErr:          "send_rnr_err",
	CounterRcvdSeqErr:          "rcvd_seq_err",
	CounterAckDeferred:         "ack_deferred",
	CounterRetryExceededErr:    "retry_exceeded_err",
	CounterRetryRNRExceededErr: "retry_rnr_exceeded_err",
	CounterCompleterRetryErr:   "completer_retry_err",
	CounterSendErr:             "send_err",
	CounterLinkDowned:          "link_downed",
	CounterRDMASends:           "rdma_sends",
	CounterRDMARecvs:           "rdma_recvs",
}

// String returns rxe's name of the counter, e.g. "rcvd_seq_err".
func (c Counter) String() string {
	if c < numCounters {
		return counterNames[c]
	}
	return "Counter(" + itoa(int(c)) + ")"
}

// Counters are one port's counters, indexed by Counter.
type Counters [numCounters]uint64

// NamedCounter is one counter's name and value.
type NamedCounter struct {
	Name  string
	Value uint64
}

// Add adds n to counter k.
func (c *Counters) Add(k Counter, n uint64) { c[k] += n }

// Get returns the value of the counter rxe calls name, and whether there
// is one.
func (c *Counters) Get(name string) (uint64, bool) {
	for k, n := range counterNames {
		if n == name {
			return c[k], true
		}
	}
	return 0, false
}

// Names returns the counter names in rxe's order.
func (c *Counters) Names() []string {
	return append([]string(nil), counterNames[:]...)
}

// Snapshot returns every counter with its name, in rxe's order.
func (c *Counters) Snapshot() []NamedCounter {
	s := make([]NamedCounter, numCounters)
	for k := range s {
		s[k] = NamedCounter{Name: counterNames[k], Value: c[k]}
	}
	return s
}
