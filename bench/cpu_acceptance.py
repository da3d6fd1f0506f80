#!/usr/bin/env python3
"""Issue 17's whole acceptance table on this CPU, in one command.

For each configuration (ResNet-18 64 px batch 32, ResNet-18 224 px batch 16,
ResNet-20 32 px batch 128) every round runs, each as its own process, our
fp32, amp-bf16 and amp-fp16 and PyTorch's fp32 and BF16 autocast in both
layouts; ours run side by side, as do PyTorch's, each block rotating by one
and the blocks swapping every round (round_order), so a shared machine's
drift hits every program alike. Each ratio is taken within a round and the
median over rounds is reported (as bench/compare_pytorch.py does), beside the
bound the issue asks for and every round's value, which on a shared machine
say how far the load moved it. The figures belong to this CPU only: its model
and instruction sets head the output.

usage: bench/cpu_acceptance.py [--ampwb build/app/ampwb] [--rounds 3]
                               [--configs r18-64,r18-224,r20-32] | tee docs/logs/...
PyTorch 1.13 runs BF16 convolutions through oneDNN only with AVX-512; on an
AVX2 CPU its BF16 step is over ten times its FP32 one and tells nothing about
the bound, so those runs are left out there unless --pytorch-bf16 always.
"""

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_pytorch import (DEFAULT_PYTHON, PYTORCH_BENCH, BenchError,  # noqa: E402
                             check_same_network, require, run_json, torch_missing)

# name: (depth, image size, batch, classes, timed steps, warm-up steps)
CONFIGS = {
    "r18-64": (18, 64, 32, 1000, 10, 3),
    "r18-224": (18, 224, 16, 1000, 5, 2),
    "r20-32": (20, 32, 128, 10, 10, 3),
}
OURS = ("fp32", "amp-bf16", "amp-fp16")
PYTORCH = (("fp32", False), ("fp32", True), ("bf16", False), ("bf16", True))  # (precision, channels_last)


def ips(run):
    return run["images_per_second"] if run else None


def ratio(a, b):
    return a / b if a and b else None


def best(*runs):
    found = [ips(r) for r in runs if r]
    return max(found) if found else None


# One round's value of each ratio the bounds name, from that round's runs.
ROUND_VALUES = {
    "bf16/fp32": lambda r: ratio(ips(r["amp-bf16"]), ips(r["fp32"])),
    "bf16/pt-bf16-cl": lambda r: ratio(ips(r["amp-bf16"]), ips(r["pt-bf16-cl"])),
    "bf16/pt-bf16-best": lambda r: ratio(ips(r["amp-bf16"]), best(r["pt-bf16"], r["pt-bf16-cl"])),
    "fp32/pt-fp32-best": lambda r: ratio(ips(r["fp32"]), best(r["pt-fp32"], r["pt-fp32-cl"])),
    "fp16-time/fp32-time": lambda r: ratio(ips(r["fp32"]), ips(r["amp-fp16"])),  # step times: the speeds inverted
}

# The bounds: (configuration, what, ratio, bound, at least?).
CHECKS = [
    ("r18-64", "amp-bf16 / our fp32 (images/s)", "bf16/fp32", 1.8, True),
    ("r18-224", "amp-bf16 / our fp32 (images/s)", "bf16/fp32", 1.8, True),
    ("r18-64", "amp-bf16 / PyTorch BF16 autocast channels_last", "bf16/pt-bf16-cl", 1.3, True),
    ("r18-224", "amp-bf16 / PyTorch BF16 autocast channels_last", "bf16/pt-bf16-cl", 1.1, True),
    ("r18-64", "fp32 / PyTorch fp32 best layout", "fp32/pt-fp32-best", 1.15, True),
    ("r18-224", "fp32 / PyTorch fp32 best layout", "fp32/pt-fp32-best", 1.15, True),
    ("r18-64", "amp-fp16 step time / fp32 step time", "fp16-time/fp32-time", 1.1, False),
    ("r18-224", "amp-fp16 step time / fp32 step time", "fp16-time/fp32-time", 1.1, False),
    ("r20-32", "amp-fp16 step time / fp32 step time", "fp16-time/fp32-time", 1.1, False),
    ("r20-32", "fp32 / PyTorch fp32 best layout", "fp32/pt-fp32-best", 1.0, True),
    ("r20-32", "amp-bf16 / PyTorch BF16 autocast best layout", "bf16/pt-bf16-best", 1.0, True),
    ("r20-32", "amp-bf16 / our fp32 (images/s)", "bf16/fp32", 1.5, True),
]


def cpu_summary():
    model, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    wanted = [f for f in ("avx2", "avx512f", "avx512bw", "avx512_bf16", "amx_bf16") if f in flags]
    return model, wanted


def programs(config, args, pytorch_bf16):
    depth, size, batch, classes, steps, warmup = CONFIGS[config]
    shape = ["--depth", str(depth), "--image-size", str(size), "--batch-size", str(batch),
             "--classes", str(classes), "--steps", str(steps), "--warmup", str(warmup)]
    found = {}
    for mode in OURS:
        found[mode] = [args.ampwb, "bench", "--threads", str(args.threads), "--precision", mode, "--json"] + shape
    for precision, channels_last in PYTORCH:
        if precision == "bf16" and not pytorch_bf16:
            continue
        name = f"pt-{precision}" + ("-cl" if channels_last else "")
        found[name] = ([args.python, PYTORCH_BENCH, "--threads", str(args.threads), "--precision", precision, "--json"]
                       + shape + (["--channels-last"] if channels_last else []))
    return found


def round_order(names, r):
    """Round r's order: our programs side by side and PyTorch's side by side, each block rotated by one every round
    and the two blocks swapping places every round, so the ratios between our own modes (the tightest bounds) come
    from runs seconds apart, and every program runs early and late alike."""
    def rotated(block):
        return block[r % len(block):] + block[:r % len(block)] if block else block
    ours = rotated([n for n in names if n in OURS])
    theirs = rotated([n for n in names if n not in OURS])
    return ours + theirs if r % 2 == 0 else theirs + ours


def run_one(name, cmd, timeout):
    keys = ["images_per_second", "step_ms_median", "max_rss_bytes"] + (["peak_bytes"] if name in OURS else [])
    try:
        return require(run_json(cmd, timeout), keys, name), None
    except BenchError as e:  # one failure loses this figure, not the others
        return None, str(e).splitlines()[0]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampwb", default=os.path.join("build", "app", "ampwb"))
    p.add_argument("--python", default=DEFAULT_PYTHON, help="an interpreter with torch")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--configs", default=",".join(CONFIGS), help="any of " + ", ".join(CONFIGS))
    p.add_argument("--pytorch-bf16", choices=("auto", "always", "never"), default="auto",
                   help="auto: only where the CPU has AVX-512 (see above)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per process")
    args = p.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or args.rounds < 1 or args.threads < 1:
        p.error(f"unknown configuration {', '.join(unknown)}" if unknown else "--rounds and --threads must be >= 1")
    if not os.access(args.ampwb, os.X_OK):
        p.error(f"{args.ampwb} is not an executable: build it first or pass --ampwb PATH")
    missing = torch_missing(args.python)
    if missing:
        p.error(missing)

    model, flags = cpu_summary()
    pytorch_bf16 = args.pytorch_bf16 == "always" or (args.pytorch_bf16 == "auto" and "avx512bw" in flags)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"cpu: {model}; flags: {' '.join(flags)}; {args.threads} threads; commit {commit or '?'}")
    if not pytorch_bf16:
        print("PyTorch BF16 runs left out: this CPU has no AVX-512, where PyTorch 1.13 has no BF16 convolutions")

    values = {}  # (config, check key) -> per-round values
    bf16_emulated = False  # where the engine emulates BF16 (no AVX-512), its BF16 bounds say nothing
    for config in configs:
        cmds = programs(config, args, pytorch_bf16)
        names = list(cmds)
        rounds = []
        for r in range(args.rounds):
            order = round_order(names, r)
            runs = dict.fromkeys(["pt-bf16", "pt-bf16-cl"])
            for name in order:
                runs[name], error = run_one(name, cmds[name], args.timeout)
                if error:
                    print(f"{config} round {r + 1}: {name} failed: {error}", flush=True)
                    continue
                res = runs[name]
                extra = f", peak tensors {res['peak_bytes'] / 2**20:.1f} MiB" if "peak_bytes" in res else ""
                compute = f", {res['compute']}" if "compute" in res and name == "amp-bf16" else ""
                bf16_emulated |= "emulated" in compute
                print(f"{config} round {r + 1}: {name:11s} {res['images_per_second']:8.1f} img/s "
                      f"{res['step_ms_median']:9.1f} ms/step, max RSS {res['max_rss_bytes'] / 2**20:.0f} MiB"
                      f"{extra}{compute}", flush=True)
            if runs.get("fp32") and runs.get("pt-fp32"):
                check_same_network(runs["fp32"], runs["pt-fp32"])
            rounds.append(runs)
        for key in ROUND_VALUES:
            values[(config, key)] = [v for v in (ROUND_VALUES[key](runs) for runs in rounds) if v is not None]

        print(f"\n{config}: medians over {args.rounds} rounds")
        print("| program | img/s | ms/step | peak tensors MiB | max RSS MiB |\n|---|---:|---:|---:|---:|")
        for name in names:
            done = [runs[name] for runs in rounds if runs.get(name)]
            if not done:
                print(f"| {name} | failed | | | |")
                continue
            med = lambda key: statistics.median(x[key] for x in done)
            peak = f"{med('peak_bytes') / 2**20:.1f}" if "peak_bytes" in done[0] else "n/a"
            print(f"| {name} | {med('images_per_second'):.1f} | {med('step_ms_median'):.1f} | {peak} "
                  f"| {med('max_rss_bytes') / 2**20:.0f} |")
        print(flush=True)

    print(f"Issue 17's bounds on {model} (medians of per-round ratios; each round's beside, in order):")
    print("| configuration | what | measured | asked | holds | rounds |\n|---|---|---:|---:|:---:|---|")
    for config, what, key, bound, at_least in CHECKS:
        if config not in configs:
            continue
        found = values.get((config, key))
        if not found:
            print(f"| {config} | {what} | n/a | {'>=' if at_least else '<='} {bound} | not measured | |")
            continue
        value = statistics.median(found)
        holds = "yes" if (value >= bound if at_least else value <= bound) else "NO"
        if bf16_emulated and key.startswith("bf16"):
            holds = "n/a: BF16 emulated on this CPU"
        each = " ".join(f"{v:.2f}" for v in found)
        print(f"| {config} | {what} | {value:.3f} | {'>=' if at_least else '<='} {bound} | {holds} | {each} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
