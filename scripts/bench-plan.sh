#!/usr/bin/env bash
# Search time of pdist-plan on this machine: a 1.3B GPT for 16 A100s and GPT-3 175B for 1024,
# 5 runs each; prints the median wall time and the candidates priced. Usage: bench-plan.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
run() {
  local name="$1"; shift
  local times=()
  for _ in 1 2 3 4 5; do
    local start end
    start=$(date +%s%N)
    out=$("$build/pdist-plan" "$@" --quiet)
    end=$(date +%s%N)
    times+=("$(( (end - start) / 1000000 ))")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
  echo "$name: median ${median} ms of 5; $(echo "$out" | grep -E '^searched')"
  echo "  $(echo "$out" | grep -E '^plan:')"
}
run "GPT 1.3B, 16 A100" --model gpt:layers=24,hidden=2048,heads=16,vocab=51200,seq=2048,dtype=bf16 \
  --gpus 16 --global-batch 512
run "GPT-3 175B, 1024 A100" --model gpt:layers=96,hidden=12288,heads=96,vocab=51200,seq=2048,dtype=bf16 \
  --gpus 1024 --global-batch 1536
