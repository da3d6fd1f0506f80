#!/usr/bin/env bash
# amp-bf16 against fp32 on every CPU path this machine can show: as the engine chooses ("auto": oneDNN's native
# BF16 where the cores' BF16 multiply-adds outpace FP32's, else the engine's emulation), each of the two forced
# (AMPWB_CPU_BF16=native|emulated; native is the emulation where the CPU has no BF16 instructions), and oneDNN capped
# to plain AVX-512 (no BF16 instructions) or to AVX2 (no BF16 primitives). fp32 and amp-bf16 alternate within every
# round under the same path.
# usage: bench/bf16_paths.sh [AMPWB] [ROUNDS] [PATHS]  (ResNet-18; 64 px batch 32 and 224 px batch 16; 2 threads;
#        PATHS: auto, native, emulated or a oneDNN cap such as AVX512_CORE or AVX2; default "auto native emulated")
set -euo pipefail
ampwb=${1:-build/app/ampwb}
rounds=${2:-3}
caps=${3:-auto native emulated}
lscpu | grep -E 'Model name|Flags' | sed -E 's/(Flags:).*/\1 '"$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"'/'
declare -A runs
for cap in $caps; do
  for config in "64 32 10" "224 16 4"; do
    read -r size batch steps <<<"$config"
    for round in $(seq "$rounds"); do
      for mode in fp32 amp-bf16; do
        case $cap in
          auto) env=() ;;
          native | emulated) env=(AMPWB_CPU_BF16=$cap) ;;
          *) env=(ONEDNN_MAX_CPU_ISA=$cap) ;;
        esac
        out=$(env "${env[@]}" "$ampwb" bench --depth 18 --image-size "$size" --batch-size "$batch" --precision "$mode" \
              --steps "$steps" --warmup 2 --threads 2 --json)
        ips=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["images_per_second"])' "$out")
        echo "$cap  round $round  ${size}px batch $batch  $mode  $ips img/s"
        runs["$cap $size $mode"]+="$ips "
      done
    done
  done
  /usr/bin/python3 -c 'import json,sys; print("  compute:", json.loads(sys.argv[1]).get("compute", "?"))' "$out"
done
/usr/bin/python3 - "$(declare -p runs)" "$caps" <<'PY'
import re, statistics, sys
runs = dict(re.findall(r'\["([^"]+)"\]="([^"]*)"', sys.argv[1]))
for cap in sys.argv[2].split():
    for size in ("64", "224"):
        med = {m: statistics.median(float(v) for v in runs[f"{cap} {size} {m}"].split()) for m in ("fp32", "amp-bf16")}
        print(f"{cap:12s} {size:>3s} px: fp32 {med['fp32']:.1f}, amp-bf16 {med['amp-bf16']:.1f} img/s: "
              f"amp-bf16 step time {med['fp32']/med['amp-bf16']:.2f}x fp32's (speed {med['amp-bf16']/med['fp32']:.2f}x)")
PY
