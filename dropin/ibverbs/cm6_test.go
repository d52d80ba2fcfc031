//go:build cgo && linux

package main

import "testing"

// TestCM6: testdata/cm6.c on the drop-in prints what it printed on real
// rxe (testdata/cm6.rxe, the guest's output; conformance TestCM6Rxe runs
// it on rxe again): an rdma_cm connection over IPv6 from the device to
// its own link-local address (the events, both IDs' addresses, the path,
// the QPs' address vectors, a SEND, the disconnect), which listener
// takes an IPv6 request and which an IPv4 one, RC and UD, the family
// mismatches rdma_resolve_addr refuses, and a disconnect from both sides
// at once with the server's ID destroyed at once (the client's
// DISCONNECTED has status 0: the crossing DREQ; it was -110, after its
// DREQ's 15 resends went unanswered). The program polls its channels'
// fds, so the model runs while it sleeps in poll(2) (idle.go).
func TestCM6(t *testing.T) { sameAsRxe(t, "cm6", "-lrdmacm") }
