#!/usr/bin/python3
"""PyTorch reference for `ampwb bench`: time ResNet training steps on the CPU.

Mirrors what our engine's bench measures so the two numbers are comparable:
same model family (torchvision ResNet, random init), synthetic seeded data,
one full training step = forward + CrossEntropyLoss + backward + SGD step
(lr 0.01, momentum 0.9) + zero_grad(set_to_none=True). Warm-up steps are not
timed (first steps pay for allocator growth and oneDNN primitive creation);
the median step time is reported because it resists outliers from a machine
shared with other work.

Shebang is /usr/bin/python3 because torch comes from Debian's python3-torch;
a pyenv `python3` on PATH may not have it (see the import fallback below).
"""

import argparse
import json
import resource
import statistics
import sys
import time

try:
    import torch
    import torchvision
except ImportError:
    # `python3` may resolve to an interpreter without torch (e.g. a pyenv
    # shim); Debian's python3-torch lives under /usr/bin/python3. Re-run once
    # with that interpreter instead of failing on a PATH detail.
    import os
    SYSTEM_PYTHON = "/usr/bin/python3"
    if (os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)
            and os.path.exists(SYSTEM_PYTHON)
            and not os.environ.get("AMPWB_BENCH_REEXEC")):
        os.environ["AMPWB_BENCH_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    raise

DEPTHS = {
    18: torchvision.models.resnet18,
    34: torchvision.models.resnet34,
    50: torchvision.models.resnet50,
    101: torchvision.models.resnet101,
    152: torchvision.models.resnet152,
}


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, choices=sorted(DEPTHS), default=18)
    p.add_argument("--image-size", type=positive, default=64)
    p.add_argument("--batch-size", type=positive, default=32)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true",
                   help="use torch.channels_last (NHWC) for model and input")
    p.add_argument("--steps", type=positive, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=positive, default=2)
    p.add_argument("--classes", type=positive, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON line")
    args = p.parse_args(argv)
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = DEPTHS[args.depth](weights=None, num_classes=args.classes)
    model = model.to(memory_format=memory_format).train()

    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, args.classes, (args.batch_size,))

    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    use_bf16 = args.precision == "bf16"

    def step():
        # Autocast covers forward + loss only, as recommended by PyTorch AMP;
        # backward runs in the dtypes autocast chose for each op.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16):
            loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()

    times_ms = []
    for _ in range(args.steps):
        start = time.perf_counter()
        loss = step()
        # CPU ops are synchronous, so no device sync is needed; .item() just
        # makes sure nothing lazy is left outside the timed region.
        loss.item()
        times_ms.append((time.perf_counter() - start) * 1000.0)

    median_ms = statistics.median(times_ms)
    result = {
        "framework": "pytorch",
        "version": torch.__version__,
        "depth": args.depth,
        "image_size": args.image_size,
        "batch_size": args.batch_size,
        "precision": args.precision,
        "channels_last": args.channels_last,
        "threads": args.threads,
        "steps": args.steps,
        "step_ms_median": round(median_ms, 3),
        "images_per_second": round(args.batch_size / (median_ms / 1000.0), 3),
        # ru_maxrss is in KiB on Linux.
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if args.json:
        print(json.dumps(result), flush=True)
    else:
        layout = "channels_last" if args.channels_last else "NCHW"
        print(f"pytorch {result['version']} resnet{args.depth} {args.image_size}px "
              f"batch {args.batch_size} {args.precision} {layout} "
              f"threads {args.threads}: {median_ms:.1f} ms/step (median of {args.steps}), "
              f"{result['images_per_second']:.1f} images/s, "
              f"max RSS {result['max_rss_bytes'] / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
