#!/usr/bin/env bash
# Two builds of ampwb alternating within every round (before, after), each mode and shape, so both see the same
# machine state; medians of the rounds. Each round of one shape runs under the shared CPU lock (a few minutes).
# usage: bench/ab_alternate.sh BEFORE AFTER [ROUNDS] [CONFIGS] [MODES]
#        CONFIGS: "depth:size:batch:classes:steps ..." (default ResNet-18 64 px batch 32, ResNet-20 32 px batch 128)
#        MODES: default "fp32 amp-bf16 amp-fp16"
set -euo pipefail
before=$1 after=$2
rounds=${3:-3}
configs=${4:-18:64:32:1000:10 20:32:128:10:10}
modes=${5:-fp32 amp-bf16 amp-fp16}
lscpu | grep -E 'Model name|^CPU\(s\)'
results=$(mktemp)
for config in $configs; do
  IFS=: read -r depth size batch classes steps <<<"$config"
  for round in $(seq "$rounds"); do
    exec 9>/tmp/ampwb-cpu.lock
    flock 9
    for mode in $modes; do
      for build in before after; do
        binary=$before; [ "$build" = after ] && binary=$after
        out=$("$binary" bench --depth "$depth" --image-size "$size" --batch-size "$batch" \
              --classes "$classes" --precision "$mode" --steps "$steps" --warmup 2 --threads 2 --json)
        line=$(/usr/bin/python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["step_ms_median"], j["images_per_second"], j["peak_bytes"]/2**20, j["max_rss_bytes"]/2**20)' "$out")
        echo "resnet-$depth ${size}px b$batch round $round $mode $build: $line (ms, img/s, peak tensors MiB, max RSS MiB)"
        echo "$depth $size $batch $mode $build $line" >>"$results"
      done
    done
    flock -u 9
    exec 9>&-
  done
done
/usr/bin/python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    d, s, b, mode, build, ms, ips, peak, rss = line.split()
    runs[(d, s, b, mode, build)].append((float(ms), float(ips), float(peak), float(rss)))
print("| model | mode | before ms/step | after ms/step | speed-up | before / after peak tensors MiB | before / after max RSS MiB |")
print("|---|---|---|---|---|---|---|")
for (d, s, b, mode, build) in sorted(k for k in runs if k[4] == "before"):
    bef, aft = runs[(d, s, b, mode, "before")], runs[(d, s, b, mode, "after")]
    med = lambda rs, i: statistics.median(r[i] for r in rs)
    print(f"| ResNet-{d} {s} px batch {b} | {mode} | {med(bef,0):.1f} | {med(aft,0):.1f} | {med(bef,0)/med(aft,0):.3f}x "
          f"| {med(bef,2):.1f} / {med(aft,2):.1f} | {med(bef,3):.0f} / {med(aft,3):.0f} |")
PY
rm -f "$results"
