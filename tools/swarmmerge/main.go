// Command swarmmerge merges the summaries of a swarm split by seed range
// (make swarm SHARD=k/m SWARMJSON=part.json on each machine) into one:
//
//	go run ./tools/swarmmerge [-o all.json] part0.json part1.json …
//
// It prints the merged summary's line, writes it with -o, and exits 1 if a
// seed failed or the parts overlap or leave seeds out.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rocesim/rocesim/internal/swarmsum"
)

func main() {
	out := flag.String("o", "", "write the merged summary here (JSON)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: swarmmerge [-o merged.json] part.json…")
		flag.PrintDefaults()
	}
	flag.Parse()
	var parts []swarmsum.Summary
	for _, p := range flag.Args() {
		s, err := swarmsum.Read(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		parts = append(parts, s)
	}
	m, err := swarmsum.Merge(parts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(m)
	if *out != "" {
		if err := swarmsum.Write(*out, m); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if len(m.Failed) > 0 {
		for _, s := range m.Failed {
			fmt.Printf("rerun: go test ./verbs -run 'TestSwarm/seed=%d$' -swarm.seed=%d -v\n", s, s)
		}
		os.Exit(1)
	}
}
