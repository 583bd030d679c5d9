#!/usr/bin/env python3
"""Time to quality: the same search started cold and from another network's log (issue 40).

For each workload (an operator of the catalog, or a network) and each seed, `tessera
tune` runs twice on the same budget, alternating which goes first:

- cold: `--fresh-model`, the cost model starts from nothing (the first round of each
  task is random);
- carried: `--model-from SOURCE_LOG`, the model starts from the programs of another
  network's log (indexed first into this script's own model cache, with `--trials 0`:
  the log's budget is spent, nothing is measured).

The curve is what `tune` prints after every round: the network's estimated latency (an
operator: the search's own best, the default schedule left out). The figure of merit is
the trials each run needs to reach 95 % of the cold run's final quality (latency within
1/0.95 of the cold run's last), and, where the default schedules are already near the
machine's peak so that the estimate barely moves, the trials to reach 95 % of the cold
run's improvement over its start.

    python3 bench/time_to_quality.py --tessera target/release/tessera \\
        --source-log r50.log --source "--onnx resnet50.onnx" --out bench-out/ttq \\
        --op conv2d:1,56,56,64,64,3,3:--pad=1 --op matmul:512,512,512 --seeds 0 1 2 \\
        --op-trials 256 --network resnet-18 --network-trials 1000
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROUND = re.compile(r"Estimated total latency: ([0-9.]+) ms\s+Trials: (\d+)")


def run(cmd, env, out_path):
    t0 = time.time()
    with open(out_path, "w") as out:
        p = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {shlex.join(cmd)}; see {out_path}")
    return time.time() - t0


def first_round(log, n=64):
    """The median and best cost (ms) of the first `n` trials of an operator's log."""
    costs = []
    for line in open(log):
        r = json.loads(line)
        if r["schedule"].get("kind") == "default" or len(costs) >= n:
            continue
        c = r["result"]["costs"]
        ok = r["result"]["error_no"] == 0 and c
        costs.append(sum(c) / len(c) * 1e3 if ok else float("inf"))
    costs.sort()
    return costs[len(costs) // 2], costs[0]


def op_curve(log):
    """(trials, best search cost in ms so far) after each measured trial of the log."""
    best, n, curve, seen = None, 0, [], set()
    for line in open(log):
        r = json.loads(line)
        if r["schedule"].get("kind") == "default":
            continue
        key = json.dumps(r["schedule"], sort_keys=True)
        if key in seen:  # a re-measurement, not a trial
            continue
        seen.add(key)
        n += 1
        costs = r["result"]["costs"]
        if r["result"]["error_no"] == 0 and costs:
            c = sum(costs) / len(costs) * 1e3
            best = c if best is None else min(best, c)
        curve.append((n, best))
    return curve


def net_curve(out_path):
    """(trials, estimated latency in ms) after each round, from `tune`'s tables."""
    return [(int(t), float(ms)) for ms, t in ROUND.findall(open(out_path).read())]


def trials_to(curve, level):
    for n, v in curve:
        if v is not None and v <= level:
            return n
    return None


def steal_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--source-log", required=True)
    ap.add_argument("--source", required=True, help="the source log's network flags")
    ap.add_argument("--out", required=True)
    ap.add_argument("--op", action="append", default=[], help="NAME:DIMS[:FLAG=V,...]")
    ap.add_argument("--op-trials", type=int, default=256)
    ap.add_argument("--network", action="append", default=[])
    ap.add_argument("--network-trials", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, TESSERA_MODEL_CACHE=os.path.join(a.out, "models"))
    src = os.path.abspath(a.source_log)
    run([a.tessera, "tune", *shlex.split(a.source), "--log", src, "--trials", "0",
         "--compare-rounds", "0"], env, os.path.join(a.out, "index.out"))
    common = ["--remeasure-top", "0", "--compare-rounds", "0", "--no-network-check"]
    work = []
    for spec in a.op:
        name, dims, *flags = spec.split(":")
        extra = [f for kv in flags for f in kv.replace("=", " ").split()]
        work.append((f"{name} {dims}", ["--op", name, "--op-shape", dims, *extra],
                     a.op_trials, "op"))
    for net in a.network:
        work.append((net, ["--network", net], a.network_trials, "net"))
    s0 = steal_ticks()
    rows = []
    for label, flags, trials, kind in work:
        for seed in a.seeds:
            modes = [("cold", ["--fresh-model"]), ("carried", ["--model-from", src])]
            if seed % 2:
                modes.reverse()
            res = {}
            for mode, mflags in modes:
                tag = re.sub(r"[^a-z0-9]+", "_", f"{label}_{seed}_{mode}")
                log = os.path.join(a.out, tag + ".log")
                out = os.path.join(a.out, tag + ".out")
                if os.path.exists(log):
                    os.remove(log)
                cmd = [a.tessera, "tune", *flags, "--trials", str(trials), "--log", log,
                       "--tuner-seed", str(seed), *common, *mflags]
                secs = run(cmd, env, out)
                curve = op_curve(log) if kind == "op" else net_curve(out)
                res[mode] = (curve, secs)
                print(f"{label} seed {seed} {mode}: {secs:.0f} s, final "
                      f"{curve[-1][1]:.4f} ms", flush=True)
            cold, carried = res["cold"][0], res["carried"][0]
            final = cold[-1][1]
            start = cold[0][1] if kind == "net" else None
            row = {
                "workload": label, "seed": seed, "trials": trials,
                "cold_final_ms": final, "carried_final_ms": carried[-1][1],
                "cold_to_95": trials_to(cold, final / 0.95),
                "carried_to_95": trials_to(carried, final / 0.95),
                "cold_s": res["cold"][1], "carried_s": res["carried"][1],
            }
            if kind == "op":
                # the first round (64 trials): its median program and its best
                for mode in ("cold", "carried"):
                    tag = re.sub(r"[^a-z0-9]+", "_", f"{label}_{seed}_{mode}")
                    med, best = first_round(os.path.join(a.out, tag + ".log"))
                    row[f"{mode}_first_round_median_ms"] = med
                    row[f"{mode}_first_round_best_ms"] = best
                row["cold_to_99"] = trials_to(cold, final / 0.99)
                row["carried_to_99"] = trials_to(carried, final / 0.99)
            if start is not None:
                level = start - 0.95 * (start - final)
                row["start_ms"] = start
                row["cold_to_95_gain"] = trials_to(cold, level)
                row["carried_to_95_gain"] = trials_to(carried, level)
                row["cold_curve"] = cold
                row["carried_curve"] = carried
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("curve")}),
                  flush=True)
    s1 = steal_ticks()
    steal = 100.0 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
    json.dump({"rows": rows, "steal_percent": steal},
              open(os.path.join(a.out, "summary.json"), "w"), indent=1)
    print(f"CPU steal over the run: {steal:.2f} %")


if __name__ == "__main__":
    main()
