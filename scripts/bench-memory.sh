#!/usr/bin/env bash
# Predicted against measured memory per rank of 45 strategies (dp/mp/pp × ZeRO 0-3 × recompute
# none/selective/full) of a small GPT on 4 in-process CPU ranks. Usage: bench-memory.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
"$build/benchmarks/memory_benchmark"
