package rocesim_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rocesim/rocesim"

// imports is the package graph of the module, exactly: for each package,
// the non-standard packages its non-test files import directly (module
// packages by their path in the module, others by the short names of
// external). TestImportGraph fails on an import missing here and on an
// entry here that no file imports, so the map is the graph as it is, and
// a change to the graph is a change to this file that a review sees.
// Imports point one way (../shared/STYLE.md, "Package graph"): sim and
// wire use the standard library only; the simulated NIC never sees
// gopacket, only the edges do (capture files, gopacket layers); library
// packages never import cmd/.
var imports = map[string][]string{
	"sim":                 {},
	"wire":                {},
	"internal/lineformat": {},
	"internal/tsharktest": {},
	"internal/tooltest":   {},
	// a recording testing.TB, for tests of test helpers.
	"internal/tbtest": {},
	// network namespaces for tests, through x/sys (setns).
	"internal/netnstest": {"x/sys"},
	// a CPU cache hint (assembly, no imports) for the fabric's links.
	"internal/prefetch": {},
	// non-temporal stores (assembly, no imports) for the fabric's frames
	// and the NICs' payloads; verbs fences them at the end of a run.
	"internal/ntcopy": {},
	// transparent huge pages for a large world's heap: madvise through
	// x/sys; it knows nothing of the model.
	"hugeheap": {"x/sys"},
	// the fault plans' text format is read with the shared tokenizer.
	"faults":          {"internal/lineformat", "sim", "wire"},
	"sim/fabric":      {"faults", "internal/ntcopy", "internal/prefetch", "sim", "wire"},
	"nic":             {"internal/ntcopy", "sim", "wire"},
	"verbs":           {"faults", "internal/ntcopy", "nic", "sim", "sim/fabric", "wire"},
	"wire/rocelayers": {"gopacket", "wire"},
	"wire/capture":    {"gopacket"},
	// the ladder reads a trace alone.
	"ladder": {"sim"},
	// the scenario format builds a verbs world; its fault lines are
	// fault plans; its tokenizer is the one faults uses; its cm= QPs
	// connect through rdmacm.
	"scenario": {"faults", "internal/lineformat", "nic", "rdmacm", "sim", "sim/fabric", "verbs"},
	// verbstest is for tests: its assertions write their own messages
	// (the call as the test wrote it, and what the world saw), and it
	// draws a failed run's ladder with package ladder, as the CLI does;
	// PairCM connects through rdmacm.
	"verbs/verbstest": {"faults", "ladder", "rdmacm", "sim", "sim/fabric", "verbs", "wire", "wire/capture"},
	// runs a verbs.Cluster's parts on several goroutines; it needs
	// nothing of the module (ClusterConfig.Each is a plain function).
	"verbs/parallel": {},
	// the worked example is written against package verbs alone.
	"examples/kvstore": {"verbs"},
	"realnet":          {"nic", "sim", "wire", "x/sys"},
	"rdmacm":           {"nic", "sim", "verbs", "wire"},
	// conformance replays the scenario format's files on real rxe, so it
	// reads them with package scenario, as the CLI does; its C-ABI leg
	// runs the agent on the drop-in library on a fabric daemon it holds
	// the clock of (procfabric).
	"conformance": {"faults", "internal/dropinbuild", "nic", "procfabric", "realnet", "rswitch", "scenario", "sim", "wire", "wire/capture", "x/sys"},
	// rocesim switch's library: the fabric's fault decisions
	// (faults.Injector) on frames between two realnet transports, traced
	// as the fabric traces a link (fabric.FrameEvent).
	"rswitch": {"faults", "realnet", "sim", "sim/fabric", "wire", "wire/capture", "x/sys"},
	// the fabric daemon joins processes' NICs: the fabric, its plans, and
	// sockets (SO_PEERCRED, flock) through x/sys.
	"procfabric": {"faults", "sim", "sim/fabric", "wire", "x/sys"},
	// the drop-in libibverbs.so.1, the only cgo: the C ABI over a verbs
	// world in the program's process, its captures, ladders and fault
	// plans; on a fabric of processes (procfabric) or on real UDP
	// (realnet, wire for the stand-in addresses; its will to rocesim exec
	// over a pipe, internal/will); and rdma_cm for the
	// drop-in librdmacm.so.1 (dropin/rdmacm), which runs in its Go
	// runtime (one per process).
	"dropin/ibverbs": {"faults", "internal/will", "ladder", "nic", "procfabric", "rdmacm", "realnet", "sim", "verbs", "wire", "wire/capture", "x/sys"},
	// the drop-in librdmacm.so.1 is C (its shim/); the Go package is its
	// documentation.
	"dropin/rdmacm": {},
	// the CLI is thin: flags and output over scenario and ladder, and
	// over procfabric for the fabric daemon (whose --faults it parses),
	// realnet for rocesim node and rswitch for rocesim switch.
	"cmd/rocesim": {"faults", "internal/dropinbuild", "internal/lineformat", "internal/will", "ladder", "procfabric", "realnet", "rswitch", "scenario", "sim", "verbs", "wire", "wire/capture", "x/sys"},
	// the scale benchmark (make scale) drives worlds and clusters through
	// verbs (its workload steps are sim events), the clusters on every
	// core through verbs/parallel.
	"tools/scale": {"hugeheap", "sim", "verbs", "verbs/parallel"},
	// a split swarm's summaries, and the tool that merges them.
	"internal/swarmsum": {},
	// a UDP drop-in program's will, from the library to rocesim exec
	// over a pipe: standard library only.
	"internal/will": {},
	// the one go build of the drop-in libibverbs.so.1 (rocesim exec,
	// conformance, the drop-in's tests): standard library only.
	"internal/dropinbuild": {},
	"tools/swarmmerge":     {"internal/swarmsum"},
}

// external names the modules outside this one that packages may import.
var external = map[string]string{
	"gopacket": "github.com/gopacket/gopacket",
	"x/sys":    "golang.org/x/sys",
	"testify":  "github.com/stretchr/testify",
}

func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/...").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		if rel == "" {
			continue // this test's own package
		}
		seen[rel] = true
		want, ok := imports[rel]
		if !ok {
			t.Errorf("package %s is not in the package graph of deps_test.go: add it with the imports it has", rel)
			continue
		}
		var got []string
		for _, imp := range f[1:] {
			if name, ok := graphName(imp); ok && !slices.Contains(got, name) {
				got = append(got, name)
			}
		}
		for _, name := range got {
			if !slices.Contains(want, name) {
				t.Errorf("%s imports %s, which the package graph does not have", rel, name)
			}
		}
		for _, name := range want {
			if !slices.Contains(got, name) {
				t.Errorf("the package graph says %s imports %s, but it does not: remove the edge", rel, name)
			}
		}
	}
	for rel := range imports {
		if !seen[rel] {
			t.Errorf("the package graph lists %s, which is not a package of the module: remove it", rel)
		}
	}
}

// graphName is the name the package graph gives an import path: its path
// in the module, or the short name of an external module; ok is false
// for the standard library.
func graphName(path string) (name string, ok bool) {
	if rel, ok := strings.CutPrefix(path, module+"/"); ok {
		return rel, true
	}
	for name, p := range external {
		if path == p || strings.HasPrefix(path, p+"/") {
			return name, true
		}
	}
	if first, _, _ := strings.Cut(path, "/"); !strings.Contains(first, ".") {
		return "", false // the standard library: no dot in the first element
	}
	return path, true // an external module external does not name
}
