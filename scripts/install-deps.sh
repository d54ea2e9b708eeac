#!/usr/bin/env bash
# Installs every Debian 12 package pdist builds, tests and benchmarks with (run as root).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake ninja-build pkg-config python3 python3-numpy \
  libprotobuf-dev protobuf-compiler libeigen3-dev nlohmann-json3-dev libabsl-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev llvm-14-tools clang-14 libclang-rt-14-dev \
  libonnx-dev libonnx-testdata python3-onnx python3-torch libopenblas0-pthread
