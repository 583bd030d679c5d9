#!/usr/bin/env python3
"""Tuning throughput of two tessera binaries (before, after), alternating in rounds:
trials a minute of whole `tessera tune` commands (empty kernel cache, a new log each
time), on the workloads of issue 42:

- conv2d: `--op conv2d --op-shape 1,56,56,64,64,3,3 --trials 128` on the CPU;
- resnet-18: `--network resnet-18 --trials 192 --per-round 16 --no-network-check
  --compare-rounds 0` on the CPU (task extraction, references, baselines and the
  re-measurement included in the wall time; the checks after the search are not
  tuning);
- pocl: the same conv2d on `--target opencl` (PoCL), `--trials 64 --per-round 32`;
  pocl-128: `--trials 128` (four rounds: the batches after the first are prepared in
  parallel runners).

Per workload: each side's best rate, the per-round ratio after/before (median, min),
the ratio of the best rates, the estimated latency each side reached (median over the
rounds: the search's result, not a claim), and the CPU steal over the run
(/proc/stat).

    python3 bench/tune_throughput.py --before OLD --after NEW --rounds 4 [--only conv2d,pocl]
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

WORKLOADS = {
    "conv2d": (["--op", "conv2d", "--op-shape", "1,56,56,64,64,3,3", "--trials", "128"], 128),
    "resnet-18": (["--network", "resnet-18", "--trials", "192", "--per-round", "16",
                   "--no-network-check", "--compare-rounds", "0"], 192),
    "pocl": (["--op", "conv2d", "--op-shape", "1,56,56,64,64,3,3", "--target", "opencl",
              "--trials", "64", "--per-round", "32"], 64),
    "pocl-128": (["--op", "conv2d", "--op-shape", "1,56,56,64,64,3,3", "--target", "opencl",
                  "--trials", "128", "--per-round", "32"], 128),
}


def cpu_times():
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]


def tune(exe, args, trials):
    """(trials a minute of the whole command, the last estimated latency in ms)."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TESSERA_CACHE_DIR=os.path.join(d, "tc"))
        os.makedirs(env["TESSERA_CACHE_DIR"])
        t0 = time.monotonic()
        p = subprocess.run([exe, "tune", "--log", os.path.join(d, "log.json")] + args,
                           check=True, capture_output=True, text=True, env=env)
        secs = time.monotonic() - t0
    found = re.findall(r"estimated latency ([0-9.]+) ms", p.stdout + p.stderr)
    return trials * 60.0 / secs, float(found[-1]) if found else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--only", default="conv2d,resnet-18,pocl")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n]
    t0 = cpu_times()
    res = {n: {"before": [], "after": [], "lat_before": [], "lat_after": []} for n in names}
    for r in range(a.rounds):
        for n in names:
            args, trials = WORKLOADS[n]
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in order:
                rate, lat = tune(getattr(a, side), args, trials)
                res[n][side].append(rate)
                res[n]["lat_" + side].append(lat)
                print(f"round {r} {n} {side}: {rate:.0f} trials/min, estimated {lat:.4g} ms",
                      flush=True)
    t1 = cpu_times()
    d = [y - x for x, y in zip(t0, t1)]
    steal = 100.0 * d[7] / sum(d) if len(d) > 7 and sum(d) else float("nan")
    print(f"\nCPU steal over the run: {steal:.2f} %  ({a.rounds} rounds, sides alternating)")
    print("| workload | before best (trials/min) | after best | per-round after/before median | min | best ratio | est. latency before / after (ms, median) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        b, f = res[n]["before"], res[n]["after"]
        ratios = [y / x for x, y in zip(b, f)]
        print(f"| {n} | {max(b):.0f} | {max(f):.0f} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f} | {max(f) / max(b):.2f} | "
              f"{statistics.median(res[n]['lat_before']):.4g} / "
              f"{statistics.median(res[n]['lat_after']):.4g} |")


if __name__ == "__main__":
    main()
