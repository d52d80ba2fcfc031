// Package verbs will be rocesim's user API in the vocabulary of
// libibverbs: devices, protection domains, memory regions, completion
// queues and queue pairs, with the errno a libibverbs user expects when a
// verb is misused. It owns the simulated world and drives its event loop.
//
// The API arrives with issue 4.
package verbs
