#!/usr/bin/env python3
"""Data-parallel scaling on one machine: 2 ranks x 1 thread against 1 rank x 1 thread.

Each round trains, as its own processes, ResNet-20 at 32 px with batch 64 per rank on the same Fashion-MNIST cut,
once alone and once as two ranks of one mpirun, in fp32 and amp-bf16; the order of the two alternates between
rounds, so a busy machine's drift weighs on both alike. A run's speed is the images per second of its last epoch (the
first warms the caches); the scaling efficiency of a round is the two ranks' speed over twice the one rank's, and the
median over rounds is reported with every round's value and the machine's load average around each round.

For the two ranks, the last epoch's time split (rank 0's, `ampwb show --json`) gives the communication share: the
all-reduce's time on its communication thread per step ("communication"), how long the trainer's thread waited for it
after backward ("waiting"), both as shares of the step, and the share of the communication backward hid
(1 - waiting / communication). The one rank's step has neither.

usage: bench/dist_scaling.py [--ampwb build/app/ampwb] [--rounds 3] [--data DIR] | tee docs/logs/...
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def train(args, ranks, mode, db):
    command = [args.ampwb, "train", "--data", args.data, "--depth", "20", "--image-size", "32", "--batch-size", "64",
               "--threads", "1", "--epochs", "2", "--precision", mode, "--max-train-images", str(args.images),
               "--max-val-images", "256", "--no-checkpoint", "--json", "--db", db]
    if ranks > 1:
        command = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "--allow-run-as-root", "-x",
                   "OMP_NUM_THREADS=1", "-np", str(ranks)] + command
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    summary = json.loads(out.stdout)
    shown = subprocess.run([args.ampwb, "show", str(summary["run_id"]), "--json", "--db", db], capture_output=True,
                           text=True, env=env)
    if shown.returncode != 0:
        sys.exit(f"ampwb show {summary['run_id']} failed ({shown.returncode}):\n{shown.stderr}")
    times = json.loads(shown.stdout)["epoch_times"][-1]
    step = times["step_seconds"]
    communication = times.get("communication_seconds", 0.0)
    waiting = times.get("communication_wait_seconds", 0.0)
    return {"speed": summary["epochs"][-1]["images_per_second"], "step": step, "communication": communication / step,
            "waiting": waiting / step, "hidden": 1 - waiting / communication if communication > 0 else 0.0}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ampwb", default="build/app/ampwb")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--images", type=int, default=4096, help="training images (64 steps alone, 32 a rank)")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; ResNet-20 32 px, batch 64 per rank, 1 thread a rank")
    efficiency, communication, waiting, hidden = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            for mode in ("fp32", "amp-bf16"):
                order = (1, 2) if round_index % 2 == 0 else (2, 1)
                run = {}
                load_before = os.getloadavg()[0]
                for ranks in order:
                    run[ranks] = train(args, ranks, mode, os.path.join(tmp, f"runs-{round_index}-{mode}-{ranks}.db"))
                e = run[2]["speed"] / (2 * run[1]["speed"])
                efficiency.setdefault(mode, []).append(e)
                communication.setdefault(mode, []).append(run[2]["communication"])
                waiting.setdefault(mode, []).append(run[2]["waiting"])
                hidden.setdefault(mode, []).append(run[2]["hidden"])
                print(f"round {round_index + 1} {mode:8s}: 1 rank {run[1]['speed']:7.1f} img/s, 2 ranks "
                      f"{run[2]['speed']:7.1f} img/s, efficiency {e:.2f}; 2 ranks' step {1000 * run[2]['step']:.1f} ms:"
                      f" communication {100 * run[2]['communication']:.1f}%, waiting {100 * run[2]['waiting']:.1f}%,"
                      f" hidden {100 * run[2]['hidden']:.0f}% (load average {load_before:.2f} ->"
                      f" {os.getloadavg()[0]:.2f})", flush=True)
    def rounds(values, scale=1.0, digits=2):
        return ", ".join(f"{scale * v:.{digits}f}" for v in values)
    for mode, values in efficiency.items():
        print(f"{mode:8s}: scaling efficiency median {statistics.median(values):.2f} (rounds: {rounds(values)}); "
              f"2 ranks: communication {100 * statistics.median(communication[mode]):.1f}% of the step "
              f"(rounds: {rounds(communication[mode], 100, 1)}), waiting for it "
              f"{100 * statistics.median(waiting[mode]):.1f}% (rounds: {rounds(waiting[mode], 100, 1)}), "
              f"hidden by backward {100 * statistics.median(hidden[mode]):.0f}% "
              f"(rounds: {rounds(hidden[mode], 100, 0)})")


if __name__ == "__main__":
    main()
