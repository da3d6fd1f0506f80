#!/usr/bin/env python3
"""Loads the exports test_export wrote (tests/test_export.cpp) in ONNX Runtime and PyTorch and compares their logits
with the engine's: FP32 within 1e-4 relative and top-1 identical; FP16/BF16 weights within the bounds below.

Usage: export_check.py DIR   (DIR holds manifest.json and the files it names). Exits 1 naming every failure."""
import json
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from safetensors.torch import load_file
from torch import nn

# Logits of a model whose weights were rounded to 16 bits, against the FP32 engine's, relative to the largest logit
# of the image. Rounding a weight moves it by up to 2^-11 (FP16) or 2^-8 (BF16) of itself; through the 18-20 layers
# of the trained ResNet-18/20 those errors add up to a few units of the type's precision: 1.4e-3 (FP16) and 1.6e-2
# (BF16) measured here. The bounds allow about 7x that; the arithmetic stays FP32 (the graph casts the weights up
# first), so nothing else moves. Top-1 may differ (and is not checked) where two logits are closer than that.
LOW_PRECISION_BOUND = {"fp16": 1e-2, "bf16": 1e-1}
# FP32: the same weights and the same arithmetic in another order. Relative to each logit's magnitude; a logit below
# 1/100 of the image's largest is measured against that 1/100 (near zero, relative error means nothing).
FP32_BOUND = 1e-4


class CifarResNet(nn.Module):
    """The workbench's ResNet-20/32/44/56/110 (docs/export.md): a 3x3 stem, three stages of 16/32/64 channels,
    BasicBlocks with 1x1 projection shortcuts (torchvision's names, so the safetensors file loads strictly)."""

    def __init__(self, depth, num_classes, in_channels=3):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        blocks, channels = [], 16
        for stage, width in enumerate((16, 32, 64)):
            layer = []
            for b in range(n):
                stride = 2 if stage > 0 and b == 0 else 1
                downsample = None
                if stride != 1 or channels != width:
                    downsample = nn.Sequential(nn.Conv2d(channels, width, 1, stride, bias=False), nn.BatchNorm2d(width))
                layer.append(torchvision.models.resnet.BasicBlock(channels, width, stride, downsample))
                channels = width
            blocks.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3 = blocks
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def torch_model(case):
    depth, classes, channels = case["depth"], case["classes"], case["channels"]
    if depth in (20, 32, 44, 56, 110):
        return CifarResNet(depth, classes, channels)
    model = getattr(torchvision.models, f"resnet{depth}")(num_classes=classes)
    if channels != 3 or case["stem"] == "small":
        kernel, stride, pad = (7, 2, 3) if case["stem"] == "imagenet" else (3, 1, 1)
        model.conv1 = nn.Conv2d(channels, 64, kernel, stride, pad, bias=False)
    if case["stem"] == "small":
        model.maxpool = nn.Identity()
    return model


def compare(what, got, want, bound, failures, relative_to_max=False):
    """got/want: (N, classes). |got - want| <= bound * max(|want|, max|want| / 100) per logit, or with
    relative_to_max, bound * max|want| of its image."""
    scale = np.abs(want).max(axis=1, keepdims=True)
    if relative_to_max:
        err = float((np.abs(got - want) / scale).max())
    else:
        err = float((np.abs(got - want) / np.maximum(np.abs(want), 1e-2 * scale)).max())
    same_top1 = bool((got.argmax(1) == want.argmax(1)).all())
    status = "ok" if err <= bound and (same_top1 or relative_to_max) else "FAIL"
    print(f"{what}: max relative error {err:.2e} (bound {bound:.0e}), top-1 {'identical' if same_top1 else 'differs'}"
          f" -- {status}")
    if status != "ok":
        failures.append(what)
    return err


def main():
    folder = pathlib.Path(sys.argv[1])
    manifest = json.loads((folder / "manifest.json").read_text())
    failures = []
    torch.set_num_threads(2)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    for name, case in manifest.items():
        n, c, s = case["batch"], case["channels"], case["image_size"]
        pixels = np.fromfile(folder / case["pixels"], dtype=np.float32).reshape(n, c, s, s)
        want = np.fromfile(folder / case["logits"], dtype=np.float32).reshape(n, case["classes"])
        if not case["onnx"]:
            failures.append(f"{name}: no ONNX export (this build writes none)")
        for dtype, file in case["onnx"].items():
            path = str(folder / file)
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            meta = {p.key: p.value for p in model.metadata_props}
            if json.loads(meta["class_names"]) != case["class_names"] or int(meta["image_size"]) != s:
                failures.append(f"{name} {file}: metadata {meta}")
            if model.opset_import[0].version != 17:
                failures.append(f"{name} {file}: opset {model.opset_import[0].version}")
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            got = session.run(["logits"], {"pixels": pixels})[0]
            if dtype == "fp32":
                compare(f"{name} onnxruntime fp32", got, want, FP32_BOUND, failures)
                # The batch dimension is dynamic: one image alone gives its row of the batch.
                single = session.run(["logits"], {"pixels": pixels[-1:]})[0]
                compare(f"{name} onnxruntime fp32, batch of 1", single, want[-1:], FP32_BOUND, failures)
            else:
                compare(f"{name} onnxruntime {dtype}", got, want, LOW_PRECISION_BOUND[dtype], failures, True)
        for dtype, file in case["safetensors"].items():
            state = load_file(str(folder / file))
            model = torch_model(case)
            model.load_state_dict(state, strict=True)  # torchvision's names, every tensor, nothing more
            model.eval()
            raw = (folder / file).read_bytes()
            header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])["__metadata__"]
            mean = torch.tensor(json.loads(header["mean"])).view(1, -1, 1, 1)
            std = torch.tensor(json.loads(header["std"])).view(1, -1, 1, 1)
            with torch.no_grad():
                got = model((torch.from_numpy(pixels) / 255 - mean) / std).numpy()
            if dtype == "fp32":
                compare(f"{name} pytorch fp32", got, want, FP32_BOUND, failures)
            else:
                compare(f"{name} pytorch {dtype}", got, want, LOW_PRECISION_BOUND[dtype], failures, True)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"all {len(manifest)} cases load and agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
