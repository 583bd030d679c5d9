#!/usr/bin/env python3
"""Search efficiency: the best GFLOPS reached after 64, 128, 256 and 512 (and 1000)
measured trials, 3 seeds each, on ResNet's conv2d NHWC 1x56x56x64 (*) 3x3x64x64 and on a
1024^3 matmul.

--policy templates (the default): the template tuners xgb, ga and random
(`tessera tune --templates --tuner T`).
--policy sketch: the auto-scheduler with the pack-sum XGBoost model against the same
search with the random model (`tessera tune --model xgb|random`), 1000 trials.

Each run is one `tessera tune --templates --op ...` with its own log; the table is read
back from the logs (records are in measurement order; the default schedule's record,
which every run logs first, is not a trial). Runs are interleaved (seed by seed, tuner
by tuner) so that a slow period of a shared machine hits every tuner alike.

    cargo build --release --workspace
    python3 bench/search_efficiency.py --bin target/release --out bench-out/efficiency
    python3 bench/search_efficiency.py --policy sketch --trials 1000 --only conv2d \
        --bin target/release --out bench-out/sketch-efficiency
"""
import argparse
import json
import os
import subprocess
import sys
import time

WORKLOADS = {
    # name: (op, shape, flop, extra flags)
    "conv2d NHWC 1x56x56x64 * 3x3x64x64": (
        "conv2d", "1,56,56,64,64,3,3", 2 * 56 * 56 * 64 * 64 * 9,
        ["--number", "2", "--min-repeat-ms", "10"]),
    "matmul 1024^3": (
        "matmul", "1024,1024,1024", 2 * 1024 ** 3,
        ["--number", "1", "--min-repeat-ms", "0", "--run-timeout", "0.25"]),
}
TUNERS = {"templates": ["xgb", "ga", "random"], "sketch": ["xgb", "random"]}
CHECKPOINTS = [64, 128, 256, 512, 1000]


def best_curve(log, flop, checkpoints):
    costs = []
    with open(log) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("schedule", {}).get("kind") == "default":
                continue
            res = r.get("result", {})
            ok = res.get("error_no", 0) == 0 and res.get("costs")
            costs.append(min(res["costs"]) if ok else None)
    out, best = [], 0.0
    for i, c in enumerate(costs, 1):
        if c:
            best = max(best, flop / c / 1e9)
        if i in checkpoints:
            out.append(best)
    return out, len(costs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--out", default="bench-out/efficiency")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=512)
    ap.add_argument("--only", choices=["conv2d", "matmul"])
    ap.add_argument("--policy", choices=["templates", "sketch"], default="templates")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tessera = os.path.join(args.bin, "tessera")
    checkpoints = [c for c in CHECKPOINTS if c <= args.trials]
    results = {}
    for name, (op, shape, flop, extra) in WORKLOADS.items():
        if args.only and op != args.only:
            continue
        for seed in range(1, args.seeds + 1):
            for tuner in TUNERS[args.policy]:
                log = os.path.join(args.out, f"{op}_{tuner}_{seed}.jsonl")
                if not os.path.exists(log):
                    t0 = time.time()
                    if args.policy == "templates":
                        how = ["--templates", "--tuner", tuner]
                    else:
                        # no re-measurement at the end: the curve is of the
                        # search's own measurements, and so is the wall time
                        how = ["--model", tuner, "--per-round", "64",
                               "--remeasure-top", "0"]
                    cmd = [tessera, "tune", "--op", op, "--op-shape", shape, "--pad", "same"] + how + [
                           "--tuner-seed", str(seed), "--trials",
                           str(args.trials), "--log", log + ".part"] + extra
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    if p.returncode != 0:
                        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
                    os.replace(log + ".part", log)
                    print(f"{name}: {tuner} seed {seed}: {time.time() - t0:.0f} s",
                          file=sys.stderr, flush=True)
                curve, n = best_curve(log, flop, checkpoints)
                results.setdefault(name, {}).setdefault(tuner, []).append(curve)
    print("Best GFLOPS after N trials (mean of %d seeds; min-max in brackets)\n" % args.seeds)
    if args.policy == "sketch":
        print("(tuner = the auto-scheduler's cost model)\n")
    print("| workload | tuner | " + " | ".join(f"{c} trials" for c in checkpoints) + " |")
    print("|---|---|" + "---|" * len(checkpoints))
    for name, by_tuner in results.items():
        for tuner, curves in by_tuner.items():
            cells = []
            for i in range(len(checkpoints)):
                v = [c[i] for c in curves if len(c) > i]
                cells.append(f"{sum(v) / len(v):.1f} [{min(v):.0f}-{max(v):.0f}]" if v else "-")
            print(f"| {name} | {tuner} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
