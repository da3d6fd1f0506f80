#!/usr/bin/env python3
"""PyTorch's ResNet-18 training step at 224 px, batch 16, on 2 threads: three timed steps, then torch.profiler's
table over two more, to set beside `ampwb bench --profile` (docs/benchmarks.md).
usage: bench/pytorch_profile_step.py [nchw|cl]"""
import sys
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

torch.set_num_threads(2)
channels_last = len(sys.argv) > 1 and sys.argv[1] == "cl"
model = torchvision.models.resnet18(num_classes=1000)
images, labels = torch.randn(16, 3, 224, 224), torch.randint(0, 1000, (16,))
if channels_last:
    model = model.to(memory_format=torch.channels_last)
    images = images.to(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def step():
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(images), labels).backward()
    optimizer.step()


for _ in range(2):
    step()
times = []
for _ in range(3):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
print("plain steps ms", [round(t * 1000) for t in times])
with profile(activities=[ProfilerActivity.CPU]) as prof:
    step()
    step()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
