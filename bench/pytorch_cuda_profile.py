#!/usr/bin/env python3
"""Where PyTorch's training step goes on a GPU, by kernel class, to set beside `ampwb bench --device cuda --profile`.
The step is cuda_compare.py's own (make_pytorch_step): torchvision ResNet, channels_last,
cudnn.benchmark, torch.autocast (with GradScaler for float16), SGD lr 0.01 momentum 0.9, a pinned host batch copied
every step.

usage: bench/pytorch_cuda_profile.py [--depth 50] [--image-size 224] [--batch-size 256] [--precision amp-fp16]
                                     [--steps 5] [--device cuda]
Prints the median step (synchronized, as cuda_compare.py times it), then the profiled steps' kernel time per step by
class and the kernels that take the most. Classes come from kernel names (batch norm before convolution: cuDNN's
batch-norm kernels are named bn_*), so read the kernel list beside them. `--device cpu` runs the same on the CPU
(operator self times, for trying the script without a GPU)."""
import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from cuda_compare import make_pytorch_step  # the step the comparison times, beside this file

# (class, substrings of the lower-cased kernel name), first match wins
CLASSES = [
    ("batch_norm", ("batch_norm", "bn_", "batchnorm")),
    ("pooling", ("pool",)),
    ("optimizer", ("multi_tensor", "foreach", "sgd")),
    ("scale_check", ("amp_", "unscale", "non_finite", "nonfinite")),
    ("loss", ("softmax", "nll", "cross_entropy")),
    ("copy", ("memcpy", "memset", "copy")),
    ("convolution", ("conv", "xmma", "implicit", "dgrad", "wgrad", "fprop", "cudnn", "cutlass", "gemm", "sm80_",
                     "sm90_")),
]
FRAMEWORK_EVENTS = ("aten::", "autograd::", "torch::", "optimizer.", "profilerstep", "cuda", "enumerate")


def class_of(name):
    lower = name.lower()
    for label, parts in CLASSES:
        if any(p in lower for p in parts):
            return label
    return "elementwise"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--precision", default="amp-fp16", choices=["fp32", "tf32", "amp-fp16", "amp-bf16"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = parser.parse_args()
    device = torch.device(a.device)
    gpu = device.type == "cuda"
    step = make_pytorch_step(device, a.depth, a.image_size, a.batch_size, a.precision)

    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(a.steps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    median_ms = statistics.median(times) * 1000
    print(f"PyTorch {torch.__version__}, {torch.cuda.get_device_name() if gpu else 'CPU'}: ResNet-{a.depth}, "
          f"{a.image_size} px, batch {a.batch_size}, {a.precision}, channels_last: median step {median_ms:.2f} ms "
          f"({a.batch_size / median_ms * 1000:.1f} images/s)")

    with profile(activities=[ProfilerActivity.CUDA if gpu else ProfilerActivity.CPU]) as prof:
        for _ in range(a.steps):
            step()
        sync()
    kernels = {}
    for e in prof.key_averages():
        if gpu:
            self_us = getattr(e, "self_device_time_total", None)
            if self_us is None:
                self_us = getattr(e, "self_cuda_time_total", 0)
        else:
            self_us = e.self_cpu_time_total
        if self_us > 0 and not (gpu and e.key.lower().startswith(FRAMEWORK_EVENTS)):
            kernels[e.key] = kernels.get(e.key, 0.0) + self_us / 1000 / a.steps
    by_class = {}
    for name, ms in kernels.items():
        by_class[class_of(name)] = by_class.get(class_of(name), 0.0) + ms
    total = sum(by_class.values())
    print(f"kernel time per step by class ({'device' if gpu else 'operator self'} time; the step is "
          f"{median_ms:.2f} ms):")
    for label, ms in sorted(by_class.items(), key=lambda kv: -kv[1]):
        print(f"  {label:14s} {ms:9.2f} ms  {100 * ms / total:5.1f}%")
    print(f"  {'sum':14s} {total:9.2f} ms")
    print("kernels taking the most, ms per step:")
    for name, ms in sorted(kernels.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {ms:8.3f}  {class_of(name):12s} {name[:110]}")


if __name__ == "__main__":
    main()
