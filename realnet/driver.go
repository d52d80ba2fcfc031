package realnet

// Flow through a driver, all on its one loop goroutine but step 1:
//  1. The reader goroutine receives a batch of frames from the transport
//     into one of a fixed set of buffer batches and hands it to the loop
//     (when every batch is in use it waits: the socket's buffer absorbs a
//     burst, then the kernel drops, and memory does not grow).
//  2. The loop reads the clock once per input: now = time since Start,
//     the device's sim.Time, never going backwards.
//  3. Each frame of the batch goes to Config.Input (default: dev.Receive).
//  4. pump: dev.Advance when its deadline has passed, then the loop over
//     dev.Ready that nic/ready.go describes: Config.Ready sees the batch,
//     its frames go through Config.Output and out through the transport
//     in one Send, Config.Sent sees each as sent; the socket taking a
//     frame is the frame leaving the port, so once the batch is out the
//     device hears TxDone for each (also for a frame the socket refused:
//     it is dropped at the port), and the loop asks Ready again for what
//     that let it build, until a batch has no frames.
//  5. The timer is armed for the batch's Deadline, so ACK timeouts and
//     RNR waits fire in real time.
// Do runs a caller's function at step 3's place and pumps after it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
)

// Config describes a driver: a device, the transport its frames cross,
// and optional hooks, each called on the loop goroutine.
type Config struct {
	// Device is the NIC the driver owns from Start on: nothing else may
	// touch it but functions passed to Do.
	Device *nic.Device
	// Transport carries the device's frames; the driver closes it.
	Transport Transport
	// Input handles one frame received (default: Device.Receive). A host
	// that answers ARP or captures frames does it here; the frame is
	// valid only during the call.
	Input func(now sim.Time, frame []byte)
	// Ready sees each batch the device hands out, before its frames are
	// sent (completions to wake waiters for, asynchronous events to keep:
	// copy them, the batch is valid only during the call).
	Ready func(now sim.Time, rd *nic.Ready)
	// Output may alter each frame before it is sent (a fault, a capture);
	// it returns the frame to send and its note.
	Output func(now sim.Time, frame []byte, note string) ([]byte, string)
	// Sent sees each frame after the transport took it (err nil) or
	// refused it, as the transport left it (the UDP transport rewrites
	// the outer headers to what the kernel sends).
	Sent func(now sim.Time, frame []byte, note string, err error)
	// Batches is how many buffer batches the reader may fill ahead of the
	// loop (0: 4).
	Batches int
	// Epoch is the wall-clock time the device's time 0 stands for (zero:
	// when Start is called); a capture opened before Start names it.
	Epoch time.Time
}

// Stats counts what a driver did.
type Stats struct {
	FramesIn   uint64 // frames received from the transport
	FramesOut  uint64 // frames the transport took
	SendErrors uint64 // frames the transport refused (the device still got its TxDone)
	Pumps      uint64 // batches the device handed out with something in them
}

// ErrDriverClosed is returned by Do and Await once the driver is closed.
var ErrDriverClosed = errors.New("realnet: driver closed")

// Driver runs one nic.Device in real time on a Transport: one loop
// goroutine owns the device (see the flow at the top of this file), a
// second reads the transport. A caller reaches the device only through
// Do; the other methods are safe for concurrent use.
type Driver struct {
	cfg   Config
	dev   *nic.Device
	tr    Transport
	start time.Time

	in    chan *rxBatch
	free  chan *rxBatch
	reqs  chan *doReq
	quit  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	timer *time.Timer

	// Owned by the loop goroutine.
	now    sim.Time
	out    [][]byte
	notes  []string
	one    [1][]byte
	signal bool // the last pump handed out completions or events

	mu      sync.Mutex // guards stats, readErr, changed
	stats   Stats
	readErr error
	changed chan struct{} // closed when completions or events arrive, then replaced
}

// rxBatch is a batch of receive buffers.
type rxBatch struct {
	msgs []Msg
	n    int
}

// doReq is one Do call waiting for the loop.
type doReq struct {
	f   func(now sim.Time, dev *nic.Device) error
	err chan error
}

// defaultBatches is how many receive batches a driver has by default.
const defaultBatches = 4

// Start takes cfg.Device and starts its loop on cfg.Transport.
func Start(cfg Config) (*Driver, error) {
	if cfg.Device == nil || cfg.Transport == nil {
		return nil, fmt.Errorf("realnet: driver: Device and Transport are required")
	}
	if cfg.Batches <= 0 {
		cfg.Batches = defaultBatches
	}
	d := &Driver{cfg: cfg, dev: cfg.Device, tr: cfg.Transport,
		in:      make(chan *rxBatch, cfg.Batches),
		free:    make(chan *rxBatch, cfg.Batches),
		reqs:    make(chan *doReq),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	bs := d.tr.BatchSize()
	for range cfg.Batches {
		b := &rxBatch{msgs: make([]Msg, bs)}
		for i := range b.msgs {
			b.msgs[i].Buf = make([]byte, BufLen)
		}
		d.free <- b
	}
	d.start = cfg.Epoch
	if d.start.IsZero() {
		d.start = time.Now()
	}
	d.timer = time.NewTimer(time.Hour)
	d.timer.Stop()
	d.wg.Go(d.read)
	d.wg.Go(d.loop)
	return d, nil
}

// Started is the wall-clock time the device's time 0 stands for.
func (d *Driver) Started() time.Time { return d.start }

// Done is closed when the loop has stopped (after Close).
func (d *Driver) Done() <-chan struct{} { return d.done }

// Transport returns the driver's transport.
func (d *Driver) Transport() Transport { return d.tr }

// Do runs f on the loop goroutine, which owns the device, with the
// current time; then it runs the device's due timers and sends what f
// caused. It returns f's error, or ErrDriverClosed. f must not keep dev
// nor call Do or Await (the loop would wait for itself); memory
// registered with the device is the device's too, so read it inside f.
func (d *Driver) Do(f func(now sim.Time, dev *nic.Device) error) error {
	r := &doReq{f: f, err: make(chan error, 1)}
	select {
	case d.reqs <- r:
		return <-r.err
	case <-d.done:
		return ErrDriverClosed
	}
}

// Await runs cond on the loop now and again each time the device hands
// out completions or events, until it returns true; it returns
// ctx's error if ctx ends first, ErrDriverClosed if the driver closes.
func (d *Driver) Await(ctx context.Context, cond func(now sim.Time, dev *nic.Device) bool) error {
	for {
		d.mu.Lock()
		ch := d.changed
		d.mu.Unlock()
		ok := false
		if err := d.Do(func(now sim.Time, dev *nic.Device) error { ok = cond(now, dev); return nil }); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-d.done:
			return ErrDriverClosed
		}
	}
}

// Transmit sends a frame that is not the device's (an ARP answer) at
// once. Call it only on the loop goroutine: inside Do, Input or a hook.
func (d *Driver) Transmit(frame []byte) error {
	d.one[0] = frame
	n, err := d.tr.Send(d.one[:])
	d.one[0] = nil
	d.count(n, err)
	return err
}

// Stats returns the counters so far.
func (d *Driver) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Close stops the loop and the reader and closes the transport. It
// returns the transport's first receive error, if any. A second Close
// does nothing.
func (d *Driver) Close() error {
	first := false
	d.once.Do(func() {
		first = true
		close(d.quit)
		d.tr.Close()
		d.wg.Wait()
	})
	if !first {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.readErr
}

// read hands the loop batches of received frames.
func (d *Driver) read() {
	for {
		var b *rxBatch
		select {
		case b = <-d.free:
		case <-d.quit:
			return
		}
		n, err := d.tr.Receive(b.msgs)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				d.mu.Lock()
				if d.readErr == nil {
					d.readErr = fmt.Errorf("realnet: driver: receive: %w", err)
				}
				d.mu.Unlock()
			}
			return
		}
		b.n = n
		select {
		case d.in <- b:
		case <-d.quit:
			return
		}
	}
}

// loop owns the device: it handles one input at a time, then pumps.
func (d *Driver) loop() {
	defer close(d.done)
	defer d.timer.Stop()
	for {
		select {
		case <-d.quit:
			return
		case b := <-d.in:
			d.tick()
			for i := range b.n {
				m := &b.msgs[i]
				if d.cfg.Input != nil {
					d.cfg.Input(d.now, m.Buf[:m.N])
				} else {
					d.dev.Receive(d.now, m.Buf[:m.N])
				}
			}
			d.mu.Lock()
			d.stats.FramesIn += uint64(b.n)
			d.mu.Unlock()
			d.free <- b
		case r := <-d.reqs:
			d.tick()
			err := r.f(d.now, d.dev)
			d.pump()
			r.err <- err
			continue
		case <-d.timer.C:
			d.tick()
		}
		d.pump()
	}
}

// tick reads the clock: the device's time is the wall-clock (monotonic)
// time since Start, and never goes backwards.
func (d *Driver) tick() {
	if t := sim.Time(time.Since(d.start)); t > d.now {
		d.now = t
	}
}

// pump runs the device's due timers, then applies its batches until one
// has no frames, and re-arms the timer for the deadline.
func (d *Driver) pump() {
	dev := d.dev
	if d.now >= dev.NextDeadline() {
		dev.Advance(d.now)
	}
	rd := dev.Ready()
	for {
		if !rd.Empty() {
			d.mu.Lock()
			d.stats.Pumps++
			d.mu.Unlock()
		}
		if len(rd.CQs)+len(rd.Events)+len(rd.Notified) > 0 {
			d.signal = true
		}
		if d.cfg.Ready != nil && !rd.Empty() {
			d.cfg.Ready(d.now, rd)
		}
		if len(rd.Frames) == 0 {
			break
		}
		d.send(rd.Frames)
		for range rd.Frames {
			dev.TxDone(d.now)
		}
		rd = dev.Ready()
	}
	if rd.Deadline == sim.Never {
		d.timer.Stop()
	} else {
		// A deadline already passed fires at once.
		d.timer.Reset(time.Duration(max(rd.Deadline-d.now, 0)))
	}
	if d.signal {
		d.signal = false
		d.mu.Lock()
		close(d.changed)
		d.changed = make(chan struct{})
		d.mu.Unlock()
	}
}

// send puts a batch's frames on the transport, through the hooks.
func (d *Driver) send(frames []nic.OutFrame) {
	d.out, d.notes = d.out[:0], d.notes[:0]
	for _, f := range frames {
		// The hooks take the note as a string, which outlives the
		// batch: one allocation for a noted frame, beside a system call.
		b, note := f.Bytes, string(f.Note)
		if d.cfg.Output != nil {
			b, note = d.cfg.Output(d.now, b, note)
		}
		d.out = append(d.out, b)
		d.notes = append(d.notes, note)
	}
	for i := 0; i < len(d.out); {
		n, err := d.tr.Send(d.out[i:])
		d.count(n, err)
		if d.cfg.Sent != nil {
			for j := i; j < i+n; j++ {
				d.cfg.Sent(d.now, d.out[j], d.notes[j], nil)
			}
		}
		i += n
		if err != nil && i < len(d.out) {
			if d.cfg.Sent != nil {
				d.cfg.Sent(d.now, d.out[i], d.notes[i], err)
			}
			i++ // dropped at the port
		}
	}
	clear(d.out)
}

// count adds a Send's outcome to the counters.
func (d *Driver) count(sent int, err error) {
	d.mu.Lock()
	d.stats.FramesOut += uint64(sent)
	if err != nil {
		d.stats.SendErrors++
	}
	d.mu.Unlock()
}
