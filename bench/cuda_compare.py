#!/usr/bin/env python3
"""Compare `ampwb bench --device cuda` with PyTorch on the same GPU, per precision mode.

Runs on a GPU machine whose Python has PyTorch with CUDA (and torchvision).
For each model configuration (default: ResNet-50 224 px batch 256, ResNet-18
224 px batch 256) and each precision mode our engine has on a GPU (fp32, tf32,
amp-fp16, amp-bf16, fp16-o2, fp16-pure, amp-fp8; amp-fp8 needs compute
capability 8.9 or later) it times training steps of our engine and of PyTorch,
eager and with CUDA graphs, and prints throughputs, peak GPU memory and ratios,
plus the issue's two goals:
  * amp-fp16 ResNet-50: ours at least as fast as PyTorch AMP + channels_last;
  * amp-fp16 at least 2x our own fp32.
The default run (7 modes, 2 models, 3 rounds, 3 processes a round) outlasts one
10-minute device call; scripts/gpu-verify.sh runs parts of it.

Method (as bench/compare_pytorch.py, and why):
  * Every measurement is a separate process: no allocator or cuDNN-cache state
    carries over, and peak memory is per run.
  * Ours, PyTorch eager and PyTorch graphed alternate within each round, and
    the order flips every round, so drift (clocks, thermals, other jobs) hits
    every side alike.
  * Figures are medians over rounds (3 by default); each ratio is the median
    of the per-round ratios ours / that PyTorch side.

What PyTorch runs (this file re-runs itself with --worker for that side):
  torchvision ResNet, random init, channels_last model and input (NVIDIA's
  advice for tensor cores; --pytorch-layout nchw for the default layout),
  torch.backends.cudnn.benchmark = True (ours also times cuDNN's algorithms
  once per shape), SGD lr 0.01 momentum 0.9 (as `ampwb bench`), a full step:
  forward, CrossEntropyLoss, backward, optimizer step, zero_grad(set_to_none).
  Precision modes (ours -> PyTorch's recipe):
    fp32      FP32, TF32 off for matmul and cuDNN
    tf32      FP32 storage, TF32 tensor cores (allow_tf32 on)
    amp-fp16  torch.autocast(float16) + torch.amp.GradScaler (dynamic scale)
    amp-bf16  torch.autocast(bfloat16), no scaler
    fp16-o2   Apex O2 by hand, an exact counterpart of ours: model.half() with
              the batch-norm layers kept in FP32, input cast to FP16, logits
              cast to FP32 for the loss, SGD on FP32 master copies of the FP16
              weights (their FP16 gradients copied into the masters, which
              GradScaler unscales, checks for inf/NaN and steps, skipping the
              step on overflow, with its dynamic scale), the masters copied back
              to the FP16 weights. Chosen over amp-fp16 as a stand-in because it
              takes a few lines and runs what ours runs (FP16 weights and
              activations); GradScaler stays the scaler, as it refuses to
              unscale FP16 gradients but not the masters' FP32 ones. The copies
              run one tensor at a time (Apex fuses them), a small cost beside
              the step.
    fp16-pure model.half(), batch norm included, logits cast to FP32 for the
              loss, SGD on the FP16 weights, no scaler (Apex O3)
    amp-fp8   PyTorch's amp-bf16: PyTorch 2.11 has no FP8 convolutions (its
              torch._scaled_mm covers matrix products only), and BF16 is what
              amp-fp8 computes in outside its convolutions and linear layer;
              the tables say so beside the figures
  CUDA graphs (--pytorch-graphs): the graphed side wraps the model in
  torch.cuda.make_graphed_callables, so its forward and backward replay as
  two graphs; the batch's copy, the loss, the optimizer step and GradScaler
  (scale, unscale, inf check, update) stay eager, and the scale reaches the
  graphed backward through the loss's gradient, so a new scale or a skipped
  step needs no new capture. (Ours, --cuda-graphs, captures its whole step.)
  Autocast runs without its weight-cast cache there, as
  make_graphed_callables requires.
  Input: by default a pinned host batch copied with non_blocking=True every
  step, as a DataLoader(pin_memory=True) feeds it and as `ampwb bench` passes a
  host batch to every step; --pytorch-input device keeps the batch on the GPU.
  Warm-up: the seconds from building the model to the end of the untimed
  steps, the device finished, on both sides: what cuDNN's timing of its
  engines for each new shape, capture and the first allocations cost before
  full speed.
  Time: torch.cuda.synchronize() around every step; the median step. Peak
  memory: torch.cuda.max_memory_allocated over the timed steps (a graphed
  side's graph pool included).

Usage on the GPU machine (from the repository root, after building):
  python3 bench/cuda_compare.py --ampwb build/app/ampwb --markdown
  python3 bench/cuda_compare.py --configs 50:224:256 --modes amp-fp16 fp16-o2 --rounds 3
  python3 bench/cuda_compare.py --pytorch-graphs off   # PyTorch eager only, as before graphs were compared
  python3 bench/cuda_compare.py --pytorch-only   # test the PyTorch side alone
"""

import argparse
import json
import os
import shlex
import statistics
import sys
import time

from compare_pytorch import BenchError, require, run_json  # the driver helpers, beside this file

MODES = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-o2", "fp16-pure", "amp-fp8"]
PYTORCH_RECIPES = ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-o2", "fp16-pure"]
PYTORCH_RECIPE_OF = {"amp-fp8": "amp-bf16"}  # PyTorch has no FP8 convolutions (the module docstring says more)
PYTORCH_RECIPE_NOTES = {  # what PyTorch runs beside each of our modes, for the tables
    "fp32": "FP32, TF32 off",
    "tf32": "FP32, TF32 on",
    "amp-fp16": "autocast FP16 + GradScaler",
    "amp-bf16": "autocast BF16",
    "fp16-o2": "FP16 model, FP32 batch norm and master weights, GradScaler",
    "fp16-pure": "FP16 model and batch norm, no master weights or scaler",
    "amp-fp8": "NOT FP8: its amp-bf16 (PyTorch has no FP8 convolutions)",
}
PYTORCH_SIDES = {"off": ["eager"], "on": ["graphed"], "both": ["eager", "graphed"]}
DEFAULT_CONFIGS = ["50:224:256", "18:224:256"]


# ---- The PyTorch side (run in its own process: `cuda_compare.py --worker ...`) ------------------------------------

def make_grad_scaler(torch, device):
    try:
        return torch.amp.GradScaler(device.type)  # PyTorch >= 2.3, the CPU's included
    except (AttributeError, TypeError):
        return torch.cuda.amp.GradScaler(enabled=device.type == "cuda")


def make_pytorch_step(device, depth, image_size, batch_size, precision, classes=1000, layout="channels_last",
                      input_place="host", graphs=False):
    """PyTorch's training step as this comparison runs it (the module docstring says what and why), on `device`
    (a CUDA device; the CPU, without pinned memory or graphs, for trying scripts that import this). `precision` is
    one of PYTORCH_RECIPES; `graphs` replays the model's forward and backward as CUDA graphs."""
    import torch
    import torchvision

    gpu = device.type == "cuda"
    if graphs and not gpu:
        raise ValueError("CUDA graphs need a CUDA device")
    model_fn = {18: torchvision.models.resnet18, 34: torchvision.models.resnet34,
                50: torchvision.models.resnet50, 101: torchvision.models.resnet101,
                152: torchvision.models.resnet152}[depth]
    memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = model_fn(num_classes=classes).to(device=device, memory_format=memory_format)
    model.train()
    model_dtype = torch.float16 if precision in ("fp16-o2", "fp16-pure") else torch.float32
    model.to(model_dtype)
    if precision == "fp16-o2":  # Apex O2 keeps batch norm in FP32; it takes the FP16 activations as they are
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.float()
    # fp16-o2's optimizer steps FP32 master copies of the FP16 weights; batch norm's FP32 ones are their own masters
    params = list(model.parameters())
    masters = [p.detach().float() if precision == "fp16-o2" and p.dtype == torch.float16 else p for p in params]
    low_and_master = [(p, m) for p, m in zip(params, masters) if m is not p]
    optimizer = torch.optim.SGD(masters, lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

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
    scaler = make_grad_scaler(torch, device) if precision in ("amp-fp16", "fp16-o2") else None

    def autocast():
        # make_graphed_callables refuses to graph under autocast's weight-cast cache
        return torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None,
                              cache_enabled=not graphs)

    if graphs:
        with autocast():  # captured under the autocast its replays run in
            model = torch.cuda.make_graphed_callables(model, (images_dev.to(model_dtype),))

    def step():
        if input_place == "host":
            images = images_host.to(device, non_blocking=True)
            labels = labels_host.to(device, non_blocking=True)
        else:
            images, labels = images_dev, labels_dev
        with autocast():
            # the loss in FP32, as ours computes it in every mode (autocast would cast the logits for it anyway)
            loss = loss_fn(model(images.to(model_dtype)).float(), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            for low, master in low_and_master:
                master.grad = low.grad.float()  # still scaled: GradScaler unscales and checks the masters' gradients
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for low, master in low_and_master:
                low.copy_(master)
                low.grad = None
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
    setup_start = time.perf_counter()
    step = make_pytorch_step(device, args.depth, args.image_size, args.batch_size, args.precision, args.classes,
                             args.layout, args.input, args.graphs)
    B, S = args.batch_size, args.image_size

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warmup_seconds = time.perf_counter() - setup_start
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
        "graphs": args.graphs, "layout": args.layout, "input": args.input, "steps": args.steps,
        "step_ms_median": median, "images_per_second": B / (median / 1000.0), "warmup_seconds": warmup_seconds,
        "peak_bytes": torch.cuda.max_memory_allocated(device),
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))
    return 0


# ---- The driver -------------------------------------------------------------------------------------------------

def ours_cmd(args, depth, size, batch, mode):
    return [args.ampwb, "bench", "--device", args.device, "--depth", str(depth), "--image-size", str(size),
            "--batch-size", str(batch), "--precision", mode, "--steps", str(args.steps),
            "--warmup", str(args.warmup), "--json"] + shlex.split(args.ampwb_args)


def pytorch_cmd(args, depth, size, batch, mode, side):
    gpu = args.device.split(":")[1] if ":" in args.device else "0"
    return [args.python, os.path.abspath(__file__), "--worker", "--gpu", gpu, "--depth", str(depth),
            "--image-size", str(size), "--batch-size", str(batch), "--precision", PYTORCH_RECIPE_OF.get(mode, mode),
            "--layout", args.pytorch_layout, "--input", args.pytorch_input, "--steps", str(args.steps),
            "--warmup", str(args.warmup)] + (["--graphs"] if side == "graphed" else [])


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
    p.add_argument("--precision", choices=PYTORCH_RECIPES, default="amp-fp16", help=argparse.SUPPRESS)
    p.add_argument("--graphs", action="store_true", help=argparse.SUPPRESS)
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
    p.add_argument("--modes", nargs="+", choices=MODES, default=MODES, help="default: all of them")
    p.add_argument("--pytorch-graphs", choices=sorted(PYTORCH_SIDES), default="both",
                   help="PyTorch eager (off), with its model's forward and backward as CUDA graphs (on), or both "
                        "(default), each in its own process")
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

    sides = PYTORCH_SIDES[args.pytorch_graphs]
    keys = ["images_per_second", "step_ms_median", "peak_bytes"]
    # (depth, size, batch, mode) -> {"ours": [...], "eager": [...], "graphed": [...], "ratios": {side: [...]}}
    results = {}
    header_done = False
    failures = []  # one failed process loses its own figure only

    def attempt(command, who, what):
        try:
            return require(run_json(command, args.timeout), keys, who)
        except BenchError as e:
            print(f"cuda_compare: {who} failed on {what}: {e}", file=sys.stderr, flush=True)
            failures.append(f"{who} {what}")
            return None

    for depth, size, batch in args.configs:
        for mode in args.modes:
            r = results[(depth, size, batch, mode)] = {"ours": [], "ratios": {s: [] for s in sides}}
            r.update({s: [] for s in sides})
            for rnd in range(args.rounds):
                what = f"resnet{depth} {size}px b{batch} {mode} round {rnd + 1}"
                commands = {s: (pytorch_cmd(args, depth, size, batch, mode, s), f"pytorch {s}") for s in sides}
                if not args.pytorch_only:
                    commands["ours"] = (ours_cmd(args, depth, size, batch, mode), "ampwb")
                order = [s for s in ["ours"] + sides if s in commands]
                if rnd % 2 == 1:  # flip the order every round
                    order.reverse()
                got = {s: attempt(*commands[s], what) for s in order}
                o = got.get("ours")
                t = next((got[s] for s in sides if got[s] is not None), None)
                if not header_done and t is not None:
                    print(f"GPU: {t['device']}; PyTorch {t.get('version')} (CUDA {t.get('cuda')}, "
                          f"cuDNN {t.get('cudnn')}), layout {args.pytorch_layout}, input {args.pytorch_input}, "
                          f"{' and '.join(sides)}", flush=True)
                    header_done = True
                if o is not None and not r["ours"]:
                    print(f"ours: {o.get('device')}", flush=True)
                parts = []
                for s in sides:
                    if got[s] is not None:
                        r[s].append(got[s])
                        parts.append(f"pytorch {s} {got[s]['images_per_second']:8.1f} img/s "
                                     f"(warm-up {got[s].get('warmup_seconds', float('nan')):.1f} s)")
                if o is not None:
                    r["ours"].append(o)
                    parts.append(f"ours {o['images_per_second']:8.1f} img/s "
                                 f"(warm-up {o.get('warmup_seconds', float('nan')):.1f} s)")
                    parts.append(f"{o.get('host_waits_per_step', float('nan')):.2f} host waits/step "
                                 f"({o.get('host_sync', '?')})")
                    if o.get("cuda_graphs") == "on":
                        replays = f"{o.get('replayed_steps')} steps replayed as graphs"
                        if o.get("why_not_captured"):
                            replays += f" (op by op: {o['why_not_captured']})"
                        parts.append(replays)
                    for s in sides:
                        if got[s] is not None:
                            ratio = o["images_per_second"] / got[s]["images_per_second"]
                            r["ratios"][s].append(ratio)
                            parts.append(f"ours/{s} {ratio:.3f}")
                print(f"resnet{depth} {size}px b{batch} {mode:9s} round {rnd + 1}/{args.rounds}: "
                      + " | ".join(parts), flush=True)

    def ips(runs):
        return median([x["images_per_second"] for x in runs]) if runs else float("nan")

    def peak(runs):
        return gib(median([x["peak_bytes"] for x in runs])) if runs else "n/a"

    def warmup(runs):
        return f"{median([x.get('warmup_seconds', float('nan')) for x in runs]):.1f} s" if runs else "n/a"

    def ratio_text(r, side, template):
        return template.format(median(r["ratios"][side])) if r["ratios"][side] else "n/a"

    print("\nmedians over rounds (images/s; ours/X = median of per-round ours / PyTorch X):")
    print(f"{'configuration':33s} {'ours':>10s}" + "".join(f" {'pt ' + s:>11s}" for s in sides)
          + "".join(f" {'ours/' + s:>12s}" for s in sides) + f" {'ours peak':>10s}"
          + "".join(f" {s + ' peak':>12s}" for s in sides) + "  PyTorch runs")
    for (depth, size, batch, mode), r in results.items():
        print(f"{f'ResNet-{depth} {size}px b{batch} {mode}':33s} {ips(r['ours']):10.1f}"
              + "".join(f" {ips(r[s]):11.1f}" for s in sides)
              + "".join(f" {ratio_text(r, s, '{:.3f}'):>12s}" for s in sides) + f" {peak(r['ours']):>10s}"
              + "".join(f" {peak(r[s]):>12s}" for s in sides) + f"  {PYTORCH_RECIPE_NOTES[mode]}")

    print("\ngoals:")
    for depth, size, batch in args.configs:
        fp16 = results.get((depth, size, batch, "amp-fp16"))
        fp32 = results.get((depth, size, batch, "fp32"))
        name = f"ResNet-{depth} {size}px b{batch}"
        for s in sides:
            if fp16 and fp16["ratios"][s]:
                ratio = median(fp16["ratios"][s])
                print(f"  {name}: amp-fp16 ours / PyTorch AMP {args.pytorch_layout} {s} = {ratio:.3f} "
                      f"(issue 13 asks >= 0.8 for ResNet-50: {'met' if ratio >= 0.8 else 'NOT met'}; "
                      f"issue 18 asks >= 1: {'met' if ratio >= 1.0 else 'NOT met'})")
        if fp16 and fp32 and fp16["ours"] and fp32["ours"]:
            speedup = ips(fp16["ours"]) / ips(fp32["ours"])
            pt_speedups = ", ".join(f"{s} {ips(fp16[s]) / ips(fp32[s]):.2f}x" for s in sides)
            print(f"  {name}: ours amp-fp16 / ours fp32 = {speedup:.2f}x ({'met' if speedup >= 2 else 'NOT met'}: "
                  f"goal >= 2x); PyTorch's own: {pt_speedups}")

    if args.markdown:
        measured = [t for r in results.values() for s in sides for t in r[s]] or [{}]
        graphed_how = (", graphed: make_graphed_callables on the model, its optimizer step and GradScaler eager"
                       if "graphed" in sides else "")
        print(f"\n<!-- bench/cuda_compare.py: {args.rounds} rounds x {args.steps} steps (warm-up {args.warmup}), "
              f"{measured[0].get('device')}, PyTorch {measured[0].get('version')} {args.pytorch_layout}, "
              f"input {args.pytorch_input}, PyTorch {' and '.join(sides)}{graphed_how}, medians -->")
        columns = (["Configuration", "Mode", "Ours img/s"] + [f"PyTorch {s} img/s" for s in sides]
                   + [f"Ours / PyTorch {s}" for s in sides] + ["Ours peak GPU memory"]
                   + [f"PyTorch {s} peak GPU memory" for s in sides] + ["Our warm-up"]
                   + [f"PyTorch {s} warm-up" for s in sides] + ["Our host waits per step", "PyTorch runs"])
        print("| " + " | ".join(columns) + " |")
        print("|---|---|" + "---:|" * (len(columns) - 3) + "---|")
        for (depth, size, batch, mode), r in results.items():
            waits = (f"{median([x.get('host_waits_per_step', float('nan')) for x in r['ours']]):.2f}"
                     if r["ours"] else "n/a")
            cells = ([f"ResNet-{depth}, {size}px, batch {batch}", mode, f"{ips(r['ours']):.1f}"]
                     + [f"{ips(r[s]):.1f}" for s in sides] + [ratio_text(r, s, "{:.2f}x") for s in sides]
                     + [peak(r["ours"])] + [peak(r[s]) for s in sides] + [warmup(r["ours"])]
                     + [warmup(r[s]) for s in sides] + [waits, PYTORCH_RECIPE_NOTES[mode]])
            print("| " + " | ".join(cells) + " |")
    if failures:
        print(f"\ncuda_compare: {len(failures)} measurement(s) failed: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
