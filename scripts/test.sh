#!/usr/bin/env bash
# scripts/test.sh — the whole Nereus test suite, exactly as CI runs it.
#
# README.md names this script as "the" test command and .ci/run runs it. It
# must work on a fresh Debian machine with Go, Java 17, Maven and apt-get:
# it installs and starts every external service the tests need, runs every
# check, stops what it started, and prints a timing summary per step.
#
#   ./scripts/test.sh                 # everything (CI)
#   NEREUS_FUZZTIME=5s ./scripts/test.sh
#   NEREUS_SKIP_FUZZ=1 NEREUS_SKIP_VULN=1 ./scripts/test.sh   # quicker local run
#
# Environment knobs (all optional):
#   NEREUS_FUZZTIME      time per fuzz target (default 15s)
#   NEREUS_TEST_TIMEOUT  go test -timeout (default 25m)
#   NEREUS_TEST_PKGS     packages for go test (default ./...)
#   NEREUS_SIM_SEEDS     seeds of the stream simulation step (default 10000)
#   NEREUS_SKIP_FUZZ=1, NEREUS_SKIP_VULN=1, NEREUS_SKIP_SERVICES=1
#   NEREUS_REQUIRE_EXTERNAL defaults to 1 here: tests that need an external
#   service fail (instead of skipping) when it is missing.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

export NEREUS_REQUIRE_EXTERNAL=${NEREUS_REQUIRE_EXTERNAL:-1}
FUZZTIME=${NEREUS_FUZZTIME:-15s}
TEST_TIMEOUT=${NEREUS_TEST_TIMEOUT:-25m}
TEST_PKGS=${NEREUS_TEST_PKGS:-./...}
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
CACHE="$ROOT/.cache"
mkdir -p "$CACHE"

TOOLS=(go tool -modfile="$ROOT/tools/go.mod")

declare -a STEP_NAMES=() STEP_SECS=() STEP_RESULTS=()
FAILED=0
RUN_START=$(date +%s)

# step NAME CMD... runs one step, records its duration and result, and keeps
# going on failure so one run reports every broken check.
step() {
	local name=$1
	shift
	echo
	echo "=== step: $name"
	local start rc
	start=$(date +%s)
	"$@"
	rc=$?
	local secs=$(($(date +%s) - start))
	STEP_NAMES+=("$name")
	STEP_SECS+=("$secs")
	if [ "$rc" -eq 0 ]; then
		STEP_RESULTS+=("ok")
	else
		STEP_RESULTS+=("FAIL($rc)")
		FAILED=1
		echo "=== step $name FAILED (exit $rc)"
	fi
	return 0
}

# ---------------------------------------------------------------- services
SERVICES_STARTED=()

stop_services() {
	local s
	for s in "${SERVICES_STARTED[@]}"; do
		echo "=== stopping $s"
		case $s in
		bookkeeper) bash "$ROOT/scripts/bookkeeper-env.sh" stop || true ;;
		esac
	done
	SERVICES_STARTED=()
}
trap stop_services EXIT
trap 'stop_services; exit 130' INT TERM

apt_updated=0
apt_install() {
	command -v apt-get >/dev/null 2>&1 || return 1
	[ "$(id -u)" -eq 0 ] || return 1
	if [ "$apt_updated" -eq 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

install_tools() {
	local rc=0
	if [ -f "$ROOT/scripts/install-tools.sh" ]; then
		bash "$ROOT/scripts/install-tools.sh" || rc=$?
	fi
	if ! command -v kcat >/dev/null 2>&1; then
		if apt_install kcat; then
			echo "installed kcat"
		else
			echo "warning: kcat is not installed and apt-get is not usable; tests needing it will report it"
		fi
	fi
	# Debian's Chromium for the web console test (server/opstest).
	if ! command -v chromium >/dev/null 2>&1; then
		if apt_install chromium; then
			echo "installed chromium"
		else
			echo "warning: chromium is not installed and apt-get is not usable; the console test will report it"
		fi
	fi
	# Build the pinned tools once up front so their compile time is not
	# charged to the checks below.
	(cd "$ROOT/tools" && go build -o /dev/null \
		honnef.co/go/tools/cmd/staticcheck golang.org/x/vuln/cmd/govulncheck gotest.tools/gotestsum ./...) || rc=$?
	return $rc
}

start_services() {
	if [ -f "$ROOT/scripts/bookkeeper-env.sh" ]; then
		local out
		out=$(mktemp)
		if bash "$ROOT/scripts/bookkeeper-env.sh" start | tee "$out"; then
			SERVICES_STARTED+=(bookkeeper)
			# The script prints the ZooKeeper connect string as its last line.
			NEREUS_BOOKKEEPER_ZK=$(tail -n 1 "$out")
			export NEREUS_BOOKKEEPER_ZK
			echo "BookKeeper up: NEREUS_BOOKKEEPER_ZK=$NEREUS_BOOKKEEPER_ZK"
			rm -f "$out"
		else
			rm -f "$out"
			echo "BookKeeper environment failed to start"
			return 1
		fi
	fi
	return 0
}

# ------------------------------------------------------------------ checks
check_gofmt() {
	local bad
	bad=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
	if [ -n "$bad" ]; then
		echo "gofmt needed on:"
		echo "$bad"
		return 1
	fi
}

check_vet() {
	go vet ./... && (cd "$ROOT/tools" && go vet ./...)
}

check_staticcheck() {
	"${TOOLS[@]}" staticcheck ./... && (cd "$ROOT/tools" && go tool staticcheck ./...)
}

# vulndb_offline builds $CACHE/vulndb (govulncheck's v1 file layout) from the
# OSV files in the golang.org/x/vulndb module, which the Go module proxy
# serves even where vuln.go.dev is unreachable.
vulndb_offline() {
	local out="$CACHE/vulndb" stamp="$CACHE/vulndb/.version"
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$VULNDB_VERSION" ]; then
		return 0
	fi
	local dir
	# Download outside any module so no go.mod or go.sum is touched.
	local scratch
	scratch=$(mktemp -d)
	dir=$(cd "$scratch" && go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	rmdir "$scratch"
	[ -d "$dir/data/osv" ] || {
		echo "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv"
		return 1
	}
	# The pseudo-version carries the vulndb commit time: use it as the
	# database's modification time.
	local ts=${VULNDB_VERSION#v0.0.0-}
	ts=${ts%%-*}
	local modified="${ts:0:4}-${ts:4:2}-${ts:6:2}T${ts:8:2}:${ts:10:2}:${ts:12:2}Z"
	(cd "$ROOT/tools" && go run ./mkvulndb -src "$dir/data/osv" -out "$out" -modified "$modified") || return 1
	echo "$VULNDB_VERSION" >"$stamp"
}

check_govulncheck() {
	local db
	if vulndb_offline; then
		db="file://$CACHE/vulndb"
	elif curl -fsS --max-time 10 -o /dev/null https://vuln.go.dev/index/db.json.gz 2>/dev/null; then
		echo "offline database unavailable; using the online database"
		db="https://vuln.go.dev"
	else
		echo "no vulnerability database: neither golang.org/x/vulndb from the module proxy nor vuln.go.dev is reachable"
		return 1
	fi
	echo "govulncheck database: $db"
	# JSON out, then vulngate decides: called vulnerabilities in required
	# modules fail; called standard-library ones are printed as warnings
	# (their fix is a newer Go toolchain) unless NEREUS_VULN_STRICT=1.
	local json="$CACHE/govulncheck.json" strict=()
	[ "${NEREUS_VULN_STRICT:-0}" = 1 ] && strict=(-strict)
	"${TOOLS[@]}" govulncheck -db "$db" -format json ./... >"$json"
	local rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
		echo "govulncheck failed (exit $rc)"
		tail -n 20 "$json"
		return "$rc"
	fi
	(cd "$ROOT/tools" && go run ./vulngate -exempt ./vulngate/exempt.txt "${strict[@]}") <"$json"
}

# tmp_snapshot lists the entries of the temp dir that tests are known to
# leave behind when a cleanup is skipped: Go test temp dirs (Test<Name><N>,
# e.g. of a helper process that was SIGKILLed), the testserver's, bktest's
# and s3test's dirs (nereus-*), JNI libraries extracted by a JVM
# (native<N>/, lib*.so) and Chromium's singleton dirs.
tmp_snapshot() {
	ls -1 "${TMPDIR:-/tmp}" 2>/dev/null |
		grep -E '^(Test[A-Za-z0-9_]+[0-9]+|nereus-.*|native[0-9]+|lib.*\.so|org\.chromium\.Chromium\..*)$' | sort
}

run_tests() {
	local before rc left
	before=$(tmp_snapshot)
	# gotestsum prints go test's usual per-package lines plus a closing
	# "DONE N tests" line, and keeps the JSON event stream for the summary.
	"${TOOLS[@]}" gotestsum --format pkgname-and-test-fails --jsonfile "$CACHE/test-events.json" -- \
		-race -count=1 -timeout "$TEST_TIMEOUT" $TEST_PKGS
	rc=$?
	# A warning, not a failure: on a shared machine another process may
	# have made them. In CI nothing else runs, so any line is a test's.
	left=$(comm -13 <(echo "$before") <(tmp_snapshot))
	if [ -n "$left" ]; then
		echo "warning: the test run left these in ${TMPDIR:-/tmp} (a test's cleanup did not run or does not cover them):"
		echo "$left" | sed 's/^/  /'
	fi
	return $rc
}

# run_simulation runs the stream core's deterministic simulation without
# -race (every seed is single-threaded, so the race detector adds only a
# tenfold slowdown; the -race run above does a short time-boxed pass):
# NEREUS_SIM_SEEDS seeds (default 10000, and fewer is a failure), then the
# mutation check (every planted bug must be caught). A failure prints its
# seed and the command that replays it.
run_simulation() {
	local seeds=${NEREUS_SIM_SEEDS:-10000}
	go test -count=1 -timeout 20m -run '^TestSimulation' -v ./stream -sim.seeds="$seeds" -sim.min="$seeds"
}

# fuzz_targets lists "pkgdir FuzzName" for every native fuzz target.
fuzz_targets() {
	git ls-files --cached --others --exclude-standard '*_test.go' 2>/dev/null |
		xargs -r grep -HoE '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\)' |
		sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#; s#^[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#. \1#' |
		grep -v '^tools/' | sort -u
}

# fuzz_one fuzzes one target for $FUZZTIME. Go's fuzz coordinator can
# report its own -fuzztime deadline as a failure ("context deadline
# exceeded", no failing input written) when a worker is mid-batch at the
# deadline; that one outcome is retried once. Any failure with a saved
# input, or a second deadline report, fails.
fuzz_one() {
	local fdir=$1 fname=$2 out corpus before
	corpus="./$fdir/testdata/fuzz/$fname"
	before=$(ls "$corpus" 2>/dev/null | wc -l)
	out=$(mktemp)
	if go test -run '^$' -fuzz "^${fname}\$" -fuzztime "$FUZZTIME" -parallel 2 "./$fdir" 2>&1 | tee "$out"; then
		rm -f "$out"
		return 0
	fi
	if grep -qx '    context deadline exceeded' "$out" && [ "$(ls "$corpus" 2>/dev/null | wc -l)" = "$before" ]; then
		rm -f "$out"
		echo "--- fuzz ./$fdir $fname: the fuzz engine reported its own deadline, no failing input; retrying once"
		go test -run '^$' -fuzz "^${fname}\$" -fuzztime "$FUZZTIME" -parallel 2 "./$fdir"
		return
	fi
	rm -f "$out"
	return 1
}

run_fuzz() {
	local targets rc=0 n=0 fdir fname
	targets=$(fuzz_targets)
	if [ -z "$targets" ]; then
		# The module has fuzz targets (wire decoders, codecs): finding none
		# means discovery broke, which must not pass as "nothing to fuzz".
		echo "no fuzz targets found: fuzz-target discovery is broken"
		return 1
	fi
	while read -r fdir fname; do
		n=$((n + 1))
		echo "--- fuzz ./$fdir $fname for $FUZZTIME"
		if ! fuzz_one "$fdir" "$fname"; then
			echo "--- fuzz ./$fdir $fname FAILED (a failing input is saved under ./$fdir/testdata/fuzz/$fname)"
			rc=1
		fi
	done <<<"$targets"
	echo "ran $n fuzz targets"
	return $rc
}

# ------------------------------------------------------------------- run
echo "Nereus test suite: $(go version), $(nproc 2>/dev/null || echo '?') cores, NEREUS_REQUIRE_EXTERNAL=$NEREUS_REQUIRE_EXTERNAL"

step install-tools install_tools
if [ "${NEREUS_SKIP_SERVICES:-0}" != 1 ]; then
	step start-services start_services
fi
step repo-hygiene bash "$ROOT/scripts/check-repo.sh"
step gofmt check_gofmt
step go-vet check_vet
step staticcheck check_staticcheck
if [ "${NEREUS_SKIP_VULN:-0}" != 1 ]; then
	step govulncheck check_govulncheck
fi
step go-test run_tests
step simulation run_simulation
if [ "${NEREUS_SKIP_FUZZ:-0}" != 1 ]; then
	step fuzz run_fuzz
fi
stop_services

echo
echo "=== timing summary"
for i in "${!STEP_NAMES[@]}"; do
	printf '  %-16s %6ss  %s\n' "${STEP_NAMES[$i]}" "${STEP_SECS[$i]}" "${STEP_RESULTS[$i]}"
done
printf '  %-16s %6ss\n' total "$(($(date +%s) - RUN_START))"

summary=""
if [ -f "$CACHE/test-events.json" ]; then
	passed=$(grep -cE '"Action":"pass","Package":"[^"]*","Test":' "$CACHE/test-events.json" || true)
	failed=$(grep -cE '"Action":"fail","Package":"[^"]*","Test":' "$CACHE/test-events.json" || true)
	skipped=$(grep -cE '"Action":"skip","Package":"[^"]*","Test":' "$CACHE/test-events.json" || true)
	summary="tests: $passed passed, $failed failed, $skipped skipped"
fi
if [ "$FAILED" -ne 0 ]; then
	echo "RESULT: FAILED"
else
	echo "RESULT: all steps passed"
fi
# The plain count line comes last: CI reads the closing line.
echo
[ -n "$summary" ] && echo "$summary"
exit "$FAILED"
