#!/usr/bin/env python3
"""Convert the Fashion-MNIST IDX files into an image folder of PNGs.

Layout written:
    OUT/train/<class>/<index>.png
    OUT/test/<class>/<index>.png

Why: the engine's data loader reads a generic "one folder per class" image
tree, so the benchmark/training data needs to look like that. The Debian
package dataset-fashion-mnist ships only the raw gzipped IDX files.

Pure standard library on purpose (no numpy, no PIL) so that it runs on any
machine that has Python 3; the PNG encoder below is the minimal subset of
the format that we need: 8-bit grayscale, no interlace, filter type 0.
"""

import argparse
import gzip
import os
import struct
import sys
import zlib

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"

# Index = label value in the IDX label file. "T-shirt/top" cannot be a
# directory name, hence "T-shirt_top". "Ankle boot" keeps its space.
CLASSES = [
    "T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]

IMAGES_MAGIC = 2051  # IDX: unsigned byte, 3 dimensions
LABELS_MAGIC = 2049  # IDX: unsigned byte, 1 dimension

SPLITS = {
    # split name -> (images file, labels file)
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


class ConversionError(Exception):
    pass


def read_idx_images(path, limit):
    """Return (rows, cols, list of raw bytes per image), at most `limit` images."""
    with gzip.open(path, "rb") as f:
        header = f.read(16)
        if len(header) < 16:
            raise ConversionError(f"{path}: file too short for an IDX image header")
        magic, count, rows, cols = struct.unpack(">IIII", header)
        if magic != IMAGES_MAGIC:
            raise ConversionError(
                f"{path}: bad IDX magic {magic}, expected {IMAGES_MAGIC} (images file)")
        n = count if limit is None else min(count, limit)
        size = rows * cols
        data = f.read(n * size)  # only read what we need: fast for small limits
    if len(data) != n * size:
        raise ConversionError(f"{path}: truncated, expected {n} images of {rows}x{cols}")
    return rows, cols, [data[i * size:(i + 1) * size] for i in range(n)]


def read_idx_labels(path, limit):
    with gzip.open(path, "rb") as f:
        header = f.read(8)
        if len(header) < 8:
            raise ConversionError(f"{path}: file too short for an IDX label header")
        magic, count = struct.unpack(">II", header)
        if magic != LABELS_MAGIC:
            raise ConversionError(
                f"{path}: bad IDX magic {magic}, expected {LABELS_MAGIC} (labels file)")
        n = count if limit is None else min(count, limit)
        data = f.read(n)
    if len(data) != n:
        raise ConversionError(f"{path}: truncated, expected {n} labels")
    for i, label in enumerate(data):
        if label >= len(CLASSES):
            raise ConversionError(f"{path}: label {label} at index {i} is out of range 0-9")
    return data


def png_chunk(kind, payload):
    # Chunk = length, type, data, CRC32 over type+data (PNG spec section 5.3).
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))


def encode_gray_png(width, height, pixels):
    """Encode 8-bit grayscale pixels (row-major bytes) as a PNG file."""
    # IHDR: width, height, bit depth 8, colour type 0 (grayscale),
    # compression 0, filter method 0, interlace 0.
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    # Each scanline is prefixed with its filter type; 0 = None keeps it simple.
    raw = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + png_chunk(b"IHDR", ihdr)
            + png_chunk(b"IDAT", zlib.compress(raw, 9))
            + png_chunk(b"IEND", b""))


def count_pngs(split_dir):
    total = 0
    for cls in CLASSES:
        d = os.path.join(split_dir, cls)
        if os.path.isdir(d):
            total += sum(1 for name in os.listdir(d) if name.endswith(".png"))
    return total


def expected_count(source, split, limit):
    """Number of images the split will have: min(limit, count in the IDX header)."""
    path = os.path.join(source, SPLITS[split][0])
    with gzip.open(path, "rb") as f:
        header = f.read(8)
    if len(header) < 8:
        raise ConversionError(f"{path}: file too short for an IDX image header")
    magic, count = struct.unpack(">II", header)
    if magic != IMAGES_MAGIC:
        raise ConversionError(
            f"{path}: bad IDX magic {magic}, expected {IMAGES_MAGIC} (images file)")
    return count if limit is None else min(count, limit)


def convert_split(source, out, split, limit):
    images_file, labels_file = SPLITS[split]
    rows, cols, images = read_idx_images(os.path.join(source, images_file), limit)
    labels = read_idx_labels(os.path.join(source, labels_file), limit)
    if len(images) != len(labels):
        raise ConversionError(
            f"{split}: {len(images)} images but {len(labels)} labels in {source}")
    split_dir = os.path.join(out, split)
    for cls in CLASSES:
        os.makedirs(os.path.join(split_dir, cls), exist_ok=True)
    for index, (pixels, label) in enumerate(zip(images, labels)):
        path = os.path.join(split_dir, CLASSES[label], f"{index}.png")
        # Write to a temp name then rename, so an interrupted run never leaves
        # a half-written PNG that the idempotency count would accept.
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(encode_gray_png(cols, rows, pixels))
        os.replace(tmp, path)
    return len(images)


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help=f"directory with the four IDX .gz files (default {DEFAULT_SOURCE})")
    parser.add_argument("--out", required=True, help="output image folder")
    parser.add_argument("--train-limit", type=non_negative, default=None,
                        help="convert only the first N training images (default all 60000)")
    parser.add_argument("--test-limit", type=non_negative, default=None,
                        help="convert only the first N test images (default all 10000)")
    args = parser.parse_args(argv)

    limits = {"train": args.train_limit, "test": args.test_limit}
    try:
        for images_file, labels_file in SPLITS.values():
            for name in (images_file, labels_file):
                if not os.path.isfile(os.path.join(args.source, name)):
                    raise ConversionError(f"missing {os.path.join(args.source, name)}")

        expected = {s: expected_count(args.source, s, limits[s]) for s in SPLITS}
        existing = {s: count_pngs(os.path.join(args.out, s)) for s in SPLITS}
        # Idempotent: the converted tree is a pure function of the inputs and
        # limits, so an exact count match means there is nothing to do.
        if existing == expected:
            print(f"{args.out}: already holds {expected['train']} train and "
                  f"{expected['test']} test images, nothing to do")
            return 0
        if any(existing.values()):
            # A different limit was used before: remove stale PNGs so that the
            # tree matches exactly what was asked for.
            for s in SPLITS:
                for cls in CLASSES:
                    d = os.path.join(args.out, s, cls)
                    if os.path.isdir(d):
                        for name in os.listdir(d):
                            if name.endswith(".png") or name.endswith(".png.tmp"):
                                os.remove(os.path.join(d, name))

        written = {s: convert_split(args.source, args.out, s, limits[s]) for s in SPLITS}
    except (ConversionError, OSError, EOFError, gzip.BadGzipFile) as e:
        print(f"fashion_mnist_to_folder: error: {e}", file=sys.stderr)
        return 1

    print(f"wrote {written['train']} train and {written['test']} test images "
          f"({len(CLASSES)} classes) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
