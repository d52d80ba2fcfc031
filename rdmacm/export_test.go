package rdmacm

import "github.com/rocesim/rocesim/verbs"

// Tables returns the size of host h's ID table and of its map of the
// requests that made passive IDs, for tests of their bounds.
func (cm *CM) Tables(h *verbs.Host) (ids, dups int) {
	a := cm.agents[h]
	return len(a.ids), len(a.dups)
}
