package conformance

import (
	"net/netip"

	"github.com/rocesim/rocesim/rswitch"
)

// The rig's fault switch is rocesim switch's (package rswitch): the same
// code an engineer runs between two real endpoints, here between the two
// rxe guests' datagram links on 127.0.0.1.

// Switch is the fault switch between the two guests.
type Switch = rswitch.Switch

// loopback is where the guests' QEMUs and the switch exchange frames.
var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// NewSwitch starts a switch between two VMs whose local ports are
// peers[0] (VM a) and peers[1] (VM b), with cfg's plan, seed and capture
// (cfg.A and cfg.B are set here). Each VM's remote port is
// switchPort(sw, i).
func NewSwitch(peers [2]int, cfg rswitch.Config) (*Switch, error) {
	a, b, err := rswitch.VMLinks(loopback, [2]int{}, peers)
	if err != nil {
		return nil, err
	}
	cfg.A, cfg.B = a, b
	return rswitch.New(cfg)
}

// switchPort is the port VM i (0: a, 1: b) sends its frames to.
func switchPort(sw *Switch, i int) int { return int(sw.LocalAddr(i).Port()) }
