# rocesim make targets. `make demo` and `make test` are all a fresh machine needs.
GO        ?= go
FUZZTIME  ?= 30s
PKGS      := ./...

.PHONY: all demo test deps lint check race fuzz bench bench-realnet bench-dropin golden corpus swarm conformance soak dropin scale swarm-merge

all: test

## demo: run the go-back-n scenario, write demo.pcapng and demo.svg, say how to open them
demo:
	$(GO) run ./cmd/rocesim run go-back-n --pcap demo.pcapng --svg demo.svg
	@echo
	@echo "Wrote demo.pcapng (every frame commented) and demo.svg (the ladder). Open them with:"
	@echo "  wireshark demo.pcapng        # or: tshark -r demo.pcapng -T fields -e frame.number -e _ws.col.Info -e frame.comment"
	@echo "  go run ./cmd/rocesim inspect demo.pcapng"
	@echo "  a web browser: demo.svg"
	@echo "More: go run ./cmd/rocesim scenarios"

## dropin: build the drop-in libibverbs.so.1 (cgo) and librdmacm.so.1 (C over it, dropin/rdmacm) into build/dropin: LD_LIBRARY_PATH=build/dropin ./your-program runs on the model
# The flags of internal/dropinbuild, which every other builder of the
# library uses (its TestMakefileAgrees): the Go runtime's default GODEBUG
# asyncpreemptoff=1, so that no preemption signal interrupts the
# program's own system calls (EINTR from a poll(2)); and, since cgo
# refuses -Wl,-soname and -Wl,--version-script in #cgo LDFLAGS (they are
# not on its allow-list, as they could rewrite any link), through
# -extldflags the SONAME libibverbs.so.1 and rdma-core's symbol versions
# (dropin/ibverbs/libibverbs.map), which unmodified programs bind to
# (ibv_get_device_list@IBVERBS_1.1 ...).
DROPIN_LDFLAGS := -X=runtime.godebugDefault=asyncpreemptoff=1 -extldflags=-Wl,-soname,libibverbs.so.1,--version-script,$(CURDIR)/dropin/ibverbs/libibverbs.map
dropin:
	@mkdir -p build/dropin
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -ldflags='$(DROPIN_LDFLAGS)' -o build/dropin/libibverbs.so.1 ./dropin/ibverbs
	@rm -f build/dropin/libibverbs.so.h
	$${CC:-gcc} -std=gnu11 -Wall -Werror -O2 -fPIC -shared -fvisibility=hidden -o build/dropin/librdmacm.so.1 \
	  -Wl,-soname,librdmacm.so.1,--version-script,$(CURDIR)/dropin/rdmacm/shim/librdmacm.map,-z,defs \
	  dropin/rdmacm/shim/rdmacm.c -Lbuild/dropin -l:libibverbs.so.1 -lpthread
	@echo "Built build/dropin/libibverbs.so.1 and librdmacm.so.1. Run a libibverbs or rdma_cm program on the model with:"
	@echo "  LD_LIBRARY_PATH=$(CURDIR)/build/dropin ibv_devinfo -v"

## deps: install the system tools the tests use (tshark, chromium), if missing
deps:
	@tools/install-deps.sh

## test: lint and run every test (installs tshark and chromium first if it can); a package gets 25 min (conformance boots QEMU guests: about 8 min on a quiet 2-core machine, more under load), each test bounds itself
test: deps lint
	$(GO) test -count=1 -timeout 25m $(PKGS)

## lint: gofmt, go vet and staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 $(PKGS)

## check: lint and the short tests
check: lint
	$(GO) test -short -count=1 $(PKGS)

## race: the tests under the race detector
race:
	$(GO) test -race -count=1 $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each (default 30s)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s -timeout 0; \
	  done; \
	done

## bench: wire decode/encode vs a CRC-32 baseline, event queue, fault decisions, fabric frame path
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./wire/... ./sim/... ./faults/... ./verbs/...

## bench-realnet: two model nodes over real UDP on loopback (127.0.0.1, 127.0.0.2 port 4791): throughput and latency of SEND, WRITE, READ at 4 and 64 KiB; then the same WRITE throughput and SEND/WRITE latency model<->model next to rxe<->rxe between two QEMU guests on this machine (ib_write_bw, ib_send_lat, ib_write_lat; needs conformance/install.sh)
bench-realnet:
	$(GO) test -run '^$$' -bench UDPWorkload -benchtime 2000x -count 3 ./realnet/
	ROCESIM_CONFORMANCE=1 ROCESIM_REALNET_FIGURES=1 $(GO) test -count=1 -run '^TestRealnetFigures$$' -v -timeout 30m ./conformance/

## bench-dropin: figures of unmodified programs on the drop-in library, two processes through rocesim exec: ib_write_bw and ib_send_lat (virtual and wall time), ibv_rc_pingpong's wall time with a lost ACK
bench-dropin:
	ROCESIM_DROPIN_FIGURES=1 $(GO) test -count=1 -run '^TestDropinFigures$$' -v -timeout 10m ./cmd/rocesim/ | grep -v '^=== RUN'

## swarm: the randomised invariant test (2-16 nodes, RC connections, a fault mix per seed) over SEEDS seeds (default 20000) from START (default 0), on every core; prints seeds, frames, faults and wall time. Split across machines: SHARD=k/m runs the k-th of m parts of the range, SWARMJSON=file writes the part's summary; then `make swarm-merge FILES="part*.json"`
SEEDS ?= 20000
START ?= 0
SHARD ?=
SWARMJSON ?=
swarm:
	cd verbs && $(GO) test -run '^TestSwarm$$' -count=1 -timeout 60m -swarm.seeds=$(SEEDS) -swarm.start=$(START) \
	  $(if $(SHARD),-swarm.shard=$(SHARD)) $(if $(SWARMJSON),-swarm.json=$(abspath $(SWARMJSON)))

## swarm-merge: merge the summaries of a split swarm (FILES, from make swarm SWARMJSON=…) into one line; fails if a seed failed or seeds are missing
swarm-merge:
	$(GO) run ./tools/swarmmerge $(FILES)

## scale: how cost grows with the world (not part of test; about 2 min, each point run three times, 2.2 GB at its largest point): the alltoall for N = 16 … 1024 hosts and 1k … 1M idle RC QPs, each point in its own process; prints wall and CPU time, packets/s, peak heap and RSS per point and the fitted growth exponents (must be <= 1.1) and what a dependent load to memory costs on the machine; draws docs/scale.svg
scale:
	$(GO) build -o build/scale ./tools/scale
	nice -n 10 build/scale -svg docs/scale.svg -md

## soak: the runs that never settle (drop-all, corrupt, dup n=100000000, rnr_retry 7 with no receive, a verbstest world): each must end within 10 s and 300 MB; prints wall time and peak RSS (not part of test)
soak:
	@GO=$(GO) tools/soak.sh

## golden: regenerate golden files from tshark and the current code (review the diff!)
golden: deps
	$(GO) test ./wire -run TestTsharkGoldensCurrent -update
	$(GO) test ./cmd/rocesim -run 'Golden|TestRunBuiltins|TestLadderWidth' -update
	$(GO) test ./ladder -update

## corpus: rewrite the committed fuzz seed corpus from the real captures
corpus:
	$(GO) test ./wire ./wire/rocelayers ./nic -run 'TestWriteFuzzCorpus|TestWriteReceiveCorpus' -corpus

## conformance: real rdma_rxe under QEMU (TCG) against the model: interop matrix, differential runs (writes conformance/RESULTS.md and prints it); installs qemu, rdma-core and a Debian kernel first (needs root for apt)
conformance:
	conformance/install.sh
	@start=$$(date +%s); \
	ROCESIM_RESULTS=$(CURDIR)/conformance/RESULTS.md ROCESIM_CONFORMANCE=1 $(GO) test -count=1 -v -timeout 30m ./conformance/; \
	rc=$$?; echo; cat conformance/RESULTS.md; echo "make conformance: $$(( $$(date +%s) - start )) s"; exit $$rc
