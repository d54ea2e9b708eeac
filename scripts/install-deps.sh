#!/usr/bin/env bash
# Installs every Debian 12 package pdist builds, tests and benchmarks with (run as root).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake ninja-build pkg-config python3 python3-numpy python3-pip \
  libprotobuf-dev protobuf-compiler libeigen3-dev nlohmann-json3-dev libabsl-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev llvm-14-tools clang-14 libclang-rt-14-dev \
  libonnx-dev libonnx-testdata python3-onnx python3-torch libopenblas0-pthread
# The cuDNN frontend's headers (PyPI; used only where the CUDA toolkit is): without them the CUDA
# backend still builds, its attention as GEMMs, so a failed download is a warning, not a stop.
"$(dirname "$0")/fetch-cudnn-frontend.sh" ||
  echo "install-deps: the cuDNN frontend could not be fetched; the CUDA backend builds without cuDNN attention" >&2
