#!/usr/bin/env python3
"""Compare `ampwb bench` with PyTorch on one ResNet training configuration.

Produces the numbers for docs/benchmarks.md. Method, and why:
  * Every measurement is a separate process, so max RSS is per run and one
    run's allocator state cannot help or hurt the next.
  * Our engine and PyTorch alternate within each round, and the order flips
    every round, so slow drift on a shared machine (thermal, other jobs)
    hits both sides alike instead of biasing one.
  * PyTorch runs in both NCHW and channels_last each round; the faster of the
    two is that round's "PyTorch best" (the rule agreed in the issue: compare
    against PyTorch's best layout, not its default one).
  * Reported figures are medians over rounds; the headline ratio is the
    median of the per-round ratios ours / PyTorch best, which cancels
    round-to-round machine-speed changes better than a ratio of medians.
  * Both sides get the same --classes (default 1000 for the ImageNet depths
    18..152, 10 for the CIFAR depths 20..110), and the parameter counts are
    checked against each other every run (ours prints 3 significant digits
    of millions), so a mismatched network cannot slip into the comparison.

This script needs only the standard library; the PyTorch side runs
bench/pytorch_resnet_bench.py with an interpreter that has torch.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTORCH_BENCH = os.path.join(HERE, "pytorch_resnet_bench.py")
# Debian's python3-torch is installed for /usr/bin/python3; a `python3` found
# first on PATH (pyenv etc.) may lack torch, so prefer the system one.
DEFAULT_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
IMAGENET_DEPTHS = (18, 34, 50, 101, 152)
CIFAR_DEPTHS = (20, 32, 44, 56, 110)


class BenchError(Exception):
    pass


def run_json(cmd, timeout):
    """Run cmd, return the JSON object on the last JSON line of its stdout."""
    printable = " ".join(f"'{c}'" if " " in c else c for c in cmd)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise BenchError(f"cannot run {printable}: {cmd[0]} not found")
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out after {timeout}s: {printable}")
    if proc.returncode != 0:
        raise BenchError(f"command failed with exit status {proc.returncode}: {printable}\n"
                         f"--- stderr ---\n{proc.stderr.strip()[-4000:]}\n"
                         f"--- stdout ---\n{proc.stdout.strip()[-2000:]}")
    # Take the last line that parses as a JSON object, so a stray log line
    # before the result does not break the comparison.
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise BenchError(f"no JSON line in the output of {printable}\n"
                     f"--- stdout ---\n{proc.stdout.strip()[-2000:]}\n"
                     f"--- stderr ---\n{proc.stderr.strip()[-2000:]}")


def torch_missing(python):
    """Why `python` cannot run the PyTorch side, or None: said once, up front, rather than as every run's failure."""
    try:
        proc = subprocess.run([python, "-c", "import torch, torchvision"], capture_output=True, text=True,
                              timeout=300)
    except (FileNotFoundError, PermissionError):
        return f"{python} not found"
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
    return (f"{python} cannot import torch and torchvision ({last}); on Debian 12: "
            f"apt-get install python3-torch python3-torchvision, or pass --python")


def require(result, keys, who):
    missing = [k for k in keys if k not in result]
    if missing:
        raise BenchError(f"{who} JSON lacks key(s) {', '.join(missing)}: {json.dumps(result)}")
    return result


def check_same_network(ours, pytorch):
    """Raise unless ours' "N M parameters" (model summary) matches PyTorch's count.

    Ours prints millions to 3 significant digits, so the check allows half a
    unit in the last digit; it catches a different depth, class count or
    shortcut type, not a difference of a few thousand weights.
    """
    found = re.search(r"([0-9.eE+-]+) M parameters", str(ours.get("model", "")))
    if not found or "parameters" not in pytorch:
        return  # an older binary or script: nothing to check against
    ours_m = float(found.group(1))
    pt_m = pytorch["parameters"] / 1e6
    if ours_m <= 0:
        return
    half_unit = 0.5 * 10 ** (math.floor(math.log10(ours_m)) - 2)
    if abs(ours_m - pt_m) > half_unit * 1.001:
        raise BenchError(f"the two networks differ: ours is '{ours['model']}', PyTorch's has "
                         f"{pytorch['parameters']:,} parameters")


def ours_cmd(args):
    # --threads belongs to the `bench` subcommand: `ampwb bench --threads T ...`.
    return [args.ampwb, "bench", "--threads", str(args.threads),
            "--depth", str(args.depth), "--image-size", str(args.image_size),
            "--batch-size", str(args.batch_size), "--classes", str(args.classes),
            "--precision", args.precision,
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--json"]


def pytorch_precision(ours):
    # Our precisions are e.g. fp32, amp-bf16; PyTorch's reference has only
    # fp32 and bf16 autocast, so any bf16 flavour maps to bf16.
    return "bf16" if "bf16" in ours else "fp32"


def pytorch_cmd(args, channels_last):
    cmd = [args.python, PYTORCH_BENCH,
           "--depth", str(args.depth), "--image-size", str(args.image_size),
           "--batch-size", str(args.batch_size), "--classes", str(args.classes),
           "--precision", pytorch_precision(args.precision),
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--threads", str(args.threads), "--json"]
    if channels_last:
        cmd.append("--channels-last")
    return cmd


def mib(n):
    return f"{n / 2**20:.0f} MiB"


def median(values):
    return statistics.median(values) if values else float("nan")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampwb", default=os.path.join("build", "app", "ampwb"),
                   help="path of our engine's binary (default build/app/ampwb)")
    p.add_argument("--python", default=DEFAULT_PYTHON,
                   help=f"interpreter with torch for the PyTorch side (default {DEFAULT_PYTHON})")
    p.add_argument("--depth", type=int, default=18, choices=IMAGENET_DEPTHS + CIFAR_DEPTHS,
                   help="18/34/50/101/152: ImageNet ResNets (torchvision on PyTorch's side); "
                        "20/32/44/56/110: CIFAR ResNets (written in pytorch_resnet_bench.py)")
    p.add_argument("--classes", type=int, default=None,
                   help="classes of both models' output (default 10 for the CIFAR "
                        "depths, 1000 for the ImageNet ones)")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--precision", default="fp32",
                   help="our precision (fp32, amp-bf16, ...); PyTorch uses bf16 "
                        "autocast when it contains 'bf16', else fp32")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=15, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed steps before the timed ones, each side")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per process")
    p.add_argument("--markdown", action="store_true",
                   help="also print a markdown table block for docs/benchmarks.md")
    p.add_argument("--pytorch-only", action="store_true",
                   help="skip our engine (to test this script before ampwb exists)")
    args = p.parse_args(argv)
    if args.classes is None:
        args.classes = 10 if args.depth in CIFAR_DEPTHS else 1000
    for name in ("image_size", "batch_size", "rounds", "steps", "threads", "classes"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if not args.pytorch_only and not os.access(args.ampwb, os.X_OK):
        print(f"compare_pytorch: error: {args.ampwb} is not an executable; build it "
              f"first, pass --ampwb PATH, or use --pytorch-only", file=sys.stderr)
        return 2
    missing = torch_missing(args.python)
    if missing:
        print(f"compare_pytorch: error: {missing}", file=sys.stderr)
        return 2

    if args.depth in IMAGENET_DEPTHS and args.image_size < 64:
        print(f"compare_pytorch: warning: below 64 px our engine gives ResNet-{args.depth} a "
              f"small stem (3x3 stride 1, no max pool) and torchvision keeps its ImageNet stem, "
              f"so the two networks differ", file=sys.stderr)
    print(f"config: resnet{args.depth} {args.image_size}px batch {args.batch_size} "
          f"classes {args.classes} ours={args.precision} pytorch={pytorch_precision(args.precision)} "
          f"threads {args.threads} steps {args.steps} rounds {args.rounds}", flush=True)

    ours_runs, nchw_runs, cl_runs, best_runs, ratios = [], [], [], [], []
    try:
        for r in range(args.rounds):
            def run_ours():
                res = run_json(ours_cmd(args), args.timeout)
                return require(res, ["images_per_second", "step_ms_median",
                                     "peak_bytes", "max_rss_bytes"], "ampwb")

            def run_pytorch():
                keys = ["images_per_second", "step_ms_median", "max_rss_bytes"]
                nchw = require(run_json(pytorch_cmd(args, False), args.timeout), keys, "pytorch")
                cl = require(run_json(pytorch_cmd(args, True), args.timeout), keys, "pytorch")
                return nchw, cl

            ours = None
            if args.pytorch_only:
                nchw, cl = run_pytorch()
            elif r % 2 == 0:  # flip the order every round (see module docstring)
                ours = run_ours()
                nchw, cl = run_pytorch()
            else:
                nchw, cl = run_pytorch()
                ours = run_ours()

            if ours is not None:
                check_same_network(ours, nchw)
            best = cl if cl["images_per_second"] > nchw["images_per_second"] else nchw
            best_layout = "channels_last" if best is cl else "NCHW"
            nchw_runs.append(nchw)
            cl_runs.append(cl)
            best_runs.append(best)
            pt_part = (f"pytorch NCHW {nchw['images_per_second']:.1f} img/s, "
                       f"channels_last {cl['images_per_second']:.1f} img/s, "
                       f"best {best_layout} {best['images_per_second']:.1f} img/s")
            line = f"round {r + 1}/{args.rounds}: {pt_part}"
            if ours is not None:
                ours_runs.append(ours)
                ratio = ours["images_per_second"] / best["images_per_second"]
                ratios.append(ratio)
                line = (f"round {r + 1}/{args.rounds}: ours "
                        f"{ours['images_per_second']:.1f} img/s "
                        f"({ours['step_ms_median']:.1f} ms/step) | {pt_part} | "
                        f"ratio {ratio:.3f}")
            print(line, flush=True)
    except BenchError as e:
        print(f"compare_pytorch: error: {e}", file=sys.stderr)
        return 1

    ips = lambda runs: median([x["images_per_second"] for x in runs])
    nchw_ips, cl_ips, best_ips = ips(nchw_runs), ips(cl_runs), ips(best_runs)
    # Memory of "the better layout": the layout with the higher median
    # throughput over all rounds, so the RSS figure belongs to one layout.
    better_name, better_runs = (("channels_last", cl_runs) if cl_ips > nchw_ips
                                else ("NCHW", nchw_runs))
    pt_rss = median([x["max_rss_bytes"] for x in better_runs])
    version = nchw_runs[0].get("version", "?")

    print("\nmedians over rounds:")
    if ours_runs:
        ours_ips = ips(ours_runs)
        ours_rss = median([x["max_rss_bytes"] for x in ours_runs])
        ours_peak = median([x["peak_bytes"] for x in ours_runs])
        print(f"  ours                  {ours_ips:10.1f} img/s")
    print(f"  pytorch NCHW          {nchw_ips:10.1f} img/s")
    print(f"  pytorch channels_last {cl_ips:10.1f} img/s")
    print(f"  pytorch best          {best_ips:10.1f} img/s (per-round best of the two)")
    if ours_runs:
        ratio = median(ratios)
        print(f"  ours / pytorch best   {ratio:10.3f} (median of per-round ratios)")
        print(f"memory: ours max RSS {mib(ours_rss)}, ours peak tensor bytes "
              f"{mib(ours_peak)}; pytorch ({better_name}) max RSS {mib(pt_rss)}")
    else:
        print(f"memory: pytorch ({better_name}) max RSS {mib(pt_rss)}")

    if args.markdown:
        classes = f", {args.classes} classes" if args.depth in CIFAR_DEPTHS else ""
        config = (f"ResNet-{args.depth}, {args.image_size}px, batch {args.batch_size}{classes}, "
                  f"{args.precision}, {args.threads} threads")
        print(f"\n<!-- compare_pytorch.py: {args.rounds} rounds x {args.steps} steps, "
              f"PyTorch {version}, medians -->")
        print("| Configuration | Ours img/s | PyTorch NCHW img/s | PyTorch channels_last img/s "
              "| PyTorch best img/s | Ours / PyTorch best | Ours max RSS | Ours peak tensors "
              "| PyTorch max RSS (better layout) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        if ours_runs:
            print(f"| {config} | {ours_ips:.1f} | {nchw_ips:.1f} | {cl_ips:.1f} | "
                  f"{best_ips:.1f} | {ratio:.2f}x | {mib(ours_rss)} | {mib(ours_peak)} | "
                  f"{mib(pt_rss)} ({better_name}) |")
        else:
            print(f"| {config} | n/a | {nchw_ips:.1f} | {cl_ips:.1f} | {best_ips:.1f} | n/a "
                  f"| n/a | n/a | {mib(pt_rss)} ({better_name}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
