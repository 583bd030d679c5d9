#!/usr/bin/env python3
"""Latency of every model bench/export_zoo.py wrote: `tessera run --onnx --benchmark`
(untuned, or with --log the history best of a record log) against onnxruntime, same
machine and thread count, in alternating rounds (each round times every model on both
sides, so both see the same load). Per model: the median and the min of the per-round
ratios tessera / onnxruntime and the ratio of the minima; with --baseline, the same
against another tessera binary (before/after a change). The CPU steal over the whole run
is read from /proc/stat.

Usage: bench/zoo_vs_ort.py ZOODIR [--tessera target/release/tessera] [--only NAME,…]
       [--threads 2] [--rounds 5] [--repeat 10] [--baseline EXE] [--log FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from network_vs_ort import ort_median_ms, ort_session, tessera_median_ms  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402


def cpu_times():
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]


def summary(ratios):
    return f"median {statistics.median(ratios):5.2f}  min {min(ratios):5.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("zoo")
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--only")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--layout", default="NHWC")
    ap.add_argument("--baseline", help="another tessera binary, also timed untuned")
    ap.add_argument("--log", help="time tessera with this record log's history best")
    a = ap.parse_args()
    manifest = json.load(open(os.path.join(a.zoo, "manifest.json")))
    if a.only:
        want = a.only.split(",")
        manifest = sorted((e for e in manifest if e["name"] in want), key=lambda e: want.index(e["name"]))
    sessions = {}
    for e in manifest:
        path = os.path.join(a.zoo, e["model"])
        sessions[e["name"]] = (path, ort_session(path, a.threads),
                               {e["input_name"]: np.load(os.path.join(a.zoo, e["input"]))})
    times = {e["name"]: {"t": [], "o": [], "b": []} for e in manifest}
    print(f"{a.threads} threads, onnxruntime {ort.__version__}, {a.rounds} rounds of {a.repeat} runs, "
          f"tessera {'with ' + a.log if a.log else 'untuned'}", flush=True)
    start = cpu_times()
    for r in range(a.rounds):
        for name, (path, sess, feed) in sessions.items():
            t, _ = tessera_median_ms(a.tessera, path, a.threads, a.repeat, a.layout, a.log)
            o = ort_median_ms(sess, feed, a.repeat)
            times[name]["t"].append(t)
            times[name]["o"].append(o)
            line = f"round {r + 1} {name:30} tessera {t:9.2f} ms  onnxruntime {o:9.2f} ms  ratio {t / o:5.2f}"
            if a.baseline:
                try:
                    b, _ = tessera_median_ms(a.baseline, path, a.threads, a.repeat, a.layout)
                    times[name]["b"].append(b)
                    line += f"  baseline {b:9.2f} ms"
                except subprocess.CalledProcessError:
                    line += "  baseline failed (import or build)"
            print(line, flush=True)
    end = cpu_times()
    d = [y - x for x, y in zip(start, end)]
    steal = 100 * d[7] / max(1, sum(d)) if len(d) > 7 else 0.0
    print(f"\nCPU steal over the run: {steal:.2f} %")
    head = "| model | tessera ms (min) | onnxruntime ms (min) | ratio per round | minima ratio |"
    if a.baseline:
        head += " tessera / baseline per round | baseline ms (min) |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for name, v in times.items():
        ratios = [t / o for t, o in zip(v["t"], v["o"])]
        row = (f"| {name} | {min(v['t']):.2f} | {min(v['o']):.2f} | {summary(ratios)} | "
               f"{min(v['t']) / min(v['o']):.2f} |")
        if a.baseline and v["b"]:
            rb = [t / b for t, b in zip(v["t"], v["b"])]
            row += f" {summary(rb)} | {min(v['b']):.2f} |"
        elif a.baseline:
            row += " – | fails |"
        print(row)


if __name__ == "__main__":
    main()
