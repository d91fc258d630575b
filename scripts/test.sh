#!/usr/bin/env bash
# make test: every test of the repository, on a fresh Debian machine.
#
#   1. scripts/test-deps.sh installs and starts the outside tools
#      (PostgreSQL, kcat, tshark, Chromium, Prometheus, net-snmp) in the
#      background while Go compiles; its log is .test-deps.log.
#   2. gofmt, and no product file over 700 lines.
#   3. bin/signalbox, built once for the tests that run the binary
#      (SIGNALBOX_TEST_BIN), and go vet ./... over the same (non-race)
#      compilation, in the background (its result counts at the end).
#   4. The pass without the race detector, in the background: the
#      packages whose tests drive the binary as a user does (E2E_PKGS:
#      internal/app, internal/docs, internal/bench — their timing is across
#      processes, and the binary they drive is built without the race
#      detector, as shipped; two tests at a time, as their timing claims
#      are made for a busy box, not a starved one), and, in the packages
#      that have them, the
#      allocation tests, the director's multi-process node tests and the
#      scale tests that spend their time in an outside tool (-run
#      'Alloc|^TestNodes|^TestScale': the race detector would distort them
#      or add nothing; they build only without it). It mostly waits on its
#      processes.
#   5. Every other package's tests with the race detector, against both
#      store backends, at the same time: -vet=off since vet has run, and
#      -count=1: every test runs, none is taken from the test cache.
#   6. Both passes' results through scripts/testreport: each package's
#      result, the output of every failed test, the slowest tests; the whole
#      runs are in .test-race.json, .test-e2e.json and .test-norace.json
#      (go test -json).
#
# Each phase prints its start, in seconds from the beginning. No test waits
# without a bound: each package has a 12-minute timeout, and each scenario's
# waits fail it well before, with what they waited for and the logs of the
# processes it started (which die with it).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
start=$SECONDS
phase() { printf '== make test: %s (at %ds)\n' "$*" $((SECONDS - start)); }

phase "outside tools (scripts/test-deps.sh, in the background)"
./scripts/test-deps.sh > .test-deps.out 2> .test-deps.log &
deps=$!

phase "gofmt and file lengths"
gofmt_out=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$gofmt_out" ]; then
  echo "gofmt needed:"; echo "$gofmt_out"; exit 1
fi
long=$(git ls-files '*.go' | grep -v '_test\.go$' | xargs wc -l | awk '$2 != "total" && $1 > 700')
if [ -n "$long" ]; then
  echo "product files over 700 lines (split each along a job):"; echo "$long"; exit 1
fi

phase "bin/signalbox"
$GO build -o bin/signalbox ./cmd/signalbox
export SIGNALBOX_TEST_BIN="$PWD/bin/signalbox"
phase "go vet ./..., in the background"
$GO vet ./... > .test-vet.log 2>&1 &
vet=$!

e2e_pkgs="./internal/app ./internal/docs ./internal/bench"
norace_run='Alloc|^TestNodes|^TestScale'
norace_pkgs=$(git grep -lE '^func (Test[A-Za-z0-9_]*Alloc|TestNodes|TestScale)' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|' |
  grep -vxF -f <(tr ' ' '\n' <<< "$e2e_pkgs") || true)
race_pkgs=$($GO list ./... | sed "s|^$($GO list -m)|.|" | grep -vxF -f <(tr ' ' '\n' <<< "$e2e_pkgs"))

if ! wait $deps; then
  cat .test-deps.log >&2
  echo "make test: scripts/test-deps.sh failed (its messages are above)" >&2
  exit 1
fi
export SIGNALBOX_TEST_POSTGRES_DSN="$(tail -1 .test-deps.out)"

$GO build -o bin/testreport ./scripts/testreport

phase "pass without the race detector, in the background:" $e2e_pkgs "and -run '$norace_run'" $norace_pkgs
$GO test -count=1 -vet=off -timeout 12m -json $e2e_pkgs > .test-e2e.json 2>&1 &
e2e=$!
$GO test -count=1 -vet=off -timeout 12m -parallel 4 -json -run "$norace_run" $norace_pkgs > .test-norace.json 2>&1 &
norace=$!

phase "go test -race, every other package"
race_rc=0
$GO test -race -count=1 -vet=off -timeout 12m -json $race_pkgs 2>&1 | tee .test-race.json | bin/testreport race || race_rc=$?

norace_rc=0
wait $e2e || norace_rc=$?
wait $norace || norace_rc=$?
phase "pass without the race detector ended"
cat .test-e2e.json .test-norace.json | bin/testreport norace || norace_rc=$?

vet_rc=0
wait $vet || vet_rc=$?
if [ $vet_rc -ne 0 ]; then
  echo "go vet ./...:"; cat .test-vet.log
fi

phase "done: race pass exit $race_rc, pass without it exit $norace_rc, go vet exit $vet_rc"
[ $race_rc -eq 0 ] && [ $norace_rc -eq 0 ] && [ $vet_rc -eq 0 ]
