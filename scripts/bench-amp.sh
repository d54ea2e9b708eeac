#!/usr/bin/env bash
# Mixed precision against f32 on the README main job's model: 300 steps of the 4-layer GPT on
# data/essay.txt, same seed and schedule, once per precision; prints each run's final loss, the
# mean loss over its last 50 steps, and the largest and the mean relative gap of its per-step
# loss to f32's. docs/mixed_precision.md records the table. Usage: bench-amp.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build="${1:-build}"
steps="${2:-300}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/pdist-export" gpt --layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 16 -o "$out/gpt.pb" 2>/dev/null
run() {
  local name="$1" strategy="$2"
  echo "$strategy" > "$out/$name.json"
  local start end
  start=$(date +%s%N)
  "$build/pdist-train" "$out/gpt.pb" --data data/essay.txt --steps "$steps" --lr 3e-3 --warmup 20 --quiet \
    --strategy "$out/$name.json" --losses-out "$out/$name.losses.json" 2> "$out/$name.log"
  end=$(date +%s%N)
  echo "$(( (end - start) / 1000000 ))" > "$out/$name.ms"
}
amp() { echo "{\"amp\": {\"enable\": true, \"dtype\": \"$1\", \"level\": \"$2\"}${3:-}}"; }
run f32 '{}'
run bf16_o1 "$(amp bfloat16 o1)"
run bf16_o2 "$(amp bfloat16 o2)"
run f16_o2 "$(amp float16 o2)"
run bf16_o2_dp2_mp2_zero2 "$(amp bfloat16 o2 ', "dp_degree": 2, "mp_degree": 2, "sharding": {"enable": true, "stage": 2}')"
losses() { tr -d '{}[]"a-z:' < "$1" | tr ',' '\n' | grep -v '^$'; }
losses "$out/f32.losses.json" > "$out/f32.txt"
printf '%-24s %10s %14s %14s %14s %9s\n' run "final" "last-50 mean" "max rel gap" "mean rel gap" "time"
for name in f32 bf16_o1 bf16_o2 f16_o2 bf16_o2_dp2_mp2_zero2; do
  losses "$out/$name.losses.json" > "$out/$name.txt"
  paste "$out/$name.txt" "$out/f32.txt" | awk -v name="$name" -v ms="$(cat "$out/$name.ms")" '
    { gap = ($1 - $2) / $2; if (gap < 0) gap = -gap; if (gap > max) max = gap; sum += gap; n++; l[n] = $1 }
    END { for (i = n - 49; i <= n; i++) tail += l[i];
          printf "%-24s %10.4f %14.4f %14.2e %14.2e %7.1f s\n", name, l[n], tail / 50, max, sum / n, ms / 1000 }'
done
grep -h "skipped on overflow" "$out/f16_o2.log" || true
