// Package will carries a drop-in program's will from the library to
// `rocesim exec` over a pipe: the frames its rdma_cm IDs would send if
// destroyed, kept by key, which exec sends for the program from its
// address if the program dies without closing its device (killed by a
// signal, crashed, _exit), as the kernel destroys a dead process's IDs
// when it closes its rdma_cm file. On a fabric the daemon keeps the will
// (procfabric.Port.SetWill); over UDP no daemon runs, and exec, the
// program's parent, does.
//
// The stream is a sequence of records, [length uint32 BE][key uint32
// BE][frame]: a record with a frame sets the key's frame, one without
// takes it out, and a record of length 0 (no key) says the program
// closed its device itself: the will is void.
package will

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// EnvFD names the environment variable that gives the library the
// pipe's file descriptor.
const EnvFD = "ROCESIM_WILL_FD"

// MaxFrame bounds a record's frame; MaxBytes the frames a will holds.
const (
	MaxFrame = 16 << 10
	MaxBytes = 64 << 20
)

// Entry is a change to the will: Frame under Key, or Key taken out when
// Frame is nil.
type Entry struct {
	Key   uint32
	Frame []byte
}

// Append appends the records of entries to b.
func Append(b []byte, entries []Entry) []byte {
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(4+len(e.Frame)))
		b = binary.BigEndian.AppendUint32(b, e.Key)
		b = append(b, e.Frame...)
	}
	return b
}

// AppendVoid appends the record that voids the will.
func AppendVoid(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0) }

// Keeper is the will as the records so far make it.
type Keeper struct {
	frames map[uint32][]byte // looked up; sorted before it is read
	bytes  int
	void   bool
}

// Read applies the records of r until it ends (io.EOF: nil), or until
// one is malformed or the will outgrows MaxBytes (an error; what was
// read stands).
func (k *Keeper) Read(r io.Reader) error {
	br := bufio.NewReader(r)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("will: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			k.void = true
			clear(k.frames)
			k.bytes = 0
			continue
		}
		if n < 4 || n > 4+MaxFrame {
			return fmt.Errorf("will: a record of %d bytes", n)
		}
		rec := make([]byte, n)
		if _, err := io.ReadFull(br, rec); err != nil {
			return fmt.Errorf("will: a record cut short: %w", err)
		}
		key := binary.BigEndian.Uint32(rec)
		if old, ok := k.frames[key]; ok {
			k.bytes -= len(old)
			delete(k.frames, key)
		}
		if n == 4 {
			continue
		}
		if k.bytes += int(n - 4); k.bytes > MaxBytes {
			return fmt.Errorf("will: more than %d bytes", MaxBytes)
		}
		if k.frames == nil {
			k.frames = map[uint32][]byte{}
		}
		k.frames[key], k.void = rec[4:], false
	}
}

// Void reports whether the program closed its device itself (the last
// word was the void record, and nothing was set after it).
func (k *Keeper) Void() bool { return k.void }

// Frames returns the will's frames in the order of their keys.
func (k *Keeper) Frames() [][]byte {
	var out [][]byte
	for _, key := range slices.Sorted(maps.Keys(k.frames)) {
		out = append(out, k.frames[key])
	}
	return out
}
