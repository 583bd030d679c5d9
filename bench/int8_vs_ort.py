#!/usr/bin/env python3
"""int8 latency: a float model and its quantized forms (bench/quantize_model.py), each
run by `tessera run --onnx` (untuned) and by onnxruntime, in alternating rounds on the
same machine and thread count. Per round and model prints both medians; at the end, per
quantized form, the median and min over rounds of tessera / onnxruntime, of tessera's
int8 / tessera's float32, and of onnxruntime's int8 / its float32, with the ratio of the
minima, and the CPU steal over the run (from /proc/stat). With --saturating, tessera
also runs each quantized model with `--int8-products saturating` (a third side of the
rounds, `tessera sat`).

Usage: bench/int8_vs_ort.py FLOAT.onnx QUANT.onnx [QUANT.onnx ...]
       [--tessera target/release/tessera] [--threads 2] [--rounds 5] [--repeat 20]
       [--saturating]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from network_vs_ort import feed_of, ort_median_ms, ort_session, tessera_median_ms  # noqa: E402



def steal_jiffies():
    with open("/proc/stat") as f:
        cpu = f.readline().split()[1:]
    v = [int(x) for x in cpu]
    return v[7], sum(v)


def summary(name, xs):
    return f"{name}: median {statistics.median(xs):.2f} (min {min(xs):.2f}, max {max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("float_model")
    ap.add_argument("quantized", nargs="+")
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--saturating", action="store_true",
                    help="also run the quantized models with --int8-products saturating")
    a = ap.parse_args()
    models = [a.float_model] + a.quantized
    sessions = {m: ort_session(m, a.threads) for m in models}
    feeds = {m: feed_of(s) for m, s in sessions.items()}
    times = {m: {"tessera": [], "ort": [], "sat": []} for m in models}
    print(f"{a.threads} threads, {a.rounds} rounds of {a.repeat} runs; float model {a.float_model}")
    s0, t0 = steal_jiffies()
    for r in range(a.rounds):
        # alternate the order of the two sides between rounds
        for m in models:
            sides = ["tessera", "ort"]
            if a.saturating and m != a.float_model:
                sides.append("sat")
            if r % 2 == 1:
                sides.reverse()
            for side in sides:
                if side == "ort":
                    ms = ort_median_ms(sessions[m], feeds[m], a.repeat)
                else:
                    extra = ("--int8-products", "saturating") if side == "sat" else ()
                    ms, build = tessera_median_ms(a.tessera, m, a.threads, a.repeat, "NHWC",
                                                  extra=extra)
                    if r == 0:
                        print(f"  {os.path.basename(m)} ({side}): {build}")
                times[m][side].append(ms)
            sat = f"   tessera sat {times[m]['sat'][-1]:8.2f} ms" if "sat" in sides else ""
            print(f"round {r + 1} {os.path.basename(m):>16}: tessera {times[m]['tessera'][-1]:8.2f} ms"
                  f"   onnxruntime {times[m]['ort'][-1]:8.2f} ms{sat}")
    s1, t1 = steal_jiffies()
    f = times[a.float_model]
    print(summary("float32 tessera / onnxruntime",
                  [t / o for t, o in zip(f["tessera"], f["ort"])]))
    for m in a.quantized:
        q = times[m]
        name = os.path.basename(m)
        pairs = [("tessera / onnxruntime", q["tessera"], q["ort"]),
                 ("tessera int8 / tessera float32", q["tessera"], f["tessera"])]
        if q["sat"]:
            pairs += [("tessera sat / onnxruntime", q["sat"], q["ort"]),
                      ("tessera sat / tessera float32", q["sat"], f["tessera"])]
        pairs.append(("onnxruntime int8 / onnxruntime float32", q["ort"], f["ort"]))
        for label, xs, ys in pairs:
            print(summary(f"{name} {label}", [x / y for x, y in zip(xs, ys)])
                  + f", minima {min(xs) / min(ys):.2f}")
    print(f"CPU steal over the run: {100 * (s1 - s0) / max(1, t1 - t0):.2f}%")


if __name__ == "__main__":
    main()
