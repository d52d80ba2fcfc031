package conformance

// Driving a guest interactively: the serial console is the control channel.
// QEMU's -serial stdio carries the host's writes to the guest's ttyS0 and
// the guest's output back, so no second NIC, port forward or guest network
// service is needed. The interactive agent turns the terminal's echo off,
// prints {"event":"hello"}, and ends every command with an "ok" or "error"
// event carrying the command's sequence number; Agent.Do waits for that.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// AgentLoop is the guest command of an interactive VM that runs the verbs
// agent on the console: each "quit" starts a fresh agent (new PD, CQs, QP,
// MRs), so one boot serves many scenarios.
const AgentLoop = "while :; do " + AgentPath + "; done"

// readyGID finds the RoCE v2 IPv4 GID index in the guest's READY line.
var readyGID = regexp.MustCompile(regexp.QuoteMeta(markerReady) + `.* gid=(\d+)`)

// maxConsoleLine bounds a command line typed on the guest console: the
// tty's canonical-mode buffer holds 4095 characters.
const maxConsoleLine = 4000

// Send types one line on the guest's serial console. The VM must have
// been booted with VMConfig.Interactive.
func (vm *VM) Send(line string) error {
	if vm.stdin == nil {
		return fmt.Errorf("conformance: VM %s: not interactive", vm.cfg.Name)
	}
	if strings.ContainsAny(line, "\n\r") || len(line) > maxConsoleLine {
		return fmt.Errorf("conformance: VM %s: console line must be one line of at most %d bytes (%d)", vm.cfg.Name, maxConsoleLine, len(line))
	}
	_, err := vm.stdin.Write([]byte(line + "\n"))
	return err
}

// Stop powers the guest off at once (QEMU is killed) and waits for it.
// Use it for interactive guests, whose Cmd never ends by itself.
func (vm *VM) Stop() Result {
	vm.cancel()
	res, _ := vm.Wait()
	return res
}

// Console returns the console output so far.
func (vm *VM) Console() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.out.String()
}

// waitLine returns the first console line at index >= from for which
// match holds, and its index. It fails when ctx ends or the VM stops.
func (vm *VM) waitLine(ctx context.Context, from int, match func(string) bool) (string, int, error) {
	l, i, err := waitLineIn(ctx, &vm.mu, &vm.lines, &vm.changed, vm.done, from, match)
	if err != nil {
		return "", i, fmt.Errorf("conformance: VM %s: %w", vm.cfg.Name, err)
	}
	return l, i, nil
}

// errStopped is waitLineIn's error when the console's producer stopped.
var errStopped = errors.New("stopped")

// waitLineIn is waitLine over lines guarded by mu, which a reader grows,
// closing and replacing *changed at each line, and closing done at the
// end: it returns the first line at index >= from for which match holds,
// or fails when ctx ends or done is closed with no such line.
func waitLineIn(ctx context.Context, mu *sync.Mutex, lines *[]string, changed *chan struct{}, done <-chan struct{},
	from int, match func(string) bool) (string, int, error) {
	for stopped := false; ; {
		mu.Lock()
		for i := from; i < len(*lines); i++ {
			if match((*lines)[i]) {
				l := (*lines)[i]
				mu.Unlock()
				return l, i, nil
			}
		}
		from = len(*lines)
		ch := *changed
		mu.Unlock()
		if stopped {
			return "", from, errStopped
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", from, ctx.Err()
		case <-done:
			stopped = true // look once more: the last lines came with the end
		}
	}
}

// console is the line I/O an Agent drives the interactive agent over: a
// guest's serial console (VM), or the stdin and stdout pipes of an agent
// process on the host (localAgent, localagent.go).
type console interface {
	// Send writes one command line.
	Send(line string) error
	// waitLine returns the first output line at index >= from for which
	// match holds, and its index; it fails when ctx ends or the agent's
	// side stops.
	waitLine(ctx context.Context, from int, match func(string) bool) (string, int, error)
	// consoleName names the console in errors ("VM a", "agent a").
	consoleName() string
}

func (vm *VM) consoleName() string { return "VM " + vm.cfg.Name }

// Agent drives the interactive verbs agent over a console: in a guest
// booted with Interactive and Cmd AgentLoop (StartAgent), or in a local
// process on the drop-in library (localagent.go). It is not safe for
// concurrent use; use one Agent per console.
type Agent struct {
	con    console
	seq    int // commands sent to the current agent process
	cursor int // console lines already consumed
}

// ErrAgent is wrapped by the error Do returns when the agent reported a
// failed command (as opposed to a harness failure).
var ErrAgent = errors.New("agent command failed")

// StartAgent waits for the agent's hello on the VM's console.
func StartAgent(ctx context.Context, vm *VM) (*Agent, error) { return startAgent(ctx, vm) }

func startAgent(ctx context.Context, con console) (*Agent, error) {
	a := &Agent{con: con}
	if err := a.hello(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) hello(ctx context.Context) error {
	_, i, err := a.con.waitLine(ctx, a.cursor, func(l string) bool {
		return strings.Contains(l, `{"event":"hello"}`)
	})
	if err != nil {
		return fmt.Errorf("waiting for the agent: %w", err)
	}
	a.cursor, a.seq = i+1, 0
	return nil
}

// Do runs one agent command and returns the events it printed, the
// closing "ok" left out. A command the agent refused returns its events
// and an error wrapping ErrAgent with the agent's message.
func (a *Agent) Do(ctx context.Context, command string) ([]AgentEvent, error) {
	if err := a.con.Send(command); err != nil {
		return nil, err
	}
	a.seq++
	var evs []AgentEvent
	for {
		line, i, err := a.con.waitLine(ctx, a.cursor, func(l string) bool { return strings.Contains(l, agentPrefix) })
		if err != nil {
			return evs, fmt.Errorf("%q: %w", command, err)
		}
		a.cursor = i + 1
		var ev AgentEvent
		if err := json.Unmarshal([]byte(line[strings.Index(line, agentPrefix):]), &ev); err != nil {
			return evs, fmt.Errorf("conformance: %s: %q: agent line %q: %v", a.con.consoleName(), command, line, err)
		}
		switch {
		case ev.Event == "ok" && ev.Line == a.seq:
			return evs, nil
		case ev.Event == "error" && ev.Line == a.seq:
			return append(evs, ev), fmt.Errorf("conformance: %s: %q: %w: %s", a.con.consoleName(), command, ErrAgent, ev.Error)
		case ev.Event == "hello":
			return evs, fmt.Errorf("conformance: %s: %q: the agent restarted (crashed?)", a.con.consoleName(), command)
		}
		evs = append(evs, ev)
	}
}

// Script runs commands in order and returns all their events; it stops at
// the first failure.
func (a *Agent) Script(ctx context.Context, commands ...string) ([]AgentEvent, error) {
	var all []AgentEvent
	for _, c := range commands {
		evs, err := a.Do(ctx, c)
		all = append(all, evs...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// Restart ends the agent process and waits for the next one: a clean
// slate (no PD, CQ, QP or MR) on the same guest.
func (a *Agent) Restart(ctx context.Context) error {
	if err := a.con.Send("quit"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return a.hello(ctx)
}

// lastEvent returns the last event called name, or nil.
func lastEvent(evs []AgentEvent, name string) *AgentEvent {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Event == name {
			return &evs[i]
		}
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func isSeq(b []byte) bool {
	for i, c := range b {
		if c != byte(i) {
			return false
		}
	}
	return len(b) > 0 && !isZero(b)
}
