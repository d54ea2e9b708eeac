#!/usr/bin/env bash
# Runs benchmarks/train_step_benchmark (5 repetitions) and prints the ratio of the GPT step's
# model FLOP/s to the GEMM FLOP/s measured in the same run, and the executor overhead per op.
#   scripts/bench-train-step.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} "$build/benchmarks/train_step_benchmark" \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_format=json > "$out"
python3 - "$out" <<'PY'
import json, sys
rows = {b["run_name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"}
gemm = rows["BM_Gemm/real_time"]["FLOP/s"]
step = rows["BM_GptTrainStep/real_time"]
tiny = rows["BM_TinyOps/real_time"]
print(f"GEMM [2048,256]x[256,1024] f32: {gemm/1e9:.1f} GFLOP/s")
print(f"GPT step (4 layers, h 256, 8 heads, s 256, b 8): {step['real_time']:.0f} ms, "
      f"{step['FLOP/s']/1e9:.1f} model GFLOP/s, {step['tokens/s']:.0f} tokens/s")
print(f"step / GEMM rate: {step['FLOP/s']/gemm:.2f}")
print(f"executor overhead: {tiny['sec/op']*1e9:.0f} ns per op")
PY
rm -f "$out"
