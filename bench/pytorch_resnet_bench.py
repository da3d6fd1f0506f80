#!/usr/bin/python3
"""PyTorch reference for `ampwb bench`: time ResNet training steps on the CPU.

Mirrors what our engine's bench measures so the two numbers are comparable:
same network (see below), random init, synthetic seeded data,
one full training step = forward + CrossEntropyLoss + backward + SGD step
(lr 0.01, momentum 0.9) + zero_grad(set_to_none=True). Warm-up steps are not
timed (first steps pay for allocator growth and oneDNN primitive creation);
the median step time is reported because it resists outliers from a machine
shared with other work.

The networks:
  * depths 18, 34, 50, 101, 152: torchvision's ImageNet ResNets (needs
    python3-torchvision). Our engine builds the same network from 64 px up;
    below 64 px it swaps in a small stem, which torchvision does not.
  * depths 20, 32, 44, 56, 110: the CIFAR ResNets of He et al. (2016),
    written here because torchvision has none, built to match our engine's
    (engine/models/resnet.cpp) layer for layer: a 3x3 stride-1 stem conv +
    BN + ReLU (no max pool), 3 stages of (depth - 2) / 6 BasicBlocks of
    widths 16, 32, 64 (the first block of stages 2 and 3 has stride 2),
    projection shortcuts ("option B": 1x1 conv + BN) where the shape
    changes, global average pooling and a Linear classifier with bias.
    Convs have no bias and torchvision's init (Kaiming normal, fan_out,
    ReLU); BN has weight 1, bias 0, momentum 0.1, eps 1e-5. The parameter
    count is in the output ("parameters") so it can be checked against ours
    (ResNet-20, 10 classes: 272,474). Only torch is needed for these.

--precision bf16 is torch.autocast(bfloat16). PyTorch 1.13 sends BF16
convolutions to oneDNN only on CPUs with AVX-512 (BW or BF16); on an AVX2-only
CPU it falls back to aten's _slow_conv2d (im2col + a BF16 GEMM), which its
profiler shows taking ~99% of the step: there a BF16 step takes over ten times
as long as an FP32 one. That is PyTorch's real behaviour on such a CPU, not a
fault of this script; plan fewer steps for those runs.

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

try:
    import torchvision
except ImportError:
    # Only the ImageNet depths need it; the CIFAR ResNets are defined below.
    torchvision = None

from torch import nn

# ImageNet ResNets: torchvision.models builder names.
IMAGENET_DEPTHS = {18: "resnet18", 34: "resnet34", 50: "resnet50",
                   101: "resnet101", 152: "resnet152"}
# CIFAR ResNets (He et al. 2016, section 4.2): depth = 6n + 2.
CIFAR_DEPTHS = (20, 32, 44, 56, 110)
DEPTHS = sorted(list(IMAGENET_DEPTHS) + list(CIFAR_DEPTHS))


class CifarBasicBlock(nn.Module):
    """conv3x3(stride)-BN-ReLU-conv3x3-BN, + shortcut, ReLU.

    The shortcut is the identity, or a 1x1 conv (stride, no bias) + BN where
    the stride or width changes, as in our engine's Shortcut.
    """

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes, eps=1e-5, momentum=0.1)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes, eps=1e-5, momentum=0.1)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride, 0, bias=False),
                nn.BatchNorm2d(planes, eps=1e-5, momentum=0.1))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32 px images, the same network as our engine's.

    Names follow torchvision (conv1, bn1, layer1..3, fc) as ours do.
    """

    def __init__(self, depth, num_classes):
        super().__init__()
        if depth not in CIFAR_DEPTHS:
            raise ValueError(f"CIFAR ResNet depth must be one of {CIFAR_DEPTHS}, not {depth}")
        n = (depth - 2) // 6
        widths = (16, 32, 64)
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0], eps=1e-5, momentum=0.1)
        self.relu = nn.ReLU(inplace=True)
        in_planes = widths[0]
        stages = []
        for stage, planes in enumerate(widths):
            blocks = []
            for b in range(n):
                stride = 2 if stage > 0 and b == 0 else 1
                blocks.append(CifarBasicBlock(in_planes, planes, stride))
                in_planes = planes
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)  # PyTorch's default init, as ours
        for m in self.modules():
            # torchvision's ResNet init, which our engine's Conv2d and
            # BatchNorm2d use too.
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_model(depth, num_classes):
    if depth in CIFAR_DEPTHS:
        return CifarResNet(depth, num_classes)
    if torchvision is None:
        sys.exit(f"pytorch_resnet_bench: --depth {depth} needs torchvision "
                 f"(Debian: python3-torchvision); the CIFAR depths "
                 f"{', '.join(map(str, CIFAR_DEPTHS))} need only torch")
    return getattr(torchvision.models, IMAGENET_DEPTHS[depth])(weights=None, num_classes=num_classes)


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, choices=DEPTHS, default=18,
                   help="18/34/50/101/152: torchvision's ImageNet ResNets; "
                        "20/32/44/56/110: the CIFAR ResNets (use --classes 10)")
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
    model = build_model(args.depth, args.classes)
    parameters = parameter_count(model)
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
        "classes": args.classes,
        "parameters": parameters,
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
        print(f"pytorch {result['version']} resnet{args.depth} ({parameters:,} parameters, "
              f"{args.classes} classes) {args.image_size}px "
              f"batch {args.batch_size} {args.precision} {layout} "
              f"threads {args.threads}: {median_ms:.1f} ms/step (median of {args.steps}), "
              f"{result['images_per_second']:.1f} images/s, "
              f"max RSS {result['max_rss_bytes'] / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
