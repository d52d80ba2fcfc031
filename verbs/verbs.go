package verbs

import (
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
)

// Device is an RDMA device as ibv_get_device_list lists it.
type Device struct {
	h *Host
}

// GetDeviceList returns the host's RDMA devices (one: rxe0).
func (h *Host) GetDeviceList() []*Device { return []*Device{h.Dev} }

// Name returns the device name ("rxe0").
func (d *Device) Name() string { return d.h.dev.Name() }

// Open opens the device (ibv_open_device). Each call opens a new
// context: objects of one context cannot be used through another.
func (d *Device) Open() (*Context, error) {
	if d == nil || d.h == nil {
		return nil, errno(syscall.ENODEV, "open_device: no device")
	}
	return &Context{h: d.h}, nil
}

// Context is an open device (ibv_context).
type Context struct {
	h      *Host
	closed bool
	owned  owned // what was opened through it and not destroyed
}

func (c *Context) dev() *nic.Device { return c.h.dev }

func (c *Context) now() sim.Time { return c.h.w.sched.Now() }

// QueryDevice returns the device attributes (the zero value on a nil
// context).
func (c *Context) QueryDevice() DeviceAttr {
	if c == nil {
		return DeviceAttr{}
	}
	return c.dev().QueryDevice()
}

// QueryPort returns the attributes of port (1).
func (c *Context) QueryPort(port int) (PortAttr, error) {
	if err := c.usable("query_port"); err != nil {
		return PortAttr{}, err
	}
	return c.dev().QueryPort(port)
}

// QueryGID returns a GID of port 1: index 0 the IPv6 address, index 1 the
// IPv4 address mapped into IPv6 (rxe's RoCE v2 GIDs).
func (c *Context) QueryGID(port, index int) (netip.Addr, error) {
	if err := c.usable("query_gid"); err != nil {
		return netip.Addr{}, err
	}
	return c.dev().QueryGID(port, index)
}

// QueryPKey returns the P_Key at index (0 is the default 0xFFFF).
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	if err := c.usable("query_pkey"); err != nil {
		return 0, err
	}
	return c.dev().QueryPKey(port, index)
}

// GetAsyncEvent returns the next asynchronous event, if any (a simulation
// never blocks: false means none is pending).
func (c *Context) GetAsyncEvent() (AsyncEvent, bool) {
	if c.usable("get_async_event") != nil {
		return AsyncEvent{}, false
	}
	return c.h.events.pop()
}

// NumCompVectors returns how many completion vectors CreateCQ's vector
// may name (ibv_context.num_comp_vectors): one for a simulated host.
// 0 for a nil context.
func (c *Context) NumCompVectors() int {
	if c == nil {
		return 0
	}
	return c.dev().NumCompVectors()
}

// Counters returns the port's counters, with rxe's hw_counters names.
func (c *Context) Counters() *Counters { return c.dev().Counters() }

// Close closes the context (ibv_close_device): every object opened
// through it and not yet destroyed is destroyed, newest first, as the
// kernel does when the device file closes (a QP stops answering and
// leaves its multicast groups, a CQ's
// unacknowledged events are dropped, nothing counts against the device's
// limits any more). Every verb on the context or on one of its objects
// then returns EINVAL, and so does a second Close.
func (c *Context) Close() error {
	if err := c.usable("close_device"); err != nil {
		return err
	}
	c.owned.closeAll()
	c.closed = true
	return nil
}
