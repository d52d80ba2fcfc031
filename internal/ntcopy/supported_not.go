//go:build !amd64 || race

package ntcopy

// supported is false off amd64, and under the race detector, which sees
// nothing inside assembly: a cluster's parts read each other's lent
// frames (sim/fabric, DivertLent), and those reads must stay in its view.
const supported = false
