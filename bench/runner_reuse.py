#!/usr/bin/env python3
"""Tuning throughput with the runner process reused for many candidates against a fresh
runner process per candidate (`tessera tune --jobs-per-runner 64` vs `1`), in one run of
alternating rounds, each round with empty kernel caches (tessera's and PoCL's), as a
first tune on a machine has.

Workloads: the auto-scheduler on conv2d NHWC 1x56x56x64 * 3x3x64x64 on the CPU, and on
the same conv2d for `opencl` (PoCL here: it compiles each kernel when a process first
loads it). Reported per workload: trials per minute of each side (the tune's wall time,
the whole command), the per-round ratio reused/fresh (median, min), the ratio of the
minima, and the CPU steal over the run (/proc/stat).

    cargo build --release -p tessera-cli
    python3 bench/runner_reuse.py --bin target/release/tessera --rounds 5
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORKLOADS = {
    "cpu conv2d 1x56x56x64 3x3x64": ["--op", "conv2d", "--op-shape", "1,56,56,64,64,3,3", "--target", "cpu"],
    "opencl conv2d 1x56x56x64 3x3x64": ["--op", "conv2d", "--op-shape", "1,56,56,64,64,3,3", "--target", "opencl"],
}


def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def one(binary, args, trials, jobs):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TESSERA_CACHE_DIR=os.path.join(d, "tc"), POCL_CACHE_DIR=os.path.join(d, "pc"))
        os.makedirs(env["TESSERA_CACHE_DIR"])
        os.makedirs(env["POCL_CACHE_DIR"])
        cmd = [binary, "tune", *args, "--trials", str(trials), "--per-round", "16", "--compare-rounds", "0",
               "--number", "1", "--min-repeat-ms", "10", "--jobs-per-runner", str(jobs),
               "--log", os.path.join(d, "log.json")]
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        with open(os.path.join(d, "log.json")) as f:
            measured = sum(1 for _ in f)
        return wall, measured


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/tessera")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=48)
    args = ap.parse_args()
    s0 = steal()
    print("| workload | side | trials/min (median) | per-round ratio median | min | minima ratio |")
    print("|---|---|---|---|---|---|")
    for name, wargs in WORKLOADS.items():
        walls = {64: [], 1: []}
        counts = {64: [], 1: []}
        for k in range(args.rounds):
            for jobs in ((64, 1) if k % 2 == 0 else (1, 64)):
                w, n = one(args.bin, wargs, args.trials, jobs)
                walls[jobs].append(w)
                counts[jobs].append(n)
        rate = {j: [60 * n / w for n, w in zip(counts[j], walls[j])] for j in walls}
        ratios = [a / b for a, b in zip(rate[64], rate[1])]
        minima = max(rate[64]) / max(rate[1])
        for j, label in ((64, "reused (64 jobs)"), (1, "a process per candidate")):
            print(f"| {name} | {label} | {statistics.median(rate[j]):.1f} |"
                  + (f" {statistics.median(ratios):.2f} | {min(ratios):.2f} | {minima:.2f} |" if j == 64 else " | | |"))
    s1 = steal()
    print(f"\nCPU steal over the run: {100 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1]):.2f} %")


if __name__ == "__main__":
    main()
