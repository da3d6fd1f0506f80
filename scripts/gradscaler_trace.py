#!/usr/bin/env python3
"""Records what PyTorch's own torch.amp.GradScaler does, step by step, over a scripted sequence of finite, overflowing
and inf/NaN gradients: the scale each step used, whether it skipped the optimizer step, the scale and growth tracker
after update(). tests/golden/gradscaler_trace.json is this script's output; the loss scaler's tests replay the same
gradients and must follow it at every step.

Needs PyTorch 2.3 or later (torch.amp.GradScaler on the CPU; Debian's 1.13 has no CPU kernels for it). The GPU
machine's PyTorch records on "cuda" too (gpu-bundle/verify.sh), so the CUDA and CPU kernels can be compared. The
committed trace was recorded on an H200 with PyTorch 2.11 on "cuda" and "cpu", which agreed at every step, as did
PyTorch 2.5.1's CPU trace before it (docs/gpu/2026-11-26-h200/call1):

    python3 scripts/gradscaler_trace.py --devices cuda cpu --out tests/golden/gradscaler_trace.json
    python3 scripts/gradscaler_trace.py --devices cpu --out trace.json --against tests/golden/gradscaler_trace.json
"""
import argparse
import json
import math
import random
import sys

import torch

# A step's gradient: the loss is sum(w * g) with g a single value, so w's gradient is g times the scale (in FP32).
# "large" is finite but overflows FP32 once multiplied by a scale above about 3.4e38 / 3e34 = 1.1e4: whether that step
# is skipped depends on the scale the scaler has reached, which is what makes it a test of the whole state machine.
GRADIENTS = {"finite": 0.5, "large": 3e34, "inf": math.inf, "-inf": -math.inf, "nan": math.nan}

# (name, GradScaler arguments, steps, the share of steps with a bad gradient): PyTorch's defaults past a growth
# interval, then factors that are not powers of two (the scale is an FP32 tensor: every update is rounded), then a
# scale that would grow past FP32's largest. The shares keep each scale moving both ways rather than sinking to 0.
CONFIGS = [
    ("defaults", {}, 4500, 0.01),
    ("odd factors", {"init_scale": 1000.0, "growth_factor": 1.7, "backoff_factor": 0.3, "growth_interval": 7}, 3000,
     0.02),
    ("near the top", {"init_scale": 2.0**125, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3}, 500,
     0.05),
]


def script(steps, growth_interval, bad_share, seed):
    """The kinds of gradient, step by step: each bad kind once, a clean stretch past the growth interval, then phases
    of clean steps (with a tenth "large"), scattered bad steps and short bursts of them."""
    rng = random.Random(seed)
    kinds = ["inf", "nan", "large", "-inf"] + ["finite"] * (growth_interval + 10)
    while len(kinds) < steps:
        if rng.random() < bad_share * 5:  # a burst: one to three bad steps in a row
            kinds += [rng.choice(["inf", "-inf", "nan", "large"]) for _ in range(rng.randint(1, 3))]
        for _ in range(rng.randint(1, 2 * growth_interval)):
            bad = rng.random() < bad_share / 2
            kinds.append(rng.choice(["inf", "-inf", "nan", "large"]) if bad else rng.choice(["finite"] * 9 + ["large"]))
    return kinds[:steps]


def record(device, kwargs, kinds):
    scaler = torch.amp.GradScaler(device, **kwargs)
    w = torch.zeros(1, device=device, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=1e-3)
    steps = []
    for kind in kinds:
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            w.zero_()  # from 0 every step, so that an applied step always moves it (its gradient is never 0)
        g = torch.full((1,), GRADIENTS[kind], device=device)
        scale_used = scaler.get_scale()
        scaler.scale((w * g).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        skipped = bool(w.detach().item() == 0.0)
        tracker = int(scaler.state_dict()["_growth_tracker"])
        steps.append([kind, scale_used, skipped, scaler.get_scale(), tracker])
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", nargs="+", default=["cpu"], help="cpu, cuda (each recorded; they must agree)")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--seed", type=int, default=2018)
    parser.add_argument("--against", help="a trace recorded before (the committed one): every step must agree")
    args = parser.parse_args()
    if not hasattr(torch.amp, "GradScaler"):
        sys.exit(f"torch {torch.__version__} has no torch.amp.GradScaler: PyTorch 2.3 or later is needed")
    out = {
        "format": "ampwb gradscaler trace 1",
        "made_by": "scripts/gradscaler_trace.py",
        "torch": torch.__version__,
        "gradients": GRADIENTS | {"inf": "inf", "-inf": "-inf", "nan": "nan"},
        "columns": ["gradient", "scale_used", "skipped", "scale_after", "growth_tracker_after"],
        "configs": [],
    }
    for index, (name, kwargs, steps, bad_share) in enumerate(CONFIGS):
        full = {"init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000} | kwargs
        kinds = script(steps, full["growth_interval"], bad_share, args.seed + index)
        traces = {device: record(device, kwargs, kinds) for device in args.devices}
        first = args.devices[0]
        for device in args.devices[1:]:
            if traces[device] != traces[first]:
                at = next(i for i, (a, b) in enumerate(zip(traces[first], traces[device])) if a != b)
                sys.exit(f"{name}: {first} and {device} differ at step {at}: {traces[first][at]} against "
                         f"{traces[device][at]}")
        skipped = sum(step[2] for step in traces[first])
        scales = [step[1] for step in traces[first]]
        grew = any(step[3] > step[1] for step in traces[first])
        backed_off = any(step[3] < step[1] for step in traces[first])
        if not (grew and backed_off):
            sys.exit(f"{name}: the scale must both grow and back off in the trace (grew: {grew}, backed off: "
                     f"{backed_off}); change the script's mix of gradients")
        print(f"{name}: {steps} steps on {' and '.join(args.devices)} agree; {skipped} skipped; scale from "
              f"{min(scales):g} to {max(scales):g}, {scales[-1]:g} at the end", file=sys.stderr)
        out["configs"].append({"name": name, "scaler": full, "recorded_on": args.devices, "steps": traces[first]})
    if args.against:
        with open(args.against) as f:
            before = {config["name"]: config["steps"] for config in json.load(f)["configs"]}
        for config in out["configs"]:
            old, new = before.get(config["name"], []), config["steps"]
            at = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
            if at < max(len(old), len(new)):
                sys.exit(f"{config['name']}: differs from {args.against} at step {at} "
                         f"({old[at] if at < len(old) else 'absent'} there, {new[at] if at < len(new) else 'absent'} here)")
        print(f"every step agrees with {args.against}", file=sys.stderr)
    # One line a step, so that a difference shows as one line of a diff.
    lines = [json.dumps({k: v for k, v in out.items() if k != "configs"})[:-1] + ', "configs": [']
    for i, config in enumerate(out["configs"]):
        lines.append(json.dumps({k: v for k, v in config.items() if k != "steps"})[:-1] + ', "steps": [')
        lines.append(",\n".join(json.dumps(step) for step in config["steps"]))
        lines.append("]}" + ("," if i + 1 < len(out["configs"]) else ""))
    lines.append("]}")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
