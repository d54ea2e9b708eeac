#!/usr/bin/env bash
# README command 1: install dependencies, build, export a small GPT and train it on the text the
# repository ships on 4 simulated CPU ranks (data × tensor parallel, 2 × 2, threads of one
# process), with a progress bar (step, loss, tokens/s, ETA). STRATEGY picks another strategy file.
# (Planning the strategy with pdist-plan comes with the planner, issue 6.)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPDIST_BUILD_TESTS=OFF -DPDIST_BUILD_BENCHMARKS=OFF
cmake --build build -j2 --target pdist-export pdist-train
mkdir -p out
./build/pdist-export gpt --layers 2 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16 -o out/gpt.pb
./build/pdist-train out/gpt.pb --data data/essay.txt --steps "${STEPS:-300}" --lr 3e-3 --warmup 20 \
  --strategy "${STRATEGY:-examples/strategies/dp2_mp2.json}" --losses-out out/losses.json
