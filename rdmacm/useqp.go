package rdmacm

import "github.com/rocesim/rocesim/verbs"

// UseQP makes qp, an RC QP in RESET that the caller created on the ID's
// host, the ID's QP and moves it to INIT as CreateQP does. It is
// rdma_create_qp for a library that creates the QP itself with
// ibv_create_qp, as librdmacm does (ucma_init_conn_qp): the drop-in
// librdmacm.so.1 (dropin/rdmacm). A nil qp forgets the ID's QP
// (rdma_destroy_qp), so that a later Disconnect or REJ does not touch a
// destroyed QP.
func (id *CMID) UseQP(qp *verbs.QP) error {
	if qp == nil {
		id.QP, id.PD = nil, nil
		return nil
	}
	if id.QP != nil {
		return misuse("create_qp", "the ID has a QP already")
	}
	if !id.mayCreateQP() {
		return misuse("create_qp", "the ID is %v and has no device: resolve an address, bind to the device's, or take a CONNECT_REQUEST, first", id.state)
	}
	if err := id.initQP(qp); err != nil {
		return err
	}
	id.QP = qp
	return nil
}

// Migrate moves the ID to channel ch (rdma_migrate_id): its later
// events are posted there; the ones already waiting stay where they are.
func (id *CMID) Migrate(ch *EventChannel) error {
	if ch == nil || ch.cm != id.a {
		return misuse("migrate_id", "the channel is not one of the ID's host")
	}
	id.ch = ch
	return nil
}
