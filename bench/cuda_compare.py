#!/usr/bin/env python3
"""Compare `ampwb bench --device cuda` with PyTorch on the same GPU, per precision mode.

Runs on a GPU machine whose Python has PyTorch with CUDA (and torchvision).
For each model configuration (default: ResNet-50 224 px batch 256, ResNet-18
224 px batch 256) and each precision mode (fp32, tf32, amp-fp16, amp-bf16) it
times training steps of our engine and of PyTorch, and prints throughputs and
ratios, plus the issue's two goals:
  * amp-fp16 ResNet-50: ours at least as fast as PyTorch AMP + channels_last;
  * amp-fp16 at least 2x our own fp32.

Method (as bench/compare_pytorch.py, and why):
  * Every measurement is a separate process: no allocator or cuDNN-cache state
    carries over, and peak memory is per run.
  * Ours and PyTorch alternate within each round, and the order flips every
    round, so drift (clocks, thermals, other jobs) hits both sides alike.
  * Figures are medians over rounds; the headline ratio is the median of the
    per-round ratios ours / PyTorch.

What PyTorch runs (this file re-runs itself with --worker for that side):
  torchvision ResNet, random init, channels_last model and input (NVIDIA's
  advice for tensor cores; --pytorch-layout nchw for the default layout),
  torch.backends.cudnn.benchmark = True (ours also times cuDNN's algorithms
  once per shape), SGD lr 0.01 momentum 0.9 (as `ampwb bench`), a full step:
  forward, CrossEntropyLoss, backward, optimizer step, zero_grad(set_to_none).
  Precision modes:
    fp32      FP32, TF32 off for matmul and cuDNN
    tf32      FP32 storage, TF32 tensor cores (allow_tf32 on)
    amp-fp16  torch.autocast(float16) + torch.amp.GradScaler (dynamic scale)
    amp-bf16  torch.autocast(bfloat16), no scaler
  Input: by default a pinned host batch copied with non_blocking=True every
  step, as a DataLoader(pin_memory=True) feeds it and as `ampwb bench` passes a
  host batch to every step; --pytorch-input device keeps the batch on the GPU.
  Time: torch.cuda.synchronize() around every step; the median step.

Usage on the GPU machine (from the repository root, after building):
  python3 bench/cuda_compare.py --ampwb build/app/ampwb --markdown
  python3 bench/cuda_compare.py --configs 50:224:256 --modes amp-fp16 --rounds 3
  python3 bench/cuda_compare.py --pytorch-only   # test the PyTorch side alone
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

from compare_pytorch import BenchError, require, run_json  # the driver helpers, beside this file

MODES = ["fp32", "tf32", "amp-fp16", "amp-bf16"]
DEFAULT_CONFIGS = ["50:224:256", "18:224:256"]


# ---- The PyTorch side (run in its own process: `cuda_compare.py --worker ...`) ------------------------------------

def make_pytorch_step(device, depth, image_size, batch_size, precision, classes=1000, layout="channels_last",
                      input_place="host"):
    """PyTorch's training step as this comparison runs it (the module docstring says what and why), on `device`
    (a CUDA device; the CPU, without pinned memory or a scaler, for trying scripts that import this)."""
    import torch
    import torchvision

    model_fn = {18: torchvision.models.resnet18, 34: torchvision.models.resnet34,
                50: torchvision.models.resnet50, 101: torchvision.models.resnet101,
                152: torchvision.models.resnet152}[depth]
    memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = model_fn(num_classes=classes).to(device=device, memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    gpu = device.type == "cuda"
    if gpu:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    images_host = torch.randn(batch_size, 3, image_size, image_size).contiguous(memory_format=memory_format)
    labels_host = torch.randint(0, classes, (batch_size,))
    if gpu:
        images_host, labels_host = images_host.pin_memory(), labels_host.pin_memory()
    images_dev = images_host.to(device, non_blocking=True)
    labels_dev = labels_host.to(device, non_blocking=True)

    autocast_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
    scaler = None
    if precision == "amp-fp16" and gpu:
        try:
            scaler = torch.amp.GradScaler("cuda")  # PyTorch >= 2.3
        except (AttributeError, TypeError):
            scaler = torch.cuda.amp.GradScaler()

    def step():
        if input_place == "host":
            images = images_host.to(device, non_blocking=True)
            labels = labels_host.to(device, non_blocking=True)
        else:
            images, labels = images_dev, labels_dev
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = loss_fn(model(images), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def pytorch_worker(args):
    import resource

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("cuda_compare worker: torch.cuda.is_available() is False "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    torch.manual_seed(args.seed)
    device = torch.device("cuda", args.gpu)
    torch.cuda.set_device(device)
    step = make_pytorch_step(device, args.depth, args.image_size, args.batch_size, args.precision, args.classes,
                             args.layout, args.input)
    B, S = args.batch_size, args.image_size

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000.0)
    median = statistics.median(times)
    print(json.dumps({
        "framework": "pytorch", "version": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(device),
        "depth": args.depth, "image_size": S, "batch_size": B, "precision": args.precision,
        "layout": args.layout, "input": args.input, "steps": args.steps,
        "step_ms_median": median, "images_per_second": B / (median / 1000.0),
        "peak_bytes": torch.cuda.max_memory_allocated(device),
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))
    return 0


# ---- The driver -------------------------------------------------------------------------------------------------

def ours_cmd(args, depth, size, batch, mode):
    return [args.ampwb, "bench", "--device", args.device, "--depth", str(depth), "--image-size", str(size),
            "--batch-size", str(batch), "--precision", mode, "--steps", str(args.steps),
            "--warmup", str(args.warmup), "--json"] + shlex.split(args.ampwb_args)


def pytorch_cmd(args, depth, size, batch, mode):
    gpu = args.device.split(":")[1] if ":" in args.device else "0"
    return [args.python, os.path.abspath(__file__), "--worker", "--gpu", gpu, "--depth", str(depth),
            "--image-size", str(size), "--batch-size", str(batch), "--precision", mode,
            "--layout", args.pytorch_layout, "--input", args.pytorch_input, "--steps", str(args.steps),
            "--warmup", str(args.warmup)]


def parse_config(text):
    try:
        depth, size, batch = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected DEPTH:IMAGE_SIZE:BATCH, e.g. 50:224:256, got {text!r}")
    if depth not in (18, 34, 50, 101, 152) or size <= 0 or batch <= 1:
        raise argparse.ArgumentTypeError(f"bad configuration {text!r}")
    return depth, size, batch


def median(values):
    return statistics.median(values) if values else float("nan")


def gib(n):
    return f"{n / 2**30:.1f} GiB"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--gpu", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--depth", type=int, default=50, help=argparse.SUPPRESS)
    p.add_argument("--image-size", type=int, default=224, help=argparse.SUPPRESS)
    p.add_argument("--batch-size", type=int, default=256, help=argparse.SUPPRESS)
    p.add_argument("--precision", choices=MODES, default="amp-fp16", help=argparse.SUPPRESS)
    p.add_argument("--layout", choices=["channels_last", "nchw"], default="channels_last", help=argparse.SUPPRESS)
    p.add_argument("--input", choices=["host", "device"], default="host", help=argparse.SUPPRESS)
    p.add_argument("--classes", type=int, default=1000, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)

    p.add_argument("--ampwb", default=os.path.join("build", "app", "ampwb"),
                   help="our engine's binary (default build/app/ampwb)")
    p.add_argument("--ampwb-args", default="", metavar="ARGS",
                   help="more options for our side, e.g. '--cuda-graphs on'")
    p.add_argument("--python", default=sys.executable, help="interpreter with torch+CUDA (default: this one)")
    p.add_argument("--device", default="cuda", help="cuda or cuda:N, for both sides (default cuda)")
    p.add_argument("--configs", nargs="+", type=parse_config, default=[parse_config(c) for c in DEFAULT_CONFIGS],
                   metavar="DEPTH:SIZE:BATCH", help=f"default {' '.join(DEFAULT_CONFIGS)}")
    p.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    p.add_argument("--pytorch-layout", choices=["channels_last", "nchw"], default="channels_last")
    p.add_argument("--pytorch-input", choices=["host", "device"], default="host",
                   help="host: a pinned batch copied every step (as ours); device: batch kept on the GPU")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps per run (cuDNN autotuning happens here)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per process")
    p.add_argument("--markdown", action="store_true", help="also print a table for docs/benchmarks.md")
    p.add_argument("--pytorch-only", action="store_true", help="skip our engine (to test this script)")
    args = p.parse_args(argv)
    for name in ("rounds", "steps"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be > 0")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return pytorch_worker(args)
    if not args.pytorch_only and not os.access(args.ampwb, os.X_OK):
        print(f"cuda_compare: error: {args.ampwb} is not an executable; build it first (with CUDA), "
              f"pass --ampwb PATH, or use --pytorch-only", file=sys.stderr)
        return 2

    keys = ["images_per_second", "step_ms_median", "peak_bytes"]
    results = {}  # (depth, size, batch, mode) -> {"ours": [...], "pytorch": [...], "ratios": [...]}
    header_done = False
    failures = []  # one failed process loses its own figure only

    def attempt(command, side, what):
        try:
            return require(run_json(command, args.timeout), keys, side)
        except BenchError as e:
            print(f"cuda_compare: {side} failed on {what}: {e}", file=sys.stderr, flush=True)
            failures.append(f"{side} {what}")
            return None

    for depth, size, batch in args.configs:
        for mode in args.modes:
            key = (depth, size, batch, mode)
            r = results[key] = {"ours": [], "pytorch": [], "ratios": []}
            for rnd in range(args.rounds):
                what = f"resnet{depth} {size}px b{batch} {mode} round {rnd + 1}"
                ours = lambda: None if args.pytorch_only else attempt(ours_cmd(args, depth, size, batch, mode),
                                                                      "ampwb", what)
                theirs = lambda: attempt(pytorch_cmd(args, depth, size, batch, mode), "pytorch", what)
                if rnd % 2 == 0:  # flip the order every round
                    o = ours()
                    t = theirs()
                else:
                    t = theirs()
                    o = ours()
                if not header_done and t is not None:
                    print(f"GPU: {t['device']}; PyTorch {t.get('version')} (CUDA {t.get('cuda')}, "
                          f"cuDNN {t.get('cudnn')}), layout {args.pytorch_layout}, input {args.pytorch_input}",
                          flush=True)
                    header_done = True
                if o is not None and not r["ours"]:
                    print(f"ours: {o.get('device')}", flush=True)
                line = f"resnet{depth} {size}px b{batch} {mode:8s} round {rnd + 1}/{args.rounds}:"
                if t is not None:
                    r["pytorch"].append(t)
                    line += f" pytorch {t['images_per_second']:8.1f} img/s"
                if o is not None:
                    r["ours"].append(o)
                    line += (f" | ours {o['images_per_second']:8.1f} img/s | "
                             f"{o.get('host_waits_per_step', float('nan')):.2f} host waits/step "
                             f"({o.get('host_sync', '?')})")
                    if o.get("cuda_graphs") == "on":
                        line += f" | {o.get('replayed_steps')} steps replayed as graphs"
                        if o.get("why_not_captured"):
                            line += f" (op by op: {o['why_not_captured']})"
                if o is not None and t is not None:
                    ratio = o["images_per_second"] / t["images_per_second"]
                    r["ratios"].append(ratio)
                    line += f" | ratio {ratio:.3f}"
                print(line, flush=True)

    def ips(runs):
        return median([x["images_per_second"] for x in runs]) if runs else float("nan")

    def peak(runs):
        return gib(median([x["peak_bytes"] for x in runs])) if runs else "n/a"

    print("\nmedians over rounds (images/s; ratio = median of per-round ours/pytorch):")
    print(f"{'configuration':32s} {'ours':>10s} {'pytorch':>10s} {'ratio':>7s} {'ours peak':>10s} {'pt peak':>10s}")
    for (depth, size, batch, mode), r in results.items():
        ratio_txt = f"{median(r['ratios']):7.3f}" if r["ratios"] else f"{'n/a':>7s}"
        print(f"{f'ResNet-{depth} {size}px b{batch} {mode}':32s} {ips(r['ours']):10.1f} {ips(r['pytorch']):10.1f} "
              f"{ratio_txt} {peak(r['ours']):>10s} {peak(r['pytorch']):>10s}")

    print("\ngoals:")
    for depth, size, batch in args.configs:
        fp16 = results.get((depth, size, batch, "amp-fp16"))
        fp32 = results.get((depth, size, batch, "fp32"))
        name = f"ResNet-{depth} {size}px b{batch}"
        if fp16 and fp16["ratios"]:
            ratio = median(fp16["ratios"])
            print(f"  {name}: amp-fp16 ours / PyTorch AMP {args.pytorch_layout} = {ratio:.3f} "
                  f"(issue 13 asks >= 0.8 for ResNet-50: {'met' if ratio >= 0.8 else 'NOT met'}; "
                  f"issue 18 asks >= 1: {'met' if ratio >= 1.0 else 'NOT met'})")
        if fp16 and fp32 and fp16["ours"] and fp32["ours"]:
            speedup = ips(fp16["ours"]) / ips(fp32["ours"])
            pt_speedup = ips(fp16["pytorch"]) / ips(fp32["pytorch"])
            print(f"  {name}: ours amp-fp16 / ours fp32 = {speedup:.2f}x ({'met' if speedup >= 2 else 'NOT met'}: "
                  f"goal >= 2x); PyTorch's own: {pt_speedup:.2f}x")

    if args.markdown:
        measured = [t for r in results.values() for t in r["pytorch"]] or [{}]
        print(f"\n<!-- bench/cuda_compare.py: {args.rounds} rounds x {args.steps} steps (warm-up {args.warmup}), "
              f"{measured[0].get('device')}, PyTorch {measured[0].get('version')} {args.pytorch_layout}, "
              f"input {args.pytorch_input}, medians -->")
        print("| Configuration | Mode | Ours img/s | PyTorch img/s | Ours / PyTorch | Ours peak GPU memory "
              "| PyTorch peak GPU memory | Our host waits per step |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for (depth, size, batch, mode), r in results.items():
            ratio = f"{median(r['ratios']):.2f}x" if r["ratios"] else "n/a"
            waits = (f"{median([x.get('host_waits_per_step', float('nan')) for x in r['ours']]):.2f}"
                     if r["ours"] else "n/a")
            print(f"| ResNet-{depth}, {size}px, batch {batch} | {mode} | {ips(r['ours']):.1f} "
                  f"| {ips(r['pytorch']):.1f} | {ratio} | {peak(r['ours'])} | {peak(r['pytorch'])} | {waits} |")
    if failures:
        print(f"\ncuda_compare: {len(failures)} measurement(s) failed: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
