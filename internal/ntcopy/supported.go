//go:build amd64 && !race

package ntcopy

// supported: Copy takes the non-temporal path for a long copy.
const supported = true
