#!/usr/bin/env bash
# The GPU check of issue 15, in two halves, because the GPU machine has the CUDA toolkit but none
# of pdist's other dependencies:
#
#   scripts/device-check.sh bundle [BUILD_DIR] [OUT_DIR]   # here: a CUDA build's test binary, the
#                                                         # tools, and the shared libraries they need
#   scripts/device-check.sh run [BUNDLE_DIR] [CHECKS]      # there, from the repository root
#
# `run` checks, each under its own time limit; CHECKS is a comma list (default a,b,c,d). Within
# a 10-minute command: `run B a,b,d` (at most 6.5 minutes), then `run B c` (at most 9):
#  (a) every CUDA kernel against the CPU kernel on the same inputs (CudaKernelTest: f32/f64 within
#      1e-5 relative, bf16 within one rounding, casts and dropout masks exact), and the NCCL
#      communicator on one rank (NcclCommunicatorTest); a skip is a failure;
#  (b) ten AdamW steps of the README's GPT through pdist-train on the GPU against the CPU: f32
#      losses within 1e-4 relative;
#  (c) a 1.3B GPT (24 x 2048, 16 heads, vocab 51200, seq 2048), bf16, one GPU: micro-batch 16, or
#      8 if 16 runs out of memory; tokens/s, TFLOP/s and MFU against the H200's bf16 dense peak
#      (989 TFLOP/s), next to the same model in PyTorch eager (benchmarks/torch_gpt.py);
#  (d) the README GPT's step timeline on the GPU (Chrome trace) into $OUT/timeline.
# Results go to $OUT (device-check.log and the files above); copy the numbers to docs/benchmarks.md.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
readme_gpt=(--layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16)
h200_bf16_peak=989
case "$mode" in
  bundle)
    set -e
    build=${2:-build}
    out=${3:-device-bundle}
    if ! grep -q "PDIST_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
      echo "device-check: $build is not a CUDA build (configure with -DPDIST_WITH_CUDA=ON, as scripts/test.sh does where nvcc is)" >&2
      exit 2
    fi
    bins=("$build/tests/executor_tests" "$build/pdist-train" "$build/pdist-export")
    for bin in "${bins[@]}"; do
      [ -x "$bin" ] || { echo "device-check: $bin not built (cmake --build $build --target executor_tests pdist-train pdist-export)" >&2; exit 2; }
    done
    rm -rf "$out" && mkdir -p "$out/lib"
    cp "${bins[@]}" "$out/"
    # Every shared library but the C runtime's and CUDA's own (the GPU machine has those).
    for bin in "${bins[@]}"; do ldd "$bin"; done | awk '/=> \// {print $3}' | sort -u |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda[^/]*|libcudart[^/]*|libnccl[^/]*|libcublas[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$out/lib/"; done
    du -sh "$out"
    echo "device-check: bundle in $out; carry it and run: scripts/device-check.sh run $out"
    ;;
  run)
    dir=${2:-device-bundle}
    checks=${3:-a,b,c,d}
    if ! [[ $checks =~ ^[a-d](,[a-d])*$ ]]; then
      echo "device-check: checks '$checks': expected a comma list of a, b, c, d (e.g. a,b,d)" >&2
      exit 2
    fi
    wants() { [[ ",$checks," == *",$1,"* ]]; }
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
      echo "device-check: no NVIDIA GPU here (nvidia-smi finds none): nothing to check" >&2
      exit 2
    fi
    for bin in executor_tests pdist-train pdist-export; do
      [ -x "$dir/$bin" ] || { echo "device-check: no $dir/$bin (make it with: scripts/device-check.sh bundle)" >&2; exit 2; }
    done
    out=${OUT:-device-check-out}
    mkdir -p "$out"
    log=$out/device-check.log
    exec > >(tee "$log") 2>&1
    nvidia-smi -L
    # NCCL is not carried (200 MB): the machine's, from the CUDA toolkit or PyTorch's wheel.
    nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
    export LD_LIBRARY_PATH="$dir/lib:/usr/local/cuda/lib64${nccl_lib:+:$nccl_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    failed=()

    if wants a; then
    echo "== (a) every CUDA kernel against the CPU's"
    timeout 150 "$dir/executor_tests" --gtest_filter='CudaKernel*:CudaKernelList*:NcclCommunicator*:Backend*:Device*' >"$out/kernels.log" 2>&1
    a=$?
    tail -n 40 "$out/kernels.log"
    grep -q '^\[  SKIPPED \]' "$out/kernels.log" && { echo "device-check: a comparison was skipped on a GPU machine"; a=1; }
    [ $a = 0 ] || failed+=("(a)")
    fi

    if wants b || wants d; then
      timeout 30 "$dir/pdist-export" gpt "${readme_gpt[@]}" -o "$out/readme-gpt.pb" || failed+=("(export)")
    fi
    if wants b; then
    echo "== (b) ten AdamW steps of the README's GPT: GPU against CPU"
    b=0
    for device in cpu cuda; do
      timeout 90 "$dir/pdist-train" "$out/readme-gpt.pb" --data data/essay.txt --steps 10 --lr 3e-3 --quiet \
        --device $device --losses-out "$out/losses-$device.json" || b=1
    done
    if [ $b = 0 ]; then
      python3 - "$out/losses-cpu.json" "$out/losses-cuda.json" <<'PY' || b=1
import json, sys
cpu, gpu = (json.load(open(f))["losses"] for f in sys.argv[1:3])
worst = max(abs(g - c) / abs(c) for c, g in zip(cpu, gpu))
print("cpu ", " ".join(f"{x:.6f}" for x in cpu))
print("cuda", " ".join(f"{x:.6f}" for x in gpu))
print(f"largest relative difference {worst:.2e} (limit 1e-4)")
sys.exit(0 if len(cpu) == len(gpu) == 10 and worst <= 1e-4 else 1)
PY
    fi
    [ $b = 0 ] || failed+=("(b)")
    fi

    if wants c; then
    echo "== (c) 1.3B GPT, bf16, one GPU: pdist against PyTorch eager"
    big=(--layers 24 --hidden 2048 --heads 16 --vocab 51200 --seq 2048)
    c=1
    for batch in 16 8; do
      timeout 20 "$dir/pdist-export" gpt "${big[@]}" --batch $batch --dtype bf16 -o "$out/gpt-1.3b.pb" || break
      timeout 200 "$dir/pdist-train" "$out/gpt-1.3b.pb" --data data/essay.txt --steps 6 --device cuda --quiet \
        --peak-tflops $h200_bf16_peak 2>&1 | tee "$out/pdist-1.3b-b$batch.log"
      if [ "${PIPESTATUS[0]}" = 0 ]; then
        c=0
        timeout 120 python3 benchmarks/torch_gpt.py "${big[@]}" --batch $batch --steps 6 --peak-tflops $h200_bf16_peak ||
          echo "device-check: the PyTorch reference did not run (exit $?; 3: out of memory)"
        break
      fi
      # Only running out of memory earns a smaller batch; any other failure is the answer.
      grep -qiE "out of memory|RESOURCE_EXHAUSTED" "$out/pdist-1.3b-b$batch.log" || break
      echo "device-check: batch $batch does not fit; trying a smaller one"
    done
    rm -f "$out/gpt-1.3b.pb"
    [ $c = 0 ] || failed+=("(c)")
    fi

    if wants d; then
    echo "== (d) the README GPT's step timeline on the GPU"
    timeout 60 "$dir/pdist-train" "$out/readme-gpt.pb" --data data/essay.txt --steps 3 --quiet --device cuda \
      --timeline "$out/timeline" && ls "$out/timeline" || failed+=("(d)")
    fi

    if [ ${#failed[@]} = 0 ]; then echo "device-check: passed"; exit 0; fi
    echo "device-check: FAILED: ${failed[*]}"
    exit 1
    ;;
  -h|--help)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
