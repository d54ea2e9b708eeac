#!/usr/bin/env bash
# Runs benchmarks/pipeline_schedule_benchmark (5 repetitions) and prints, per schedule on two
# in-process stages: the median step time, the peak memory and the activations in flight per
# stage, and the measured bubble of each stage against the simulator's.
#   scripts/bench-pipeline.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} "$build/benchmarks/pipeline_schedule_benchmark" \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_format=json > "$out"
python3 - "$out" <<'PY'
import json, sys
print("| schedule | step (ms) | peak stage 0 / 1 (MiB) | activations stage 0 / 1 (MiB) | bubble stage 0 / 1 | simulated |")
print("|---|---|---|---|---|---|")
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    print(f"| {b.get('label', '?')} | {b['real_time']:.1f} | {b['peak_0']:.2f} / {b['peak_1']:.2f} | "
          f"{b['act_0']:.2f} / {b['act_1']:.2f} | {b['bubble_0']:.3f} / {b['bubble_1']:.3f} | {b['bubble_theory']:.3f} |")
PY
rm -f "$out"
