package conformance

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestInteractiveAgent boots one guest with the agent on its console and
// drives it command by command: a refused command is reported and the
// agent goes on; quit gives a fresh agent on the same boot.
func TestInteractiveAgent(t *testing.T) {
	vm, a, ctx := soloAgent(t, "solo")
	evs, err := a.Script(ctx, "open", "pd", "cq name=c1 depth=4", "mr name=m len=64 fill=seq", "poke mr=m off=2 hex=a0b1", "dump mr=m off=0 len=5")
	if err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	last := evs[len(evs)-1]
	if last.Event != "dump" || last.Hex != "0001a0b104" {
		t.Errorf("dump = %+v, want hex 0001a0b104", last)
	}
	// rxe rounds a CQ of 4 up to 2^k-1 entries; the model says 7.
	for _, ev := range evs {
		if ev.Event == "cq" && ev.CQE != 7 {
			t.Errorf("cq of 4 has %d entries, want 7", ev.CQE)
		}
	}
	if _, err := a.Do(ctx, "dump mr=nope off=0 len=1"); !errors.Is(err, ErrAgent) {
		t.Errorf("dump of an unknown mr: err %v, want ErrAgent", err)
	}
	if _, err := a.Do(ctx, "crc mr=m off=0 len=64"); err != nil {
		t.Errorf("the agent did not go on after a failure: %v", err)
	}
	if err := a.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, "dump off=0 len=1"); !errors.Is(err, ErrAgent) {
		t.Errorf("a restarted agent still has an mr: %v", err)
	}
}

// soloAgent boots one guest with the interactive agent on its console
// (stopped when the test ends) and returns it, its agent and a context
// of two minutes for the commands.
func soloAgent(t *testing.T, name string) (*VM, *Agent, context.Context) {
	t.Helper()
	return soloAgentAfter(t, name, "", nil)
}

// soloAgentAfter is soloAgent with a shell command run in the guest
// before the agent starts (its output is on the console before the
// agent's hello) and files put in the guest for it (VMConfig.Files).
func soloAgentAfter(t *testing.T, name, before string, files map[string][]byte) (*VM, *Agent, context.Context) {
	t.Helper()
	needHarness(t)
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := Boot(t.Context(), VMConfig{Name: name, IP: "10.0.0.1", LocalPort: ports[0], RemotePort: ports[1],
		Cmd: before + AgentLoop, Interactive: true, LogPath: filepath.Join(t.TempDir(), name+".log"), Files: files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	a, err := StartAgent(ctx, vm)
	if err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	return vm, a, ctx
}
