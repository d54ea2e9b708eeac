#!/usr/bin/env bash
# Predicted against measured step times of 12 strategies of a small GPT on 4 in-process CPU
# ranks: calibrates this machine (pdist-plan --calibrate), then runs the engine on each
# strategy the planner priced. Run it on a quiet machine. Usage: bench-plan-cpu.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build="${1:-build}"
mkdir -p out
"$build/pdist-plan" --calibrate --gpus 4 -o out/cpu-local-4.json --quiet
"$build/benchmarks/plan_accuracy_benchmark" out/cpu-local-4.json "${2:-5}"
