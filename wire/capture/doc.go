// Package capture writes and reads packet capture files: classic pcap
// (nanosecond timestamps) and pcapng (one interface per simulated link,
// a comment per packet). It is built on gopacket's pcapgo, except for
// pcapng's per-packet blocks, which it writes itself, the bytes pcapgo
// writes, without pcapgo's per-packet allocations (pcapng.go). It is the
// only part of rocesim's wire layer that touches files.
//
// Writing, as a fabric tap does it:
//
//	w := capture.NewPcapngWriter(f, capture.PcapngOptions{Comment: "seed=42"})
//	ab, _ := w.AddInterface("a->b", "node a to node b")
//	w.WriteFrame(int64(now), ab, frame, "retransmission #2")
//	w.Close() // flushes; f stays open
//
// Both writers satisfy the Writer interface, so the tap does not care
// which format the user asked for; Create picks one from a file name.
//
// Time comes only from the caller: every timestamp is simulated time in
// int64 nanoseconds (sim.Time), converted with time.Unix(0, ns). The wall
// clock is never read, and neither the host name, operating system nor
// architecture goes into a file, so the same frames at the same times give
// identical bytes on any machine. (pcapgo substitutes time.Now for a zero
// time.Time and writes runtime.GOOS/GOARCH into a pcapng section header by
// default; this package avoids both.)
//
// Reading accepts either format, whatever its byte order or timestamp
// resolution, optionally gzip-compressed:
//
//	r, err := capture.Open("wire/testdata/rc_send.pcap")
//	for rec, err := range r.Records() {
//		if err != nil { ... the file is damaged ... }
//		... rec.Time, rec.Interface, rec.Data, rec.Comments
//	}
//
// A file that is neither pcap nor pcapng fails with an error matching
// ErrFormat.
package capture
