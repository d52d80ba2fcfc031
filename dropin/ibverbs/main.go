package main

// main is never run: the package is built with -buildmode=c-shared,
// which needs a main package.
func main() {}
