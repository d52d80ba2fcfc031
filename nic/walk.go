package nic

// EachQP calls fn for every QP not destroyed, in QPN order: for a driver
// that explains a run that does not settle (which QP retries, with which
// retry_cnt and rnr_retry). It allocates nothing.
func (d *Device) EachQP(fn func(*QP)) {
	for _, qp := range d.qps {
		if qp != nil {
			fn(qp)
		}
	}
}
