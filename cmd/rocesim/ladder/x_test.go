package ladder_test

import (
	"os"
	"testing"

	"github.com/rocesim/rocesim/cmd/rocesim/ladder"
)

func TestX(t *testing.T) {
	tr := run(t, scenario{plan: "drop link=b-sw psn=101 tx=1\ndown link=a-sw from=1us to=3us", sw: true, hosts: 3})
	ladder.Text(os.Stdout, tr, ladder.Options{})
	f, _ := os.Create("/tmp/ladder-png/x.svg")
	ladder.SVG(f, tr, ladder.Options{}, "three hosts, a link down")
	f.Close()
}
