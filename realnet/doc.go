// Package realnet runs rocesim's NIC model (a nic.Device) on a real
// network, in real time.
package realnet
