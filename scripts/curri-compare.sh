#!/usr/bin/env bash
# curri-compare.sh: CURRI latency as two load generators see it, side by side,
# for one or more server variants alternated in one sitting.
#
#   scripts/curri-compare.sh LABEL=BIN[,SERVE_FLAG...] ...
#
# e.g.  scripts/curri-compare.sh new=bin/signalbox old=/tmp/signalbox-old
#       scripts/curri-compare.sh on=bin/signalbox off=bin/signalbox,-calls-topic=
#
# For each pair (PAIRS) and each variant in turn, it starts `BIN serve` as a
# new user would (embedded defaults: director, embedded broker, CALLS; plus
# the variant's flags) on loopback ports, loads the bench rule set (1,000
# rules: 800 exact + 200 regex) through the API, and drives it at RATE
# calls/s over CONNS keep-alive connections for DURATION with each tool:
#   vegeta       -workers CONNS -max-workers CONNS (open loop, CUCM's headers,
#                the same 4,096 requests: bench curri -vegeta-targets)
#   bench curri  -target (open loop; latency from the intended send time)
# alternating which tool goes first. Each tool has a warm-up of its own at
# the same rate first. Per run it prints p50/p95/p99/max, errors, and the CPU
# of the server and of the tool (from /proc), then the p95 ratios. bench
# curri times each call from its due time (the schedule); it also reports
# the p95 timed from each call's write (p95_send), as vegeta times.
#
# With TOGETHER=1 the two tools run at once against the same server, each
# at RATE/2 over CONNS/2 connections: the same server, the same moment, so
# a difference between their figures is what each tool times, not the
# server's state.
#
# Environment: RATE (15000), DURATION (20s), WARMUP (3s), PAIRS (3), CONNS
# (32), TLS (1: HTTPS with an RSA-2048 certificate, keep-alive), TOOLS
# ("vegeta bench"), BENCH_BIN (the binary whose bench loads the rules and
# drives; default bin/signalbox), OUT (a directory for the raw results).
# Needs vegeta (go install github.com/tsenart/vegeta/v12@v12.13.0), curl,
# openssl for TLS, python3. Load goes to 127.0.0.1 only and stops by itself.
set -euo pipefail

RATE=${RATE:-15000} DURATION=${DURATION:-20s} WARMUP=${WARMUP:-3s} PAIRS=${PAIRS:-3} CONNS=${CONNS:-32}
TLS=${TLS:-0} TOOLS=${TOOLS:-vegeta bench} BENCH_BIN=${BENCH_BIN:-bin/signalbox} TOGETHER=${TOGETHER:-0}
OUT=${OUT:-$(mktemp -d /tmp/curri-compare.XXXXXX)}
[ $# -gt 0 ] || { sed -n '2,30p' "$0"; exit 2; }
mkdir -p "$OUT"
for t in $TOOLS; do
	[ "$t" = vegeta ] && ! command -v vegeta >/dev/null && { echo "curri-compare: vegeta not on PATH" >&2; exit 1; }
done

CURRI=127.0.0.1:14080 API=127.0.0.1:18080 TOKEN=curri-compare
scheme=http
if [ "$TLS" = 1 ]; then
	scheme=https
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$OUT/key.pem" -out "$OUT/ca.pem" -days 2 \
		-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
fi
TARGET=$scheme://$CURRI/curri/default

cpu() { # user+system seconds of a pid (the kernel's clock ticks)
	awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$1/stat"
}

srv_pid=""
stop_server() {
	[ -n "$srv_pid" ] || return 0
	kill "$srv_pid" 2>/dev/null || true
	wait "$srv_pid" 2>/dev/null || true
	srv_pid=""
}
trap stop_server EXIT

start_server() { # bin flags...
	local bin=$1; shift
	local d=$OUT/data; rm -rf "$d"; mkdir -p "$d"
	local tlsflags=()
	[ "$TLS" = 1 ] && tlsflags=(-curri-tls-cert "$OUT/ca.pem" -curri-tls-key "$OUT/key.pem")
	"$bin" serve -data-dir "$d" -log-level warn -admin-token "$TOKEN" -curri-addr "$CURRI" -http-addr "$API" \
		-kafka-addr 127.0.0.1:19092 -ingest-addr 127.0.0.1:18090 "${tlsflags[@]}" "$@" >"$d/log" 2>&1 &
	srv_pid=$!
	for _ in $(seq 1 150); do
		curl -sf "http://$API/readyz" >/dev/null 2>&1 && break
		kill -0 "$srv_pid" 2>/dev/null || { echo "curri-compare: $bin serve exited:" >&2; cat "$d/log" >&2; exit 1; }
		sleep 0.2
	done
	local tlsdir=()
	[ "$TLS" = 1 ] && tlsdir=(-tls-dir "$OUT")
	"$BENCH_BIN" bench curri -target "$TARGET" -api "http://$API" -token "$TOKEN" "${tlsdir[@]}" \
		-vegeta-targets "$OUT/targets.json" >"$OUT/load.log" 2>&1 || { cat "$OUT/load.log" >&2; exit 1; }
}

run_vegeta() { # name -> prints one result line
	local name=$1 roots=()
	[ "$TLS" = 1 ] && roots=(-root-certs "$OUT/ca.pem")
	local args=(attack -format json -targets "$OUT/targets.json" -rate "$RATE" -workers "$CONNS" -max-workers "$CONNS"
		-connections "$CONNS" -timeout 5s "${roots[@]}")
	vegeta "${args[@]}" -duration "$WARMUP" >/dev/null
	local s0; s0=$(cpu "$srv_pid")
	vegeta "${args[@]}" -duration "$DURATION" >"$OUT/$name.bin" &
	local vp=$!
	# vegeta's CPU, read just before it exits: sampled while it runs.
	local vcpu=0 c
	while kill -0 "$vp" 2>/dev/null; do c=$(cpu "$vp" 2>/dev/null) && vcpu=$c; sleep 0.2; done
	wait "$vp"
	local s1; s1=$(cpu "$srv_pid")
	vegeta report -type json "$OUT/$name.bin" >"$OUT/$name.json"
	python3 - "$OUT/$name.json" "$vcpu" "$s0" "$s1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latencies"]; ms = lambda ns: ns / 1e6
err = sum(n for c, n in r["status_codes"].items() if c != "200")
print("p50 %.3f p95 %.3f p99 %.3f max %.3f errors %d gen_cpu %.2f srv_cpu %.2f" % (
    ms(l["50th"]), ms(l["95th"]), ms(l["99th"]), ms(l["max"]), err, float(sys.argv[2]), float(sys.argv[4]) - float(sys.argv[3])))
PY
}

run_bench() { # name -> prints one result line
	local name=$1 tlsdir=()
	[ "$TLS" = 1 ] && tlsdir=(-tls-dir "$OUT")
	local s0; s0=$(cpu "$srv_pid")
	"$BENCH_BIN" bench curri -target "$TARGET" "${tlsdir[@]}" -rate "$RATE" -conns "$CONNS" -duration "$DURATION" \
		-warmup "$WARMUP" -json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
	local s1; s1=$(cpu "$srv_pid")
	python3 - "$OUT/$name.json" "$s0" "$s1" "$WARMUP" "$DURATION" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); l = r["latency_us"]; ms = lambda us: us / 1e3
err = r["transport_errors"] + r["non_200"] + r["unsent"]
# The server's CPU was read around warm-up and window; scale to the window.
w, d = float(sys.argv[4].rstrip("s")), float(sys.argv[5].rstrip("s"))
print("p50 %.3f p95 %.3f p99 %.3f max %.3f errors %d gen_cpu %.2f srv_cpu %.2f p95_send %.3f" % (
    ms(l["p50"]), ms(l["p95"]), ms(l["p99"]), ms(l["max"]), err, r["generator_cpu_seconds"],
    (float(sys.argv[3]) - float(sys.argv[2])) * d / (w + d), ms(r.get("latency_from_send_us", l)["p95"])))
PY
}

echo "# $(date -u +%FT%TZ) $(nproc) cores; $RATE calls/s, $CONNS conns, $DURATION (+$WARMUP warm-up), $scheme; raw results in $OUT"
printf '%-10s %-5s %-7s %s\n' variant pair tool result
results=$OUT/results.txt; : >"$results"
for pair in $(seq 1 "$PAIRS"); do
	for v in "$@"; do
		label=${v%%=*} spec=${v#*=}
		IFS=, read -r -a parts <<<"$spec"
		start_server "${parts[@]}"
		tools=($TOOLS)
		[ $((pair % 2)) -eq 0 ] && tools=($(printf '%s\n' "${tools[@]}" | tac))
		if [ "$TOGETHER" = 1 ]; then
			pids=()
			for t in "${tools[@]}"; do
				(RATE=$((RATE / 2)) CONNS=$((CONNS / 2)) "run_$t" "$label-$pair-$t" >"$OUT/$label-$pair-$t.line") &
				pids+=($!)
			done
			wait "${pids[@]}"
			for t in "${tools[@]}"; do
				printf '%-10s %-5s %-7s %s\n' "$label" "$pair" "$t" "$(cat "$OUT/$label-$pair-$t.line")" | tee -a "$results"
			done
		else
			for t in "${tools[@]}"; do
				line=$("run_$t" "$label-$pair-$t")
				printf '%-10s %-5s %-7s %s\n' "$label" "$pair" "$t" "$line" | tee -a "$results"
			done
		fi
		stop_server
	done
done
python3 - "$results" <<'PY'
import sys, collections, statistics
p95 = collections.defaultdict(list)
sent = collections.defaultdict(list)  # bench's p95 timed from each call's write
for line in open(sys.argv[1]):
    f = line.split(); kv = dict(zip(f[3::2], f[4::2]))
    p95[(f[0], f[2])].append(float(kv["p95"]))
    if "p95_send" in kv:
        sent[f[0]].append(float(kv["p95_send"]))
print("\np95 (ms) per variant and tool: median [runs]")
for (v, t), xs in p95.items():
    print("  %-10s %-7s %.3f  %s" % (v, t, statistics.median(xs), " ".join("%.3f" % x for x in xs)))
for v, xs in sent.items():
    print("  %-10s %-7s %.3f  %s  (bench timed from each call's write)" % (v, "bench@w", statistics.median(xs), " ".join("%.3f" % x for x in xs)))
    if (v, "vegeta") in p95:
        print("  %s: vegeta/bench-from-write p95 ratio, median of pairs %.2f" % (v,
              statistics.median(y / x for x, y in zip(xs, p95[(v, "vegeta")]) if x > 0)))
variants = list(dict.fromkeys(v for v, _ in p95)); tools = sorted({t for _, t in p95})
if len(tools) == 2:
    for v in variants:
        a, b = p95[(v, tools[0])], p95[(v, tools[1])]
        print("  %s: %s/%s p95 ratio, median of pairs %.2f" % (v, tools[1], tools[0],
              statistics.median(y / x for x, y in zip(a, b) if x > 0)))
if len(variants) >= 2:
    base = variants[0]
    for v in variants[1:]:
        for t in tools:
            a, b = p95[(base, t)], p95[(v, t)]
            print("  %s: %s/%s p95 ratio, median of pairs %.2f" % (t, v, base,
                  statistics.median(y / x for x, y in zip(a, b) if x > 0)))
PY
