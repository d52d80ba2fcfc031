package rocesim_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/rocesim/rocesim"

// allowed lists, for each package of the module, the non-standard packages
// it may depend on (directly or not). Imports point one way
// (../shared/STYLE.md): sim and wire use the standard library only; the
// simulated NIC never sees gopacket; only the edges (capture files,
// gopacket layers, the CLI) do.
var allowed = map[string][]string{
	"sim":                 {},
	"wire":                {},
	"faults":              {"internal/lineformat", "wire", "sim"},
	"sim/fabric":          {"faults", "internal/lineformat", "wire", "sim"},
	"nic":                 {"wire", "sim"},
	"verbs":               {"nic", "wire", "sim", "sim/fabric", "faults", "internal/lineformat", "wire/capture", "gopacket", "x/net", "x/sys"},
	"wire/rocelayers":     {"wire", "gopacket"},
	"wire/capture":        {"wire", "gopacket", "x/net", "x/sys"},
	"cmd/rocesim":         {"*"},
	"internal/tsharktest": {},
	"internal/lineformat": {},
	"ladder":              {"sim", "wire"},
	"scenario":            {"verbs", "nic", "sim", "sim/fabric", "faults", "internal/lineformat", "wire", "wire/capture", "gopacket", "x/net", "x/sys"},
	// verbstest is for tests: its assertions are testify's, and it draws
	// a failed run's ladder with package ladder, as the CLI does.
	"verbs/verbstest": {"ladder", "verbs", "nic", "wire", "sim", "sim/fabric", "faults", "internal/lineformat", "wire/capture", "gopacket", "x/net", "x/sys", "testify", "yaml"},
	// the worked example is written against package verbs alone.
	"examples/kvstore": {"verbs", "nic", "wire", "sim", "sim/fabric", "faults", "internal/lineformat", "wire/capture", "gopacket", "x/net", "x/sys"},
	// conformance replays the scenario format's files on real rxe, so it
	// reads them with package scenario, as the CLI does.
	"conformance": {"scenario", "verbs", "nic", "wire", "sim", "sim/fabric", "faults", "internal/lineformat", "wire/capture", "gopacket", "x/net", "x/sys"},
}

var external = map[string]string{
	"gopacket": "github.com/gopacket/gopacket",
	"x/sys":    "golang.org/x/sys",
	"x/net":    "golang.org/x/net",
	"testify":  "github.com/stretchr/testify",
	"yaml":     "go.yaml.in/yaml",
}

func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		if rel == "" {
			continue // this test's own package
		}
		allow, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not in the import allow-list of deps_test.go: add it with the dependencies it may have", rel)
			continue
		}
		if len(allow) == 1 && allow[0] == "*" {
			continue
		}
		deps, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, d := range strings.Fields(string(deps)) {
			if d == pkg || permitted(d, allow) {
				continue
			}
			t.Errorf("%s depends on %s, which the package graph does not allow", rel, d)
		}
	}
}

func permitted(dep string, allow []string) bool {
	for _, a := range allow {
		if p, ok := external[a]; ok {
			if dep == p || strings.HasPrefix(dep, p+"/") {
				return true
			}
			continue
		}
		if dep == module+"/"+a {
			return true
		}
	}
	return false
}
