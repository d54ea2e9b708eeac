#!/usr/bin/env bash
# Predicted against measured step times of a small GPT on 4 in-process CPU ranks: 12 parallel
# strategies, then 8 of ZeRO (hybrid too) and recompute in f32 and in bf16
# (28 in all): calibrates this machine (pdist-plan --calibrate), then runs the engine on each
# strategy the planner priced. Run it on a quiet machine. Usage: bench-plan-cpu.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build="${1:-build}"
mkdir -p out
"$build/pdist-plan" --calibrate --gpus 4 -o out/cpu-local-4.json --quiet
"$build/benchmarks/plan_accuracy_benchmark" out/cpu-local-4.json "${2:-5}"
