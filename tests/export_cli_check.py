#!/usr/bin/env python3
"""The exports of stored runs against `ampwb predict --json`: trains a ResNet-20 and a ResNet-18 (ImageNet stem) on
Fashion-MNIST with the ampwb given, exports each with `ampwb export model` (ONNX and safetensors, fp32/fp16/bf16),
and compares ONNX Runtime's and PyTorch's logits on 32 real test images with predict's: FP32 within 1e-4 relative,
top-1 identical; FP16/BF16 within the bounds of export_check.py. FP32 files are exported by their extension alone.
docs/export.md's `pixels_of`, as a reader copies it, prepares PNG and JPEG files of other sizes for the ONNX file as
predict does: within 1e-4 of predict's logits, relative to the image's largest, on files whose pixels it
reproduces, 1e-2 on those where a few round the other way. Also: an unknown format, a file whose extension names none
and an unwritable path are refused.

Usage: export_cli_check.py AMPWB WORKDIR   (WORKDIR is emptied first). Exits 1 naming every failure."""
import gzip
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from PIL import Image
from safetensors.torch import load_file

from export_check import FP32_BOUND, LOW_PRECISION_BOUND, compare, torch_model

FASHION_MNIST = pathlib.Path("/usr/share/datasets/fashion-mnist")


def documented_pixels_of():
    """docs/export.md's pixels_of, run as a reader would copy it."""
    text = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "export.md").read_text()
    source = re.search(r"^def pixels_of\(.*?(?=^\S)", text, re.S | re.M)
    if not source:
        sys.exit("docs/export.md holds no pixels_of")
    namespace = {"np": np, "Image": Image}
    exec(source.group(0), namespace)
    return namespace["pixels_of"]


def images_of_other_sizes(folder, garment):
    """Files of other sizes than the runs' 28 px: "exact-" those whose pixels pixels_of reproduces (measured), "near-"
    those where a few round the other way (OpenCV's area sums in single precision, its bilinear weights in fixed
    point)."""
    folder.mkdir()
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:333, 0:517]
    wave = ((np.sin(x / 7.0) + np.cos(y / 11.0)) * 60 + 128).astype(np.uint8)
    waves = Image.fromarray(np.stack([wave, wave[::-1], 255 - wave], -1))
    waves.save(folder / "exact-waves.png")
    Image.fromarray(rng.integers(0, 256, (120, 200, 3), dtype=np.uint8)).save(folder / "exact-noise.png")
    # JPEG files decoded at 1/8 scale: 300x260 (33 px after it) and 260x220 (28 px, the edge of the rule). Exact
    # where Pillow and OpenCV share Debian's libjpeg-turbo.
    waves.crop((0, 0, 300, 260)).save(folder / "exact-waves.jpg", quality=90)
    Image.fromarray(garment).resize((260, 220), Image.NEAREST).save(folder / "exact-garment.jpg", quality=90)
    Image.fromarray(garment).resize((50, 40), Image.BICUBIC).save(folder / "near-garment-40.png")
    waves.resize((20, 16), Image.BICUBIC).save(folder / "near-waves-16.png")
    waves.resize((84, 56), Image.BICUBIC).save(folder / "exact-waves-56.png")  # halved: OpenCV's own rounding
    wide = (wave[:200, :300].astype(np.uint16) * 257 + rng.integers(0, 256, (200, 300))).astype(np.uint16)
    Image.fromarray(wide).save(folder / "exact-grey-16-bit.png")


def main():
    ampwb, work = sys.argv[1], pathlib.Path(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    home = work / "home"
    home.mkdir(parents=True)
    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"),
               XDG_CONFIG_HOME=str(home / "config"), OMP_NUM_THREADS="2")
    env.pop("AMPWB_DB", None)
    db = str(work / "runs.sqlite")

    def ampwb_run(*args, expect=0):
        done = subprocess.run([ampwb, *args, "--db", db], env=env, capture_output=True, text=True)
        if done.returncode != expect:
            sys.exit(f"ampwb {' '.join(args)}: exit {done.returncode}, expected {expect}\n{done.stdout}{done.stderr}")
        return done

    # 32 test images as PNG files: the pixels predict decodes, and the ones the exports are given.
    with gzip.open(FASHION_MNIST / "t10k-images-idx3-ubyte.gz") as f:
        raw = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28)[:32]
    images = work / "images"
    images.mkdir()
    for i, pixels in enumerate(raw):
        Image.fromarray(pixels, mode="L").save(images / f"{i:02d}.png")
    pixels = np.repeat(raw[:, None].astype(np.float32), 3, axis=1)  # grey replicated to RGB, as predict does

    other_sizes = work / "other-sizes"
    images_of_other_sizes(other_sizes, raw[0])
    pixels_of = documented_pixels_of()

    failures = []
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    torch.set_num_threads(2)
    for run, (depth, stem) in enumerate([(20, "small"), (18, "imagenet")], start=1):
        ampwb_run("train", "--data", str(FASHION_MNIST), "--depth", str(depth), "--stem", stem, "--epochs", "1",
                  "--max-train-images", "256", "--max-val-images", "64", "--batch-size", "32")
        predictions = json.loads(ampwb_run("predict", str(run), str(images), "--json").stdout)
        by_file = {pathlib.Path(p["image"]).name: p for p in predictions}
        want = np.array([by_file[f"{i:02d}.png"]["logits"] for i in range(32)], dtype=np.float32)
        classes = None
        for fmt in ("onnx", "safetensors"):
            for dtype in ("fp32", "fp16", "bf16"):
                out = work / f"run{run}.{dtype}.{fmt}"
                # FP32 files name their format by their extension alone, as a user would.
                given = ["--format", fmt] if dtype != "fp32" else []
                ampwb_run("export", "model", str(run), *given, "--dtype", dtype, "--out", str(out))
                what = f"ResNet-{depth} {fmt} {dtype}"
                if fmt == "onnx":
                    model = onnx.load(str(out))
                    onnx.checker.check_model(model, full_check=True)
                    meta = {p.key: p.value for p in model.metadata_props}
                    classes = json.loads(meta["class_names"])
                    session = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
                    got = session.run(["logits"], {"pixels": pixels})[0]
                else:
                    raw_file = out.read_bytes()
                    header = json.loads(raw_file[8:8 + int.from_bytes(raw_file[:8], "little")])["__metadata__"]
                    case = {"depth": depth, "classes": len(classes), "channels": 3, "stem": stem}
                    net = torch_model(case)
                    net.load_state_dict(load_file(str(out)), strict=True)
                    net.eval()
                    mean = torch.tensor(json.loads(header["mean"])).view(1, -1, 1, 1)
                    std = torch.tensor(json.loads(header["std"])).view(1, -1, 1, 1)
                    with torch.no_grad():
                        got = net((torch.from_numpy(pixels) / 255 - mean) / std).numpy()
                if dtype == "fp32":
                    compare(f"{what} against predict", got, want, FP32_BOUND, failures)
                else:
                    compare(f"{what} against predict", got, want, LOW_PRECISION_BOUND[dtype], failures, True)
        # The documented preparation of files predict resizes, through this run's FP32 ONNX file.
        session = ort.InferenceSession(str(work / f"run{run}.fp32.onnx"), options, providers=["CPUExecutionProvider"])
        size = int(session.get_modelmeta().custom_metadata_map["image_size"])
        for p in json.loads(ampwb_run("predict", str(run), str(other_sizes), "--json").stdout):
            name = pathlib.Path(p["image"]).name
            got = session.run(["logits"], {"pixels": pixels_of(str(other_sizes / name), size)})[0]
            bound = FP32_BOUND if name.startswith("exact-") else 1e-2
            compare(f"ResNet-{depth} docs/export.md's pixels_of on {name}", got, np.array([p["logits"]], np.float32),
                    bound, failures, True)
        top1 = [classes[int(i)] for i in want.argmax(1)]
        if top1 != [by_file[f"{i:02d}.png"]["class"] for i in range(32)]:
            failures.append(f"ResNet-{depth}: predict's class is not its top logit's")

    refused = ampwb_run("export", "model", "1", "--format", "tflite", "--out", str(work / "x"), expect=2)
    if "tflite" not in refused.stderr:
        failures.append(f"an unknown format: {refused.stderr}")
    refused = ampwb_run("export", "model", "1", "--out", str(work / "model.bin"), expect=1)
    if "cannot tell the format" not in refused.stderr or (work / "model.bin").exists():
        failures.append(f"a file whose extension names no format: {refused.stderr}")
    # A missing folder is made; a file where the folder should be is refused, naming it, and nothing is written.
    made = ampwb_run("export", "model", "1", "--format", "onnx", "--out", str(work / "made" / "m.onnx"), expect=0)
    if not (work / "made" / "m.onnx").is_file():
        failures.append(f"a missing folder not made: {made.stdout} {made.stderr}")
    (work / "plain").write_text("x")
    refused = ampwb_run("export", "model", "1", "--format", "onnx", "--out", str(work / "plain" / "m.onnx"), expect=1)
    if f"'{work / 'plain'}' is a file, not a folder" not in refused.stderr:
        failures.append(f"an unwritable path: {refused.stderr}")
    # A file there already is kept unless --overwrite asks to replace it.
    kept = work / "run1.fp32.onnx"
    before = kept.read_bytes()
    refused = ampwb_run("export", "model", "2", "--out", str(kept), expect=1)
    if "exists already" not in refused.stderr or kept.read_bytes() != before:
        failures.append(f"a model written over without --overwrite: {refused.stderr}")
    ampwb_run("export", "model", "2", "--out", str(kept), "--overwrite")
    if kept.read_bytes() == before:
        failures.append("--overwrite did not replace the model")

    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("the exports of both runs load and agree with ampwb predict")
    return 0


if __name__ == "__main__":
    sys.exit(main())
