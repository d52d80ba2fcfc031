package tooltest

import "testing"

// TestRpingExitRace: only rping's own exit race after every ping is
// taken for it: not a run that stopped short, failed otherwise, or
// never saw the disconnection.
func TestRpingExitRace(t *testing.T) {
	race := "ping data: rdma-ping-4: EFGH\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor\nrocesim exec: rping exited with status 255"
	if !RpingExitRace(race) {
		t.Errorf("not taken for the race: %q", race)
	}
	for _, out := range []string{
		"ping data: rdma-ping-2: CDEF\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor\nrocesim exec: rping exited with status 255",
		"ping data: rdma-ping-4: EFGH\nrdma_get_cm_event: Bad file descriptor\nrocesim exec: rping exited with status 255",
		"ping data: rdma-ping-4: EFGH\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Invalid argument\nrocesim exec: rping exited with status 255",
		"ping data: rdma-ping-4: EFGH\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor\nrocesim exec: rping was killed by signal 11",
	} {
		if RpingExitRace(out) {
			t.Errorf("taken for the race: %q", out)
		}
	}
}
