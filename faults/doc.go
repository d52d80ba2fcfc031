// Package faults will hold fault plans as data: ordered rules that match
// frames by link, direction, QPN, opcode class, PSN or transmission count
// and drop, duplicate, delay, reorder, corrupt, truncate or rewrite them,
// plus link down/up and partitions. A plan is a pure decision function over
// (time, link, frame); the fabric applies its verdicts.
//
// Fault plans arrive with issue 3; they match on the views of package wire.
package faults
