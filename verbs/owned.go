package verbs

// owned is what a context has opened and not yet destroyed, in creation
// order. Closing the context destroys it, the newest first (so a QP goes
// before its CQs, SRQ and PD, a CQ before its channel), as the kernel
// destroys the objects of a closing device file (uverbs_destroy_ufile_hw):
// a closed context's QPs stop answering and its objects stop counting
// against the device's limits.
type owned struct {
	list  []ownedObj // a zero entry is a hole, left by a destroy
	holes int
}

// ownedObj is one object of a context: where it keeps its index in the
// list (updated when the list is compacted), and how the device destroys
// it when the context closes.
type ownedObj struct {
	slot    *int
	destroy func()
}

// add records an object; slot receives its index.
func (o *owned) add(slot *int, destroy func()) {
	*slot = len(o.list)
	o.list = append(o.list, ownedObj{slot, destroy})
}

// remove forgets the object at slot (destroyed by the user). Its place
// becomes a hole, and the list is compacted once holes are half of it,
// so a long-lived context that creates and destroys objects keeps a list
// the size of what it holds, at O(1) amortised per destroy.
func (o *owned) remove(slot int) {
	o.list[slot] = ownedObj{}
	o.holes++
	if o.holes <= len(o.list)/2 {
		return
	}
	n := 0
	for _, e := range o.list {
		if e.destroy != nil {
			*e.slot = n
			o.list[n] = e
			n++
		}
	}
	clear(o.list[n:])
	o.list, o.holes = o.list[:n], 0
}

// closeAll destroys every object still held, newest first, and forgets
// them. The device calls cannot refuse here (what uses an object is
// destroyed before it, and a CQ's unacknowledged events are dropped), so
// their errors are not checked.
func (o *owned) closeAll() {
	for i := len(o.list) - 1; i >= 0; i-- {
		if d := o.list[i].destroy; d != nil {
			d()
		}
	}
	o.list, o.holes = nil, 0
}
