#!/usr/bin/env bash
# The GPU check of issue 15, in two halves, because the GPU machine has the CUDA toolkit but none
# of pdist's other dependencies:
#
#   scripts/device-check.sh bundle [BUILD_DIR] [OUT_DIR]   # here: a CUDA build's test binary, the
#                                                         # tools, and the shared libraries they need
#   scripts/device-check.sh run [BUNDLE_DIR] [CHECKS]      # there, from the repository root
#
# `run` checks, each under its own time limit; CHECKS is a comma list (default a,b,c,d,e). a-d
# took 95 s on an H200 (2026-12-04, micro-batch 8; docs/benchmarks.md); the limits add up to 10
# minutes at most for a,b,d and 9 for c (C_SECONDS=120 keeps c's two pdist runs and PyTorch's
# within 7):
#  (a) every CUDA kernel against the CPU kernel on the same inputs (CudaKernelTest: f32/f64 within
#      1e-5 relative, bf16 within one rounding (two for attention), casts and dropout masks
#      exact), and the NCCL communicator on one rank (NcclCommunicatorTest); a skipped
#      comparison is a failure;
#  (b) ten AdamW steps of the README's GPT through pdist-train on the GPU against the CPU: f32
#      losses within 1e-4 relative;
#  (c) a 1.3B GPT (24 x 2048, 16 heads, vocab 51200, seq 2048), bf16, one GPU: micro-batch 16, or
#      8 if 16 runs out of memory; tokens/s, TFLOP/s and MFU against the H200's bf16 dense peak
#      (989 TFLOP/s), next to the same model in PyTorch eager (benchmarks/torch_gpt.py);
#  (d) the README GPT's step timeline on the GPU (Chrome trace) into $OUT/timeline;
#  (e) with two GPUs or more: ten AdamW steps of the README GPT on two pipeline stages (pp 2, VPP 2)
#      over NCCL, a process per GPU (pdist-run --backend nccl), against the same strategy on the
#      CPU over inproc-rendezvous (NCCL's point-to-point semantics): f32 losses within 1e-4
#      relative. With one GPU it says it did not run (NCCL needs a GPU per rank): not a pass.
# Check (c)'s knobs, for a first look inside a short lease: C_BATCHES (micro-batches to try, in
# order; default "16 8"), C_STEPS (default 6), C_SECONDS (pdist-train's limit; default 200),
# C_PROFILE=1 (then a second, 3-step run times every kernel, the stream synchronised after each:
# milliseconds per op type; its losses must equal the timed run's); C_ATTENTION=gemm (or cudnn:
# PDIST_CUDA_ATTENTION for pdist's runs; by default cuDNN's fused attention where it loads, and
# where it ran, the same run again with the GEMM form for comparison); C_UNFUSED=1 (the same run
# again with --fusions none: no merged updates, no GEMM epilogues — the fusions' gain in one lease).
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
    bins=("$build/tests/executor_tests" "$build/pdist-train" "$build/pdist-export" "$build/pdist-run")
    for bin in "${bins[@]}"; do
      [ -x "$bin" ] || { echo "device-check: $bin not built (cmake --build $build --target executor_tests pdist-train pdist-export pdist-run)" >&2; exit 2; }
    done
    rm -rf "$out" && mkdir -p "$out/lib"
    cp "${bins[@]}" "$out/"
    # Every shared library but the C runtime's and CUDA's own (the GPU machine has those). The
    # C++ runtime goes to lib/fallback: `run` uses it only where the machine's own is older.
    mkdir -p "$out/lib/fallback"
    for bin in "${bins[@]}"; do ldd "$bin"; done | awk '/=> \// {print $3}' | sort -u |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda[^/]*|libcudart[^/]*|libnccl[^/]*|libcublas[^/]*)\.so' |
      while read -r lib; do
        case "$lib" in
          */libstdc++.so*|*/libgcc_s.so*) cp -L "$lib" "$out/lib/fallback/" ;;
          *) cp -L "$lib" "$out/lib/" ;;
        esac
      done
    du -sh "$out"
    echo "device-check: bundle in $out; carry it and run: scripts/device-check.sh run $out"
    ;;
  run)
    dir=${2:-device-bundle}
    checks=${3:-a,b,c,d,e}
    if ! [[ $checks =~ ^[a-e](,[a-e])*$ ]]; then
      echo "device-check: checks '$checks': expected a comma list of a, b, c, d, e (e.g. a,b,d)" >&2
      exit 2
    fi
    wants() { [[ ",$checks," == *",$1,"* ]]; }
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
      echo "device-check: no NVIDIA GPU here (nvidia-smi finds none): nothing to check" >&2
      exit 2
    fi
    for bin in executor_tests pdist-train pdist-export pdist-run; do
      [ -x "$dir/$bin" ] || { echo "device-check: no $dir/$bin (make it with: scripts/device-check.sh bundle)" >&2; exit 2; }
    done
    out=${OUT:-device-check-out}
    mkdir -p "$out"
    log=$out/device-check.log
    exec > >(tee "$log") 2>&1
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
    # The CUDA runtime, cuBLASLt and NCCL are not carried (cuBLASLt and NCCL alone are over
    # 600 MB): the machine's own, from its CUDA toolkit or from PyTorch's wheels, wherever they are.
    # cuDNN (libcudnn.so.9, opened at run time for the fused attention) likewise: PyTorch's wheels
    # carry one. Python's package directories are searched too.
    site_dirs=$(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
    # shellcheck disable=SC2086
    cuda_dirs=$(find /usr/local/cuda*/ /usr/lib /opt $site_dirs -name 'libcudart.so.1[0-9]*' -o -name 'libcublasLt.so.1[0-9]*' \
      -o -name 'libnccl.so.2*' -o -name 'libcudnn.so.9*' 2>/dev/null | xargs -r -n1 dirname | awk '!seen[$0]++' | paste -sd:)
    # Only pdist's programs see the carried libraries: PyTorch keeps its own.
    pdist_path="$dir/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if LD_LIBRARY_PATH=$pdist_path ldd "$dir/pdist-train" 2>&1 | grep -q "not found"; then
      pdist_path="$dir/lib/fallback:$pdist_path"  # the machine's C++ runtime is older than ours
    fi
    missing=$(LD_LIBRARY_PATH=$pdist_path ldd "$dir/pdist-train" "$dir/executor_tests" 2>&1 | grep "not found" | sort -u)
    if [ -n "$missing" ]; then
      echo "device-check: libraries missing on this machine (searched $cuda_dirs):"; echo "$missing"
      exit 2
    fi
    echo "device-check: CUDA libraries from ${cuda_dirs:-the default library paths}"
    [[ ":$cuda_dirs:" == *cudnn* ]] || echo "device-check: no libcudnn.so.9 found: attention runs as GEMMs, and (a)'s cuDNN comparison fails"
    pdist() { LD_LIBRARY_PATH=$pdist_path "$@"; }
    # Two runs' losses (--losses-out files) side by side; fails past 1e-4 relative or on a count other than 10.
    same_losses() {
      python3 - "$@" <<'PY'
import json, sys
a_file, b_file, a_name, b_name = sys.argv[1:5]
a, b = (json.load(open(f))["losses"] for f in (a_file, b_file))
worst = max(abs(y - x) / abs(x) for x, y in zip(a, b))
print(f"{a_name:>12}", " ".join(f"{x:.6f}" for x in a))
print(f"{b_name:>12}", " ".join(f"{x:.6f}" for x in b))
print(f"largest relative difference {worst:.2e} (limit 1e-4)")
sys.exit(0 if len(a) == len(b) == 10 and worst <= 1e-4 else 1)
PY
    }
    failed=()
    not_run=()

    if wants a; then
    echo "== (a) every CUDA kernel against the CPU's"
    pdist timeout 150 "$dir/executor_tests" --gtest_filter='CudaKernel*:CudaKernelList*:NcclCommunicator*:Backend*:Device*' >"$out/kernels.log" 2>&1
    a=$?
    tail -n 40 "$out/kernels.log"
    # BackendTest's check of a missing GPU skips itself where there is one; a comparison may not.
    grep -qE '^\[  SKIPPED \] (CudaKernel|NcclCommunicator)' "$out/kernels.log" &&
      { echo "device-check: a comparison was skipped on a GPU machine"; a=1; }
    [ $a = 0 ] || failed+=("(a)")
    fi

    if wants b || wants d || wants e; then
      pdist timeout 30 "$dir/pdist-export" gpt "${readme_gpt[@]}" -o "$out/readme-gpt.pb" || failed+=("(export)")
    fi
    if wants b; then
    echo "== (b) ten AdamW steps of the README's GPT: GPU against CPU"
    b=0
    for device in cpu cuda; do
      pdist timeout 90 "$dir/pdist-train" "$out/readme-gpt.pb" --data data/essay.txt --steps 10 --lr 3e-3 --quiet \
        --device $device --losses-out "$out/losses-$device.json" || b=1
    done
    [ $b = 0 ] && { same_losses "$out/losses-cpu.json" "$out/losses-cuda.json" cpu cuda || b=1; }
    [ $b = 0 ] || failed+=("(b)")
    fi

    if wants c; then
    echo "== (c) 1.3B GPT, bf16, one GPU: pdist against PyTorch eager"
    big=(--layers 24 --hidden 2048 --heads 16 --vocab 51200 --seq 2048)
    c=1
    for batch in ${C_BATCHES:-16 8}; do
      pdist timeout 20 "$dir/pdist-export" gpt "${big[@]}" --batch $batch --dtype bf16 -o "$out/gpt-1.3b.pb" || break
      PDIST_CUDA_ATTENTION=${C_ATTENTION:-auto} pdist timeout "${C_SECONDS:-200}" "$dir/pdist-train" "$out/gpt-1.3b.pb" \
        --data data/essay.txt --steps "${C_STEPS:-6}" \
        --device cuda --peak-tflops $h200_bf16_peak --losses-out "$out/losses-1.3b.json" 2>&1 |
        tee "$out/pdist-1.3b-b$batch.log"
      if [ "${PIPESTATUS[0]}" = 0 ]; then
        c=0
        # Where cuDNN ran the attention, the same steps as GEMMs too: the fused attention's gain
        # measured in one lease. Its losses may differ in the last bits (another summation order).
        if [ -z "${C_ATTENTION:-}" ] && grep -q "runs on cuDNN's fused attention" "$out/pdist-1.3b-b$batch.log"; then
          PDIST_CUDA_ATTENTION=gemm pdist timeout "${C_SECONDS:-200}" "$dir/pdist-train" "$out/gpt-1.3b.pb" \
            --data data/essay.txt --steps "${C_STEPS:-6}" --device cuda --peak-tflops $h200_bf16_peak 2>&1 |
            tee "$out/pdist-1.3b-b$batch-gemm-attention.log" || echo "device-check: the GEMM-attention run failed"
        fi
        # The fusions' gain (docs/gpu.md): the same steps without merged updates or GEMM epilogues.
        # Its losses may differ in the last bits (bf16 rounds a fused sum once).
        if [ -n "${C_UNFUSED:-}" ]; then
          PDIST_CUDA_ATTENTION=${C_ATTENTION:-auto} pdist timeout "${C_SECONDS:-200}" "$dir/pdist-train" \
            "$out/gpt-1.3b.pb" --data data/essay.txt --steps "${C_STEPS:-6}" --device cuda --fusions none \
            --peak-tflops $h200_bf16_peak 2>&1 | tee "$out/pdist-1.3b-b$batch-unfused.log" ||
            echo "device-check: the unfused run failed"
        fi
        # Where the time goes, in a run of its own: the profile waits for every kernel. Its losses
        # must be the timed run's (the same steps, the same kernels): a difference is a race.
        if [ -n "${C_PROFILE:-}" ]; then
          PDIST_CUDA_ATTENTION=${C_ATTENTION:-auto} pdist timeout "${C_SECONDS:-200}" "$dir/pdist-train" \
            "$out/gpt-1.3b.pb" --data data/essay.txt --steps 3 \
            --device cuda --quiet --profile --losses-out "$out/losses-1.3b-profile.json" 2>&1 |
            tee "$out/pdist-1.3b-b$batch-profile.log"
          python3 - "$out/losses-1.3b.json" "$out/losses-1.3b-profile.json" <<'PY' || c=1
import json, sys
timed, profiled = (json.load(open(f))["losses"] for f in sys.argv[1:3])
print("losses, timed run   ", " ".join(f"{x:.4f}" for x in timed))
print("losses, profiled run", " ".join(f"{x:.4f}" for x in profiled))
# Equal but for the GEMM algorithm cuBLASLt may pick for another alignment: 1e-3 relative.
worst = max(abs(a - b) / abs(a) for a, b in zip(timed, profiled))
print(f"largest relative difference {worst:.2e} (limit 1e-3)")
sys.exit(0 if worst <= 1e-3 else 1)
PY
        fi
        break
      fi
      # Only running out of memory earns a smaller batch; any other failure is the answer.
      grep -qiE "out of memory|RESOURCE_EXHAUSTED" "$out/pdist-1.3b-b$batch.log" || break
      echo "device-check: batch $batch does not fit; trying a smaller one"
    done
    # The reference runs at the batch pdist ran (or last tried): its number stands either way.
    timeout 120 python3 benchmarks/torch_gpt.py "${big[@]}" --batch $batch --steps "${C_STEPS:-6}" \
      --peak-tflops $h200_bf16_peak 2>&1 | tee "$out/torch-1.3b-b$batch.log"
    torch_rc=${PIPESTATUS[0]}
    [ "$torch_rc" = 0 ] || echo "device-check: the PyTorch reference did not run (exit $torch_rc; 3: out of memory)"
    rm -f "$out/gpt-1.3b.pb"
    [ $c = 0 ] || failed+=("(c)")
    fi

    if wants d; then
    echo "== (d) the README GPT's step timeline on the GPU"
    pdist timeout 60 "$dir/pdist-train" "$out/readme-gpt.pb" --data data/essay.txt --steps 3 --quiet --device cuda \
      --timeline "$out/timeline" && ls "$out/timeline" || failed+=("(d)")
    fi

    if wants e; then
    echo "== (e) two pipeline stages over NCCL against NCCL's semantics on the CPU"
    gpus=$(nvidia-smi -L | grep -c '^GPU')
    if [ "$gpus" -lt 2 ]; then
      echo "device-check: (e) not run: this machine has $gpus GPU (NCCL needs one per rank)"
      not_run+=("(e)")
    else
      e=0
      pp=(--data data/essay.txt --steps 10 --lr 3e-3 --quiet --strategy examples/strategies/pp2_vpp2.json)
      pdist timeout 120 "$dir/pdist-train" "$out/readme-gpt.pb" "${pp[@]}" --backend inproc-rendezvous \
        --losses-out "$out/losses-pp-cpu.json" || e=1
      # A collective timeout well inside the 180 s limit, so that a hang ends in the watchdog's
      # diagnosis (which transfer, which ranks) rather than in timeout's kill; NCCL's own warnings
      # go to the log too.
      NCCL_DEBUG=${NCCL_DEBUG:-WARN} pdist timeout 180 "$dir/pdist-run" --nprocs 2 --backend nccl -- \
        "$dir/pdist-train" "$out/readme-gpt.pb" "${pp[@]}" --device cuda --collective-timeout-s 60 \
        --losses-out "$out/losses-pp-nccl.json" || e=1
      [ $e = 0 ] && { same_losses "$out/losses-pp-cpu.json" "$out/losses-pp-nccl.json" cpu-rendezvous nccl || e=1; }
      [ $e = 0 ] || failed+=("(e)")
    fi
    fi

    if [ ${#failed[@]} = 0 ]; then
      echo "device-check: passed${not_run[*]:+ (not run: ${not_run[*]})}"
      exit 0
    fi
    echo "device-check: FAILED: ${failed[*]}"
    exit 1
    ;;
  -h|--help)
    sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
