package tooltest

import "testing"

// TestRpingExitRace: only rping's own exit race after every ping is
// taken for it: not a run that stopped short, failed otherwise, never
// saw the disconnection, or ended by another status.
func TestRpingExitRace(t *testing.T) {
	race := "ping data: rdma-ping-4: EFGH\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor\n"
	if !RpingExitRace(race, 255) {
		t.Errorf("not taken for the race: %q", race)
	}
	for _, c := range []struct {
		out  string
		code int
	}{
		{"ping data: rdma-ping-2: CDEF\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Bad file descriptor\n", 255},
		{"ping data: rdma-ping-4: EFGH\nrdma_get_cm_event: Bad file descriptor\n", 255},
		{"ping data: rdma-ping-4: EFGH\nclient DISCONNECT EVENT...\nrdma_get_cm_event: Invalid argument\n", 255},
		{race, 1},
		{race, -1}, // killed by a signal
	} {
		if RpingExitRace(c.out, c.code) {
			t.Errorf("taken for the race (exit %d): %q", c.code, c.out)
		}
	}
}
