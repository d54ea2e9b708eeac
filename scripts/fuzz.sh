#!/usr/bin/env bash
# Builds every libFuzzer target with clang (libFuzzer + ASan + UBSan) in build-fuzz and runs each
# on its seed corpus: the model loader (model.pb and textual IR, seeds from the lit programs), the
# JSON readers (bounded parser, strategy, cluster, pdist-spmd requests; seeds from examples/),
# the checkpoint decoder, the sharded-checkpoint index, the token-file decoder (hand-made seeds
# below) and the ONNX importer (seeds: ONNX's node test models, from libonnx-testdata).
#
#   scripts/fuzz.sh                # 60 s per fuzzer
#   scripts/fuzz.sh 180            # 3 min per fuzzer; crashes land in build-fuzz/artifacts/
#   scripts/fuzz.sh --runs 3000    # a fixed number of executions per fuzzer (ctest `fuzz.readers`)
# Exits non-zero on a crash, a sanitizer report (UBSan's included) or a violated round trip.
set -euo pipefail
cd "$(dirname "$0")/.."
limit="-max_total_time=${1:-60}"
if [ "${1:-}" = "--runs" ]; then limit="-runs=${2:?--runs needs a count}"; fi
build="${PDIST_FUZZ_BUILD:-build-fuzz}"

mkdir -p "$build"
# The build's output goes to a log, shown when it fails.
if ! { CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPDIST_FUZZ=ON \
         -DPDIST_BUILD_TESTS=OFF -DPDIST_BUILD_BENCHMARKS=OFF -DPDIST_OPENMP=OFF -DPDIST_WITH_GLOO=OFF &&
       cmake --build "$build" -j"${JOBS:-2}" --target fuzz_model_loader fuzz_seed_writer fuzz_json_readers \
         fuzz_checkpoint fuzz_shard_index fuzz_token_file fuzz_onnx_import; } > "$build/build.log" 2>&1; then
  echo "scripts/fuzz.sh: building the fuzzers failed:"; tail -40 "$build/build.log"; exit 1
fi

artifacts="$build/artifacts/"
mkdir -p "$artifacts" "$build/corpus/model" "$build/corpus/json" "$build/corpus/checkpoint" "$build/corpus/tokens" \
  "$build/corpus/index" "$build/corpus/onnx"
"$build/tests/fuzz/fuzz_seed_writer" "$build/corpus/model" tests/lit/*.pdir >/dev/null
# JSON seeds: the first byte picks the reader (0: bounded parser, 1: strategy, 2: cluster,
# 3: pdist-spmd requests).
for f in examples/strategies/*.json; do
  { printf '\001'; cat "$f"; } > "$build/corpus/json/strategy-$(basename "$f")"
  { printf '\000'; cat "$f"; } > "$build/corpus/json/json-$(basename "$f")"
done
for f in examples/clusters/*.json; do { printf '\002'; cat "$f"; } > "$build/corpus/json/cluster-$(basename "$f")"; done
{ printf '\003'; cat tests/tools/spmd_requests.json; } > "$build/corpus/json/spmd-requests.json"
# Checkpoint seed: version 1 (no checksums), step 3, one tensor 'w' f32[2] = {1.5, 2.5}.
printf 'PDISTCKP\001\000\000\000\003\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000' \
  > "$build/corpus/checkpoint/seed.ckpt"
printf '\001\000\000\000w\000\001\000\000\000\002\000\000\000\000\000\000\000\000\000\300\077\000\000\040\100' \
  >> "$build/corpus/checkpoint/seed.ckpt"
# Index seed: one tensor in two pieces over two files, the second with its block's byte range.
cat > "$build/corpus/index/seed.json" <<'JSON'
{"format": "pdist-sharded-checkpoint", "version": 1, "step": 3, "files": ["rank0.ckpt", "rank1.ckpt"],
 "tensors": {"w": {"dtype": "f32", "shape": [4, 2], "dist_attr": "{mesh: [2] [dp], dims_mapping: [0,-1]}",
                   "pieces": [{"file": 0, "offsets": [0, 0], "sizes": [2, 2]}, {"file": 1, "offsets": [2, 0], "sizes": [2, 2], "bytes": [36, 54]}]}}}
JSON
# Token-file seeds (the first byte picks the format: 0 u16, 1 u32, 2 pdtok, 3 text): a PDTOK file
# of width 2 holding 1, 2, 3, and the first bytes of the essay as text.
printf '\002PDTOK\000\000\000\001\000\000\000\002\000\000\000\001\000\002\000\003\000' > "$build/corpus/tokens/pdtok"
{ printf '\003'; head -c 256 data/essay.txt; } > "$build/corpus/tokens/text"

# ONNX seeds (the first byte picks the loss: 0 none, 1 cross_entropy, 2 mse): the node test
# models of the operators pdist imports.
for op in matmul gemm add layer_normalization reshape transpose softmax concat split slice squeeze unsqueeze \
          gather cast reduce_mean dropout constantofshape; do
  for f in /usr/share/libonnx-testdata/data/node/test_${op}*/model.onnx; do
    [ -f "$f" ] || continue
    { printf '\000'; cat "$f"; } > "$build/corpus/onnx/$(basename "$(dirname "$f")").onnx"
  done
done

status=0
for fuzzer in model_loader json_readers checkpoint shard_index token_file onnx_import; do
  case "$fuzzer" in
    model_loader) corpus="$build/corpus/model" ;;
    json_readers) corpus="$build/corpus/json" ;;
    checkpoint) corpus="$build/corpus/checkpoint" ;;
    shard_index) corpus="$build/corpus/index" ;;
    token_file) corpus="$build/corpus/tokens" ;;
    onnx_import) corpus="$build/corpus/onnx" ;;
  esac
  log="$build/fuzz_$fuzzer.log"
  set +e
  "$build/tests/fuzz/fuzz_$fuzzer" "$corpus" "$limit" -max_len=16384 -timeout=10 -seed=1 \
    -artifact_prefix="$artifacts" -print_final_stats=1 > "$log" 2>&1
  code=$?
  set -e
  runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
  findings=$(grep -c "runtime error\|ERROR: \|property violated" "$log" || true)
  echo "fuzz_$fuzzer: $runs executions, exit status $code, $findings findings (log: $log)"
  if [ "$code" != 0 ] || [ "$findings" != 0 ]; then
    grep -E "runtime error|ERROR: |property violated" "$log" | sort | uniq -c | head -20
    status=1
  fi
done
exit "$status"
