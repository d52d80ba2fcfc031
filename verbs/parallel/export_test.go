package parallel

// EachWithWorkers is Each, with a count of the workers its team has
// alive: for tests.
func EachWithWorkers(workers int) (each func(n int, step func(p int)), alive func() int32) {
	t := &team{workers: workers}
	return t.each, t.alive.Load
}
