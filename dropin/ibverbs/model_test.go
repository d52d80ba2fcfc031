package main

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
)

// TestReadConfig: each ROCESIM_* variable is read, and a value the model
// cannot follow is refused with a message naming the variable.
func TestReadConfig(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string // "devices seed profile rules pcap max-events idle-wake ladder prefix", or the error's start
	}{
		{nil, `1 1 rxe 0 "" 0 50ms "" rocesim`},
		// A script written for rxe names rxe0; the plan's names follow.
		{map[string]string{"ROCESIM_DEVICE_PREFIX": "rxe", "ROCESIM_DEVICES": "2", "ROCESIM_FAULTS": "drop link=rxe1-sw src=rxe0"}, `2 1 rxe 1 "" 0 50ms "" rxe`},
		{map[string]string{"ROCESIM_DEVICE_PREFIX": "mlx5_"}, `1 1 rxe 0 "" 0 50ms "" mlx5_`},
		{map[string]string{"ROCESIM_DEVICE_PREFIX": "rxe", "ROCESIM_FAULTS": "drop link=rocesim0-sw"}, "ROCESIM_FAULTS: rule 1: link=rocesim0-sw: no such link (links: rxe0-sw)"},
		{map[string]string{"ROCESIM_DEVICE_PREFIX": "0rxe"}, `ROCESIM_DEVICE_PREFIX="0rxe": want 1 to 32 letters`},
		{map[string]string{"ROCESIM_DEVICE_PREFIX": "rxe 0"}, `ROCESIM_DEVICE_PREFIX="rxe 0"`},
		{map[string]string{"ROCESIM_DEVICE_PREFIX": "r/x"}, `ROCESIM_DEVICE_PREFIX="r/x"`},
		{map[string]string{"ROCESIM_DEVICE_PREFIX": strings.Repeat("r", 33)}, `ROCESIM_DEVICE_PREFIX="rrr`},
		{map[string]string{"ROCESIM_DEVICES": "4", "ROCESIM_SEED": "0x10", "ROCESIM_PROFILE": "spec",
			"ROCESIM_FAULTS": "drop psn=3 tx=1", "ROCESIM_PCAP": "x.pcapng", "ROCESIM_MAX_EVENTS": "99",
			"ROCESIM_IDLE_WAKE": "off", "ROCESIM_LADDER": "l.svg"}, `4 16 spec 1 "x.pcapng" 99 0s "l.svg"`},
		{map[string]string{"ROCESIM_IDLE_WAKE": "5ms"}, `1 1 rxe 0 "" 0 5ms ""`},
		{map[string]string{"ROCESIM_IDLE_WAKE": "soon"}, `ROCESIM_IDLE_WAKE="soon"`},
		{map[string]string{"ROCESIM_DEVICES": "0"}, `ROCESIM_DEVICES="0"`},
		{map[string]string{"ROCESIM_DEVICES": "17"}, `ROCESIM_DEVICES="17"`},
		{map[string]string{"ROCESIM_SEED": "-1"}, `ROCESIM_SEED="-1"`},
		{map[string]string{"ROCESIM_PROFILE": "mlx5"}, `ROCESIM_PROFILE="mlx5"`},
		{map[string]string{"ROCESIM_FAULTS": "drop psn="}, "ROCESIM_FAULTS: 1:"},
		{map[string]string{"ROCESIM_FAULTS": "drop psn=3 tx=1; dup psn=4\ndelay 1us"}, `1 1 rxe 3 "" 0 50ms ""`},
		{map[string]string{"ROCESIM_FAULTS": "drop psn=3; drop pns=4"}, "ROCESIM_FAULTS: 2:"},
		// Names the world will have pass; others would never match.
		{map[string]string{"ROCESIM_DEVICES": "2", "ROCESIM_FAULTS": "drop link=rocesim1-sw src=rocesim0 dir=sw->rocesim1"}, `2 1 rxe 1 "" 0 50ms ""`},
		{map[string]string{"ROCESIM_FAULTS": "drop link=a-sw"}, "ROCESIM_FAULTS: rule 1: link=a-sw: no such link (links: rocesim0-sw)"},
		{map[string]string{"ROCESIM_FAULTS": "drop psn=2; drop src=rocesim1"}, `ROCESIM_FAULTS: rule 2: src=: no node "rocesim1" (nodes: rocesim0, sw)`},
		{map[string]string{"ROCESIM_MAX_EVENTS": "0"}, `ROCESIM_MAX_EVENTS="0"`},
		{map[string]string{"ROCESIM_FABRIC": "f"}, `ROCESIM_FABRIC="f": ROCESIM_NODE must name the node`},
		{map[string]string{"ROCESIM_FABRIC": "f", "ROCESIM_NODE": "n"}, `1 1 rxe 0 "" 0 1ms ""`},
		{map[string]string{"ROCESIM_FABRIC": "f", "ROCESIM_NODE": "n", "ROCESIM_PCAP": "x.pcapng"}, "ROCESIM_PCAP: not available with ROCESIM_FABRIC"},
		{map[string]string{"ROCESIM_FABRIC": "f", "ROCESIM_NODE": "n", "ROCESIM_FAULTS": "drop psn=3"}, "ROCESIM_FAULTS: not available with ROCESIM_FABRIC"},
		{map[string]string{"ROCESIM_TRANSPORT": "udp", "ROCESIM_ADDR": "127.0.0.5"}, `1 1 rxe 0 "" 0 1ms ""`},
		{map[string]string{"ROCESIM_TRANSPORT": "udp", "ROCESIM_ADDR": "127.0.0.5", "ROCESIM_PCAP": "x.pcapng"}, "ROCESIM_PCAP: not available with ROCESIM_TRANSPORT=udp"},
		{map[string]string{"ROCESIM_TRANSPORT": "udp", "ROCESIM_ADDR": "127.0.0.5", "ROCESIM_FAULTS": "drop psn=3"}, "ROCESIM_FAULTS: not available with ROCESIM_TRANSPORT=udp"},
		{map[string]string{"ROCESIM_TRANSPORT": "udp", "ROCESIM_ADDR": "127.0.0.5", "ROCESIM_LADDER": "l.svg"}, "ROCESIM_LADDER: not available with ROCESIM_TRANSPORT=udp"},
		{map[string]string{"ROCESIM_TRANSPORT": "udp", "ROCESIM_ADDR": "127.0.0.5", "ROCESIM_WILL_FD": "pipe"}, `ROCESIM_WILL_FD="pipe": want the number of an open file descriptor above 2`},
		{map[string]string{"ROCESIM_TRANSPORT": "udp", "ROCESIM_ADDR": "127.0.0.5", "ROCESIM_WILL_FD": "1"}, `ROCESIM_WILL_FD="1": want the number`},
	} {
		cfg, err := readConfig(func(k string) string { return c.env[k] })
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			rules := 0
			if cfg.Plan != nil {
				rules = len(cfg.Plan.Rules)
			}
			got = fmt.Sprintf("%d %d %v %d %q %d %v %q %s", cfg.Devices, cfg.Seed, cfg.Profile, rules, cfg.Pcap, cfg.MaxEvents, cfg.IdleWake, cfg.Ladder, cfg.DevicePrefix)
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%v: %q, want %q", c.env, got, c.want)
		}
	}
}

// TestTopologyNames: the names ROCESIM_FAULTS is checked against are
// those of the world newProcess builds.
func TestTopologyNames(t *testing.T) {
	for _, prefix := range []string{"", "rocesim", "rxe"} {
		p, err := newProcess(Config{Devices: 3, Seed: 1, DevicePrefix: prefix}, &fakeFDs{ready: map[int]bool{}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		links, nodes := p.w.Fabric().Names()
		wantLinks, wantNodes := topologyNames(cmp.Or(prefix, DefaultDevicePrefix), 3)
		if fmt.Sprint(links) != fmt.Sprint(wantLinks) || fmt.Sprint(nodes) != fmt.Sprint(wantNodes) {
			t.Errorf("prefix %q: world: links %v, nodes %v; topologyNames: %v, %v", prefix, links, nodes, wantLinks, wantNodes)
		}
		if got := fmt.Sprint(nodes); !strings.HasPrefix(got, "["+cmp.Or(prefix, DefaultDevicePrefix)+"0 ") {
			t.Errorf("prefix %q: nodes %s", prefix, got)
		}
	}
}

// TestReadPollWait: ROCESIM_POLL_WAIT=off makes a poll that finds
// nothing return at once; anything but on or off is refused.
func TestReadPollWait(t *testing.T) {
	for v, want := range map[string]string{"": "false", "on": "false", "off": "true", "no": `ROCESIM_POLL_WAIT="no"`} {
		cfg, err := readConfig(func(k string) string {
			if k == "ROCESIM_POLL_WAIT" {
				return v
			}
			return ""
		})
		got := fmt.Sprint(cfg.PollNoWait)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("ROCESIM_POLL_WAIT=%q: %s, want %s", v, got, want)
		}
	}
}

// fakeFDs stands in for eventfds: it records each descriptor's state.
type fakeFDs struct {
	next  int
	ready map[int]bool
}

func (f *fakeFDs) open() (int, error)        { f.next++; return f.next, nil }
func (f *fakeFDs) set(fd int, readable bool) { f.ready[fd] = readable }
func (f *fakeFDs) close(fd int)              { delete(f.ready, fd) }

// TestWorldAddr: the program's addresses become the world's by key; an
// unknown key takes the address to the MR that holds it, so the VA on
// the wire does not depend on the program's heap.
func TestWorldAddr(t *testing.T) {
	p, err := newProcess(Config{Devices: 1, Seed: 1}, &fakeFDs{ready: map[int]bool{}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, _, e := p.open(0)
	if e != 0 {
		t.Fatal(e)
	}
	pdh, _ := p.allocPD(ctx)
	buf := make([]byte, 4096)
	const va = 0x7f00_1234_5000 // where the program has it
	_, m, e := p.regMR(pdh, buf, va, 1)
	if e != 0 {
		t.Fatal(e)
	}
	d, sim := p.devs[0], m.mr.Addr
	for _, c := range []struct {
		key  uint32
		addr uint64
		want uint64
	}{
		{m.mr.LKey, va, sim},
		{m.mr.LKey, va + 100, sim + 100},
		{m.mr.LKey, va + 5000, sim + 5000}, // past the end: the device refuses it
		{m.mr.LKey + 1, va + 8, sim + 8},   // unknown key, address in the MR
		{m.mr.LKey + 1, 0x1000, 0x1000},    // unknown key, address in no MR
	} {
		if got := worldAddr(d, c.key, c.addr); got != c.want {
			t.Errorf("worldAddr(%#x, %#x) = %#x, want %#x", c.key, c.addr, got, c.want)
		}
	}
	if got := worldAddr(nil, m.mr.LKey, va); got != va {
		t.Errorf("no device: %#x, want the address as it is", got)
	}
}

// TestLargestWorldDoesNotStream: the drop-in's largest world (MaxDevices
// devices) stays under the size from which a verbs.World writes the
// payloads it receives with non-temporal stores (fabric.Fabric.Large,
// nic.Device.SetStreamingWrites). Those stores are unfenced, and ordered
// for another thread only through a Go synchronization; a C program may
// read the memory with none, polling a buffer's last byte for a WRITE's
// arrival as ib_write_lat does, and could then see that byte before the
// ones before it. Raising MaxDevices that far needs a fence after each
// placed payload first, or streaming kept off here.
func TestLargestWorldDoesNotStream(t *testing.T) {
	p, err := newProcess(Config{Devices: MaxDevices, Seed: 1}, &fakeFDs{ready: map[int]bool{}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.w.Fabric().Large() {
		t.Fatalf("a world of %d devices is large (streams its writes past the caches): see the comment", MaxDevices)
	}
}
