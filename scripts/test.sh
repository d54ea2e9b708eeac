#!/usr/bin/env bash
# README command 2: install dependencies, build everything, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Tests and benchmarks on explicitly: the main job (scripts/main.sh) shares this build directory
# and turns them off, and CMake keeps cached options across runs.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPDIST_BUILD_TESTS=ON -DPDIST_BUILD_BENCHMARKS=ON
cmake --build build -j2
cd build && ctest --output-on-failure -j2 --timeout 600 --no-tests=error
