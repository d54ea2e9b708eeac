#!/usr/bin/env bash
# README command 1: install dependencies, build, then the main job:
#   1. plan: pdist-plan picks the fastest strategy that fits for a 1.3B GPT on 16 A100s (two
#      DGX nodes) and explains it;
#   2. plan and train: a small GPT is exported, planned for 4 simulated CPU ranks (threads of one
#      process; `--cluster cpu-local` measures this machine first, a few seconds) and trained on
#      the text the repository ships with the strategy file pdist-plan wrote, with a progress bar
#      (step, loss, tokens/s, ETA).
# STRATEGY=file trains with that strategy instead of the plan.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPDIST_BUILD_TESTS=OFF -DPDIST_BUILD_BENCHMARKS=OFF
cmake --build build -j2 --target pdist-export pdist-plan pdist-train
mkdir -p out
./build/pdist-plan --model gpt:layers=24,hidden=2048,heads=16,vocab=51200,seq=2048,dtype=bf16 \
  --gpus 16 --global-batch 512 --explain --top 5 -o out/gpt-1.3b-16gpu.json
./build/pdist-export gpt --layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16 -o out/gpt.pb
./build/pdist-plan out/gpt.pb --cluster cpu-local --gpus 4 -o out/plan.json
./build/pdist-train out/gpt.pb --data data/essay.txt --steps "${STEPS:-300}" --lr 3e-3 --warmup 20 \
  --strategy "${STRATEGY:-out/plan.json}" --losses-out out/losses.json
