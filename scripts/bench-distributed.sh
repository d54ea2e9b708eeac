#!/usr/bin/env bash
# Runs benchmarks/distributed_step_benchmark (5 repetitions) and prints, for one rank, dp2 and
# mp2 on in-process ranks: the median step time, its ratio to one rank, the communication time
# per step (rank 0, without overlap) and the share of it the communication stream hides.
#   scripts/bench-distributed.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} "$build/benchmarks/distributed_step_benchmark" \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_format=json > "$out"
python3 - "$out" <<'PY'
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    args = dict(part.split(":") for part in b["run_name"].split("/")[1:] if ":" in part)
    rows[(int(args["layout"]), int(args["overlap"]))] = b
one = rows[(0, 1)]["real_time"]
print("| layout | overlap | step (ms) | / 1 rank | comm per step (ms) | hidden by overlap |")
print("|---|---|---|---|---|---|")
print(f"| 1 rank | - | {one:.1f} | 1.00 | 0 | - |")
for layout, name in ((1, "dp2"), (2, "mp2")):
    off, on = rows[(layout, 0)], rows[(layout, 1)]
    comm = off["comm_s"] * 1e3
    hidden = (off["real_time"] - on["real_time"]) / comm if comm > 0 else 0
    for overlap, row in ((0, off), (1, on)):
        extra = f"{hidden:.0%}" if overlap else "-"
        print(f"| {name} | {'on' if overlap else 'off'} | {row['real_time']:.1f} | {row['real_time']/one:.2f} | {comm:.1f} | {extra} |")
PY
rm -f "$out"
