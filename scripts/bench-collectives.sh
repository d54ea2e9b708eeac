#!/usr/bin/env bash
# Runs benchmarks/collectives_benchmark (3 repetitions) and prints the median bus bandwidth of
# every collective, backend and rank count as a Markdown table, with memcpy in the same run.
#   scripts/bench-collectives.sh [BUILD_DIR]      (or: ... --json FILE to format an earlier run)
set -euo pipefail
if [ "${1:-}" = "--json" ]; then
  out=$2
else
  build=${1:-build}
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  "$build/benchmarks/collectives_benchmark" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_format=json > "$out"
fi
python3 - "$out" <<'PY'
import json, re, sys
rows = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"]
mib = lambda n: f"{n >> 20} MiB"
memcpy = {int(re.search(r"BM_Memcpy/(\d+)", b["run_name"]).group(1)): b["algbw_GBps"]
          for b in rows if b["run_name"].startswith("BM_Memcpy")}
table = {}  # (coll, backend, ranks) -> {bytes: busbw}
for b in rows:
    m = re.match(r"BM_(\w+)/(\w+)/bytes:(\d+)/ranks:(\d+)", b["run_name"])
    if m and "busbw_GBps" in b:
        table.setdefault((m[1], m[2], int(m[4])), {})[int(m[3])] = b["busbw_GBps"]
sizes = sorted(memcpy)
print("| busbw GB/s | " + " | ".join(mib(s) for s in sizes) + " |")
print("|---|" + "---:|" * len(sizes))
print("| memcpy (algbw, 1 thread) | " + " | ".join(f"{memcpy[s]:.2f}" for s in sizes) + " |")
for (coll, backend, n), by_size in sorted(table.items(), key=lambda kv: (kv[0][0] != "all_reduce", kv[0])):
    print(f"| {coll} {backend} n={n} | " + " | ".join(f"{by_size[s]:.2f}" if s in by_size else "—" for s in sizes) + " |")
PY
