#!/bin/sh
# make soak: the runs that never settle (issue 14). Each must end within
# SOAK_SECONDS of wall time (default 10) and SOAK_MB of peak RSS (default
# 300), with the exit status it documents; the script prints wall time,
# peak RSS and exit status for each (and the CPU time, which tells a slow
# run from a loaded machine) and fails if one is out of bounds.
# Every case runs under ulimit -v and timeout, so a regression cannot
# take the machine down.
set -u
GO=${GO:-go}
max_s=${SOAK_SECONDS:-10}
max_mb=${SOAK_MB:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$(dirname "$0")/.." || exit 2
$GO build -o "$tmp/rocesim" ./cmd/rocesim || exit 2
$GO test -c -o "$tmp/verbstest.test" ./verbs/verbstest || exit 2
if [ ! -x /usr/bin/time ]; then
	echo "soak: needs /usr/bin/time (Debian package time)"; exit 2
fi
failed=0

# one NAME WANT_STATUS COMMAND...: run it, measure it, judge it.
one() {
	name=$1 want=$2
	shift 2
	(ulimit -v 4000000; exec /usr/bin/time -f '%e %M %U %S' -o "$tmp/time" timeout 60 "$@") >"$tmp/out" 2>&1
	status=$?
	set -- $(tail -n 1 "$tmp/time")
	wall=$1 mb=$(($2 / 1024)) cpu=$(awk "BEGIN{print $3 + $4}")
	verdict=ok
	if [ "$status" -ne "$want" ]; then verdict="FAIL: exit status $status, want $want"; fi
	if awk "BEGIN{exit !($wall > $max_s)}"; then verdict="FAIL: over ${max_s}s"; fi
	if [ "$mb" -gt "$max_mb" ]; then verdict="FAIL: over ${max_mb} MB"; fi
	printf '%-34s %6ss wall %6ss cpu %5d MB  exit %d  %s\n' "$name" "$wall" "$cpu" "$mb" "$status" "$verdict"
	if [ "$verdict" != ok ]; then
		failed=1
		sed 's/^/    /' "$tmp/out" | tail -n 20
	else
		grep -h 'did not settle\|still busy' "$tmp/out" | head -n 1 | cut -c1-300 | sed 's/^/    /'
	fi
}

echo "soak: each case must end within ${max_s}s of wall time and ${max_mb} MB"
one "run drop-all (rxe retry_cnt 7)" 3 "$tmp/rocesim" run tools/soak/drop-all.scenario --quiet
one "run corrupt (every frame)" 3 "$tmp/rocesim" run tools/soak/corrupt.scenario --quiet
one "run dup n=100000000" 3 "$tmp/rocesim" run tools/soak/dup.scenario --quiet --pcap "$tmp/dup.pcapng"
one "run rnr-forever (rnr_retry 7)" 3 "$tmp/rocesim" run tools/soak/rnr-forever.scenario --quiet
one "run drop-all, ladder and pcap" 3 "$tmp/rocesim" run tools/soak/drop-all.scenario --pcap "$tmp/drop.pcapng"
one "verbstest world never settles" 0 env ROCESIM_SOAK=1 "$tmp/verbstest.test" -test.run '^TestSoakNeverSettles$' -test.v
one "verbstest rnr_retry 7, no receive" 0 env ROCESIM_SOAK=1 "$tmp/verbstest.test" -test.run '^TestSoakRNRForever$' -test.v
exit $failed
