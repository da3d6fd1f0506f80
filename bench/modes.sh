#!/usr/bin/env bash
# Our own precision modes against each other: fp32, amp-bf16 and amp-fp16, alternated within every round so slow
# drifts of a shared machine hit all three alike. Prints one line per run and the medians and ratios at the end.
# usage: bench/modes.sh [AMPWB] [ROUNDS]   (ResNet-18; 64 px batch 32 and 224 px batch 16; 2 threads)
set -euo pipefail
ampwb=${1:-build/app/ampwb}
rounds=${2:-3}
declare -A runs
for config in "64 32 10" "224 16 5"; do
  read -r size batch steps <<<"$config"
  for round in $(seq "$rounds"); do
    for mode in fp32 amp-bf16 amp-fp16; do
      ips=$("$ampwb" bench --depth 18 --image-size "$size" --batch-size "$batch" --precision "$mode" \
            --steps "$steps" --warmup 2 --threads 2 --json | /usr/bin/python3 -c \
            'import json,sys; print(json.loads(sys.stdin.read())["images_per_second"])')
      echo "round $round  ${size}px batch $batch  $mode  $ips img/s"
      runs["$size $mode"]+="$ips "
    done
  done
done
/usr/bin/python3 - "$(declare -p runs)" <<'PY'
import re, statistics, sys
runs = dict(re.findall(r'\["([^"]+)"\]="([^"]*)"', sys.argv[1]))
for size in ("64", "224"):
    med = {m: statistics.median(float(v) for v in runs[f"{size} {m}"].split()) for m in ("fp32", "amp-bf16", "amp-fp16")}
    print(f"{size} px: fp32 {med['fp32']:.1f}, amp-bf16 {med['amp-bf16']:.1f} ({med['amp-bf16']/med['fp32']:.2f}x fp32), "
          f"amp-fp16 {med['amp-fp16']:.1f} img/s (time {med['fp32']/med['amp-fp16']:.2f}x fp32)")
PY
