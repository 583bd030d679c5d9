#!/usr/bin/env python3
"""A detector with its post-processing in the graph (NonZero, TopK of a computed k,
NonMaxSuppression, gathers of the kept boxes: issue 61) against onnxruntime. The model is
compiled once into a module (`tessera compile`; every count its selections make is a
runtime size), then run on a few images (standard normal, or uniform in [0, 1) with
`--uniform`, seeded by index): each image's kept boxes, scores and labels are checked
against onnxruntime's (the same number of each, boxes and scores within `--atol`, labels
and integer outputs equal). Then, in alternating rounds on the first image, the module's
median latency against onnxruntime's on the same thread count.

Prints per image the count of kept boxes and the largest differences, then per round
both medians and their ratio; the median and smallest ratio, the ratio of the minima,
and the CPU steal over the run (from /proc/stat).

Usage: bench/detect_vs_ort.py MODEL.onnx [--input x] [--shape 1,3,320,320] [--images 3]
       [--tessera target/release/tessera] [--threads 2] [--rounds 7] [--repeat 10]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamic_vs_ort import steal, tessera_ms  # noqa: E402
from network_vs_ort import ort_median_ms, ort_session  # noqa: E402


def match_rows(got, want, atol):
    """Whether each detection (row k of every output) of `want` is one of `got`'s: equal
    integers, floats within `atol`, at the same row or, among rows whose scores (a float
    output of one dimension) are within 1e-5, another (two boxes of equal scores that
    rounding orders the other way). Returns how many rows matched elsewhere, or None."""
    n = want[0].shape[0]
    scores = next((w for w in want if w.ndim == 1 and w.dtype.kind == "f"), None)

    def same(j, r):
        for g, w in zip(got, want):
            if w.dtype.kind in "iub":
                if not np.array_equal(g[j], w[r]):
                    return False
            elif np.abs(g[j].astype(np.float64) - w[r]).max(initial=0.0) > atol:
                return False
        return True

    used, moved = set(), 0
    for r in range(n):
        if r not in used and same(r, r):
            used.add(r)
            continue
        if scores is None:
            return None
        near = [j for j in range(n) if j not in used and abs(scores[j] - scores[r]) <= 1e-5]
        j = next((j for j in near if same(j, r)), None)
        if j is None:
            return None
        used.add(j)
        moved += 1
    return moved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input", default="x")
    ap.add_argument("--shape", default="1,3,320,320")
    ap.add_argument("--images", type=int, default=3)
    ap.add_argument("--uniform", action="store_true")
    ap.add_argument("--atol", type=float, default=1e-3)
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    shape = [int(d) for d in a.shape.split(",")]
    sess = ort_session(a.model, a.threads)
    tmp = tempfile.mkdtemp()
    module = os.path.join(tmp, "detector.tsm")
    t = time.perf_counter()
    subprocess.run([a.tessera, "compile", "--onnx", a.model, "--target",
                    f"cpu -num-cores={a.threads}", "--out", module],
                   check=True, capture_output=True, text=True)
    print(f"model {a.model}: compiled in {time.perf_counter() - t:.1f} s; "
          f"{a.threads} threads, {a.rounds} rounds of {a.repeat} runs")
    images = []
    for i in range(a.images):
        rng = np.random.default_rng(i)
        x = rng.random(shape) if a.uniform else rng.standard_normal(shape)
        path = os.path.join(tmp, f"image{i}.npy")
        np.save(path, x.astype(np.float32))
        images.append(path)
        got_path = os.path.join(tmp, f"out{i}.npz")
        tessera_ms(a.tessera, module, {a.input: path}, 1, got_path)
        got = np.load(got_path)
        want = sess.run(None, {a.input: np.load(path)})
        gots = [got[f"output_{k}"] for k in range(len(want))]
        for k, (g, w) in enumerate(zip(gots, want)):
            if g.shape != w.shape:
                sys.exit(f"image {i}: output {k} is {g.shape}, onnxruntime's {w.shape}")
        swapped = match_rows(gots, want, a.atol)
        if swapped is None:
            sys.exit(f"image {i}: the detections differ from onnxruntime's")
        diffs = [float(np.abs(g.astype(np.float64) - w).max()) if w.size else 0.0
                 for g, w in zip(gots, want)]
        print(f"image {i}: {want[0].shape[0]} kept, shapes {[w.shape for w in want]}; "
              f"row by row largest differences {[f'{d:.2g}' for d in diffs]}; "
              f"{swapped} rows in another order among scores within 1e-5")
    feed = {a.input: np.load(images[0])}
    s0, t0 = steal()
    ratios, mins = [], {"tessera": [], "onnxruntime": []}
    for r in range(a.rounds):
        t_ms = tessera_ms(a.tessera, module, {a.input: images[0]}, a.repeat)
        o_ms = ort_median_ms(sess, feed, a.repeat)
        ratios.append(t_ms / o_ms)
        mins["tessera"].append(t_ms)
        mins["onnxruntime"].append(o_ms)
        print(f"round {r + 1}: tessera {t_ms:8.2f} ms   onnxruntime {o_ms:8.2f} ms   "
              f"ratio {t_ms / o_ms:5.2f}")
    s1, t1 = steal()
    print(f"median ratio tessera / onnxruntime: {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}); minima {min(mins['tessera']):.2f} / "
          f"{min(mins['onnxruntime']):.2f} ms = "
          f"{min(mins['tessera']) / min(mins['onnxruntime']):.2f}")
    print(f"CPU steal over the run: {100 * (s1 - s0) / max(1, t1 - t0):.2f} %")


if __name__ == "__main__":
    main()
