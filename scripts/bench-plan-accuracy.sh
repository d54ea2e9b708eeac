#!/usr/bin/env bash
# The cost model against published end-to-end runs (benchmarks/data/published_runs*.tsv: A100 and
# H100, sources in docs/benchmarks.md): every row priced with every knob fixed as published, then
# each GPU type's efficiencies fitted leave-one-out (each row predicted by constants fitted on the
# other rows of its GPU type).
# Deterministic: it prices, it runs nothing. Usage: bench-plan-accuracy.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
here="$(cd "$(dirname "$0")/.." && pwd)"
"$build/benchmarks/published_runs_benchmark" "$here/benchmarks/data/published_runs.tsv" \
  "$here/benchmarks/data/published_runs_h100.tsv" "$here/benchmarks/data/published_runs_a100_fsdp.tsv" \
  "$here/benchmarks/data/published_runs_h100_nemo.tsv"
