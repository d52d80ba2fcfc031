package rocelayers_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire"
)

var writeCorpus = flag.Bool("corpus", false, "rewrite the committed fuzz seed corpus from the captures in ../testdata")

// TestWriteFuzzCorpus regenerates testdata/fuzz/{FuzzLayers,FuzzBTH} from
// the captures: the first frame of each opcode (and each AETH syndrome
// type) up to 600 bytes long (a UD SEND with its 512 bytes fits). Run with
// -corpus.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -corpus to regenerate")
	}
	_, roce := captures(t)
	seen := map[string]bool{}
	for _, dir := range []string{"FuzzLayers", "FuzzBTH"} {
		require.NoError(t, os.RemoveAll(filepath.Join("testdata", "fuzz", dir)))
		require.NoError(t, os.MkdirAll(filepath.Join("testdata", "fuzz", dir), 0o755))
	}
	for _, c := range roce {
		var p wire.Packet
		require.NoError(t, p.Decode(c.frame))
		key := p.BTH.Opcode().String()
		if p.AETH != nil {
			key += "_" + strings.Fields(strings.NewReplacer("(", " ", "-", "_").Replace(p.AETH.Syndrome().String()))[0]
		}
		if seen[key] || len(c.frame) > 600 {
			continue
		}
		seen[key] = true
		name := strings.NewReplacer(".pcap#", "_", ".", "_").Replace(c.name) + "_" + key
		transport := concat(p.BTH, p.DETH, p.RETH, p.AtomicETH, p.AETH, p.AtomicAckETH, p.ImmDt, p.IETH, p.Payload, p.Pad, p.ICRC)
		for _, seed := range []struct {
			dir  string
			data []byte
		}{{"FuzzLayers", c.frame}, {"FuzzBTH", transport}} {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed.data)
			require.NoError(t, os.WriteFile(filepath.Join("testdata", "fuzz", seed.dir, name), []byte(body), 0o644))
		}
	}
	t.Logf("%d seeds", len(seen))
}
