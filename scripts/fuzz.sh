#!/usr/bin/env bash
# Builds the model-loader fuzzer with clang (libFuzzer + ASan + UBSan) in build-fuzz and runs it
# for a fixed time on a seed corpus made from the lit test programs.
#
#   scripts/fuzz.sh          # 60 s
#   scripts/fuzz.sh 180      # 3 min; crashes land in build-fuzz/artifacts/
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${1:-60}"
JOBS="${JOBS:-1}"

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPDIST_FUZZ=ON \
  -DPDIST_BUILD_TESTS=OFF -DPDIST_BUILD_BENCHMARKS=OFF -DPDIST_OPENMP=OFF >/dev/null
cmake --build build-fuzz -j"$JOBS" --target fuzz_model_loader fuzz_seed_writer

corpus=build-fuzz/corpus
artifacts=build-fuzz/artifacts/
mkdir -p "$corpus" "$artifacts"
./build-fuzz/tests/fuzz/fuzz_seed_writer "$corpus" tests/lit/*.pdir
# UBSan reports are printed, not fatal, so one finding does not end the run; grep the log.
log=build-fuzz/fuzz.log
set +e
./build-fuzz/tests/fuzz/fuzz_model_loader "$corpus" -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=10 \
  -artifact_prefix="$artifacts" -print_final_stats=1 2>&1 | tee "$log" | grep -E "^#[0-9]+[[:space:]]+(INITED|DONE|pulse)|ERROR|runtime error|stat::"
status=${PIPESTATUS[0]}
set -e
echo "fuzz_model_loader exit status: $status (log: $log, corpus: $corpus, crashes: $artifacts)"
if grep -q "runtime error" "$log"; then
  echo "UBSan findings:"; grep "runtime error" "$log" | sort | uniq -c
fi
exit "$status"
