#!/bin/sh
# Ranks die with their launcher: kill -9 pdist-run while two gloo ranks train, then every rank
# must be gone within 10 s (PR_SET_PDEATHSIG; before, they trained on as orphans).
#   launcher_death.sh PDIST_RUN PDIST_TRAIN MODEL DATA WORKDIR
set -u
run=$1 train=$2 model=$3 data=$4 work=$5
mkdir -p "$work"
marker="$work/launcher-death-$$.json"   # unique text in the ranks' command lines
"$run" --nprocs 2 -- "$train" "$model" --data "$data" --steps 1000000 --quiet --losses-out "$marker" \
  > "$work/out.txt" 2>&1 &
launcher=$!
# The pattern's "[.]" keeps grep from matching its own command line.
pattern="launcher-death-$$[.]json"
ranks() { grep -l -s -E "$pattern" /proc/[0-9]*/cmdline 2>/dev/null | grep -v "^/proc/$launcher/" | wc -l; }
waited=0
while [ "$(ranks)" -lt 2 ] && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
if [ "$(ranks)" -lt 2 ]; then echo "FAIL: the ranks did not start"; cat "$work/out.txt"; kill -9 $launcher; exit 1; fi
sleep 1
kill -9 $launcher
waited=0
while [ "$(ranks)" -gt 0 ] && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
left=$(ranks)
if [ "$left" -gt 0 ]; then
  echo "FAIL: $left rank(s) outlived the killed launcher"
  for f in $(grep -l -s -E "$pattern" /proc/[0-9]*/cmdline); do kill -9 "$(echo "$f" | cut -d/ -f3)" 2>/dev/null; done
  exit 1
fi
echo "ranks gone $((waited * 100)) ms after the launcher was killed"
