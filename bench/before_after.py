#!/usr/bin/env python3
"""No-regression check of a change between two tessera binaries (before, after), in one
run of alternating rounds: untuned ResNet-18 latency (`tessera run --network resnet-18
--benchmark`, the median of its runs) and the auto-scheduler's trials per minute on the
CPU (`tessera tune --op conv2d --op-shape 1,56,56,64,64,3,3 --trials N`, the whole
command's wall time, each round with empty kernel caches). Reported per measure: each
side's best, the per-round ratio after/before (median, min), the ratio of the minima,
and the CPU steal over the run (/proc/stat).

    python3 bench/before_after.py --before OLD_EXE --after target/release/tessera --rounds 5

With `--templates`, template tuning's trials per minute too (`tune --templates`).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def cpu_times():
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]


def resnet_ms(exe, repeat):
    out = subprocess.run([exe, "run", "--network", "resnet-18", "--benchmark", "--repeat",
                          str(repeat)], check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    i = next(k for k, l in enumerate(lines) if "median (ms)" in l)
    return float(lines[i + 1].split()[1])


def tune_trials_per_min(exe, trials, extra):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TESSERA_CACHE_DIR=os.path.join(d, "tc"))
        os.makedirs(env["TESSERA_CACHE_DIR"])
        t0 = time.monotonic()
        subprocess.run([exe, "tune", "--op", "conv2d", "--op-shape", "1,56,56,64,64,3,3",
                        "--trials", str(trials), "--log", os.path.join(d, "log.json")] + extra,
                       check=True, capture_output=True, text=True, env=env)
        return trials / ((time.monotonic() - t0) / 60.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--templates", action="store_true",
                    help="also time template tuning (`tune --templates`, AutoTVM's XGB tuner)")
    a = ap.parse_args()
    t0 = cpu_times()
    res = {"resnet-18 untuned ms": ([], []), "tune trials/min": ([], [])}
    if a.templates:
        res["tune --templates trials/min"] = ([], [])
    for r in range(a.rounds):
        for side, exe in ((0, a.before), (1, a.after)) if r % 2 == 0 else ((1, a.after), (0, a.before)):
            res["resnet-18 untuned ms"][side].append(resnet_ms(exe, a.repeat))
            res["tune trials/min"][side].append(tune_trials_per_min(exe, a.trials, []))
            if a.templates:
                res["tune --templates trials/min"][side].append(
                    tune_trials_per_min(exe, a.trials, ["--templates"]))
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[0][-1]:.2f} / {v[1][-1]:.2f}" for k, v in res.items()),
              flush=True)
    d = [b - x for x, b in zip(t0, cpu_times())]
    steal = 100 * d[7] / max(1, sum(d)) if len(d) > 7 else 0.0
    print(f"\nCPU steal over the run: {steal:.2f} %")
    print("| measure | before (best) | after (best) | after / before per round | minima ratio |")
    print("| --- | --- | --- | --- | --- |")
    for k, (b, x) in res.items():
        best = min if "ms" in k else max
        ratios = [y / z for y, z in zip(x, b)]
        print(f"| {k} | {best(b):.2f} | {best(x):.2f} | median {statistics.median(ratios):.2f}, "
              f"min {min(ratios):.2f} | {best(x) / best(b):.2f} |")


if __name__ == "__main__":
    main()
