#!/usr/bin/env bash
# README command 2: install dependencies, build everything, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Tests and benchmarks on explicitly: the main job (scripts/main.sh) shares this build directory
# and turns them off, and CMake keeps cached options across runs.
# The CUDA backend compiles and links wherever the toolkit is (the project's machines carry it at
# /usr/local/cuda), so a change that breaks the GPU build fails here even with no GPU to run it;
# one architecture (sm_90, H100/H200) keeps the build short. PDIST_CUDA=OFF skips it.
CUDA_FLAGS=()
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ "${PDIST_CUDA:-ON}" = ON ] && [ -x "$NVCC" ]; then
  CUDA_FLAGS=(-DPDIST_WITH_CUDA=ON "-DCMAKE_CUDA_COMPILER=$NVCC" "-DCMAKE_CUDA_ARCHITECTURES=${PDIST_CUDA_ARCHITECTURES:-90}")
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPDIST_BUILD_TESTS=ON -DPDIST_BUILD_BENCHMARKS=ON "${CUDA_FLAGS[@]}"
cmake --build build -j2
cd build && ctest --output-on-failure -j2 --timeout 600 --no-tests=error
