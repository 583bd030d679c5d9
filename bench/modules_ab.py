#!/usr/bin/env python3
"""Two module files of one model (built before and after a change) timed in alternating
rounds on the same inputs: `tessera run --module M --input … --benchmark` for each, each
round's median per side; reported per input set: each side's best, the per-round ratio
after/before (median, min), the ratio of the minima, and the CPU steal over the run.

    python3 bench/modules_ab.py --before OLD.tsm --after NEW.tsm \
        --inputs input_ids=ids_8x384.npy,attention_mask=mask_8x384.npy [--inputs …] \
        [--rounds 5] [--repeat 3]

Each `--inputs` is one shape (comma-separated NAME=FILE.npy pairs).

With `--onnx MODEL.onnx`, an onnxruntime session of the model (`--threads`, default 2)
is timed in the same rounds as a third side, the median of `--repeat` runs a round, and
each module's ratio to it is reported too.
"""
import argparse
import os
import statistics
import subprocess
import sys


def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def median_ms(exe, module, inputs, repeat):
    cmd = [exe, "run", "--module", module, "--benchmark", "--repeat", str(repeat)]
    for pair in inputs.split(","):
        cmd += ["--input", pair]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    i = next(k for k, l in enumerate(lines) if "median (ms)" in l)
    return float(lines[i + 1].split()[1])


def ort_peer(model, threads):
    """onnxruntime's session of `model` as `network_vs_ort.py` makes it, and a function
    timing it on one `--inputs` set (its arrays loaded once)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    from network_vs_ort import ort_median_ms, ort_session

    session = ort_session(model, threads)
    feeds = {}

    def timed(inputs, repeat):
        if inputs not in feeds:
            pairs = (pair.split("=", 1) for pair in inputs.split(","))
            feeds[inputs] = {name: np.load(path) for name, path in pairs}
        return ort_median_ms(session, feeds[inputs], repeat)

    return timed


def ratio_cell(num, den):
    ratios = [y / z for y, z in zip(num, den)]
    return f"{statistics.median(ratios):.2f}; {min(ratios):.2f}; {min(num) / min(den):.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--inputs", action="append", required=True)
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--onnx", help="also time an onnxruntime session of this model")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    peer = ort_peer(a.onnx, a.threads) if a.onnx else None
    s0, t0 = steal()
    times = {x: ([], [], []) for x in a.inputs}
    for r in range(a.rounds):
        for x in a.inputs:
            # alternate which side goes first
            sides = [(0, a.before), (1, a.after)]
            for k, m in sides if r % 2 == 0 else sides[::-1]:
                times[x][k].append(median_ms(a.tessera, m, x, a.repeat))
            third = ""
            if peer is not None:
                times[x][2].append(peer(x, a.repeat))
                third = f", onnxruntime {times[x][2][-1]:.2f} ms"
            print(f"round {r + 1} {x}: before {times[x][0][-1]:.2f} ms, "
                  f"after {times[x][1][-1]:.2f} ms{third}", flush=True)
    s1, t1 = steal()
    print(f"steal {100.0 * (s1 - s0) / max(t1 - t0, 1):.2f}%")
    with_peer = peer is not None
    head = "| inputs | after / before (median; min; minima) |"
    head += " after / onnxruntime | before / onnxruntime |" if with_peer else ""
    print(head + " minima (ms): before, after" + (", onnxruntime |" if with_peer else " |"))
    print("|---" * (5 if with_peer else 3) + "|")
    for x, (b, f, o) in times.items():
        row = f"| {x} | {ratio_cell(f, b)} |"
        row += f" {ratio_cell(f, o)} | {ratio_cell(b, o)} |" if with_peer else ""
        minima = f"{min(b):.2f}, {min(f):.2f}" + (f", {min(o):.2f}" if with_peer else "")
        print(f"{row} {minima} |")


if __name__ == "__main__":
    main()
