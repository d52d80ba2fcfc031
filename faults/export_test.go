package faults

// SetTxBounds shrinks in's CountTx bounds so a test can reach them.
func SetTxBounds(in *Injector, span, maxFlows, maxEntries int) {
	in.tx.span, in.tx.maxFlows, in.tx.maxEntries = span, maxFlows, maxEntries
}

// TxUsage returns how many flows and counters CountTx holds.
func TxUsage(in *Injector) (flows, entries int) {
	return len(in.tx.windows), in.tx.entries
}
