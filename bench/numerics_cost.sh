#!/usr/bin/env bash
# What recording per-layer numerics costs (docs/benchmarks.md, "Recording per-layer numerics"): trains ResNet-20 on
# a dataset, alternating runs that probe only the last step of the epoch (the default) with runs that probe every
# step (--numerics-every 1), and prints each run's median step time from the stored steps' wall clock. The
# difference is one probed step's extra cost: statistics on host copies and the store's write of the records.
# Usage: bench/numerics_cost.sh DATA [MODE] [REPEATS] [STEPS]   (run it holding the CPU lock on a shared machine)
set -euo pipefail
data=$1 mode=${2:-amp-fp16} repeats=${3:-3} steps=${4:-24}
ampwb=${AMPWB:-build/app/ampwb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache XDG_DATA_HOME=$work/data
# Per run: the median step time from the third step on (the first two warm up), and the steps that were probed.
summary='
import json, statistics, sys
run = json.load(sys.stdin)
wall = [s["wall_seconds"] for s in run["steps"]]
diffs = [b - a for a, b in zip(wall[1:], wall[2:])]
probed = len({n["step"] for n in run["layer_numerics"]})
print(f"repeat {sys.argv[1]} numerics_every={sys.argv[2]} median_step_ms={1000 * statistics.median(diffs):.1f} "
      f"probed_steps={probed}")'
for r in $(seq "$repeats"); do
  for every in 0 1; do
    db=$work/runs-$r-$every.sqlite
    "$ampwb" train --data "$data" --depth 20 --image-size 32 --batch-size 32 --epochs 1 --threads 2 \
      --max-steps-per-epoch "$steps" --precision "$mode" --numerics-every "$every" --no-checkpoint --db "$db" \
      >/dev/null
    "$ampwb" show 1 --json --steps --db "$db" | python3 -c "$summary" "$r" "$every"
  done
done
