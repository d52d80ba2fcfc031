package nic

// EachQP calls fn for every QP not destroyed, in creation order: for a
// driver that explains a run that does not settle (which QP retries,
// with which retry_cnt and rnr_retry). It allocates nothing, and walks
// the creation-ordered list, never the QPN map, so what it reports is
// deterministic.
func (d *Device) EachQP(fn func(*QP)) {
	for _, qp := range d.qpList {
		if qp != nil {
			fn(qp)
		}
	}
}
