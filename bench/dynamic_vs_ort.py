#!/usr/bin/env python3
"""One module for every sequence length against onnxruntime and against fixed-shape
builds (issue 61). A model exported with a symbolic sequence (bench/export_dynamic.py)
is compiled once for a range of lengths (`tessera compile --shape NAME=1,MIN..MAX` for
every input) and once per measured length (`--shape NAME=1,LEN`); then, in alternating
rounds, each length is timed on the range's module, on that length's module and on an
onnxruntime session of the same file (one session for every length). Inputs: token ids
uniform in [0, 1000), a padding mask (an input whose name holds "mask") with its last
quarter zero. Every length's output of the range's module is checked against
onnxruntime's first.

Prints per length the median over rounds of each ratio, its smallest round, and the
ratio of the minima; the CPU steal over the run (from /proc/stat).

With --log LOG (a `tessera tune` of the range), a second range module is compiled with
the log, checked the same way, and timed in the same rounds: its ratio to the untuned
range module and to onnxruntime. --no-fixed skips the lengths' own builds.

With --batch-range MIN..MAX (a model exported with a symbolic batch too,
`bench/export_dynamic.py … bert:bench:batch`), one module serves both ranges
(`--shape FIRST=b:MIN..MAX,s:RANGE`, the other inputs `b,s`) and each size is
BATCHxLENGTH (`--sizes 1x8,8x8,1x384,8x384`); each row of the padding mask has its last
quarter zero.

Usage: bench/dynamic_vs_ort.py MODEL.onnx --range 2..384 --sizes 8,32,128,384
       [--tessera target/release/tessera] [--threads 2] [--rounds 5] [--repeat 20]
       [--log TUNED.json] [--no-fixed] [--dims NAME=N,3,224,224 …]   (another layout of the size: a batch of images; float
       inputs then standard normal)
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
from network_vs_ort import ort_median_ms, ort_session  # noqa: E402


def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def feeds(names, size, dims=None, sess=None):
    batch, size = size if isinstance(size, tuple) else (1, size)
    rng = np.random.default_rng(batch * 1000 + size)
    out = {}
    if dims:
        # NAME=D0,D1,… with N the size: float inputs standard normal, integers in [0, 1000)
        types = {i.name: i.type for i in sess.get_inputs()}
        for d in dims:
            n, shape = d.split("=")
            shape = [size if x == "N" else int(x) for x in shape.split(",")]
            if "float" in types[n]:
                out[n] = rng.standard_normal(shape).astype(np.float32)
            else:
                out[n] = rng.integers(0, 1000, shape).astype(np.int64)
        return out
    for n in names:
        if "mask" in n:
            m = np.ones((batch, size), np.int64)
            m[:, size - size // 4:] = 0
            out[n] = m
        else:
            out[n] = rng.integers(0, 1000, (batch, size)).astype(np.int64)
    return out


def name_of(size):
    return f"{size[0]}x{size[1]}" if isinstance(size, tuple) else str(size)


def compile_module(exe, model, shapes, threads, out, log=None):
    cmd = [exe, "compile", "--onnx", model, "--target", f"cpu -num-cores={threads}", "--out", out]
    if log:
        cmd += ["--log", log]
    for s in shapes:
        cmd += ["--shape", s]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t


def tessera_ms(exe, module, files, repeat, output=None):
    cmd = [exe, "run", "--module", module, "--benchmark", "--repeat", str(repeat)]
    for n, f in files.items():
        cmd += ["--input", f"{n}={f}"]
    if output:
        cmd += ["--output", output]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    i = next(k for k, line in enumerate(lines) if "median (ms)" in line)
    return float(lines[i + 1].split()[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--range", required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--log", help="a tune of the range: also time the module built with it")
    ap.add_argument("--no-fixed", action="store_true", help="do not build and time each length's own")
    ap.add_argument("--batch-range", help="MIN..MAX: the batch is symbolic too; sizes BxS")
    ap.add_argument("--dims", action="append",
                    help="NAME=D0,D1,… with N the size (default: NAME=1,N for every input)")
    a = ap.parse_args()
    def size_of(text):
        if "x" in text:
            b, n = text.split("x")
            return (int(b), int(n))
        return int(text)
    sizes = [size_of(s) for s in a.sizes.split(",")]
    sess = ort_session(a.model, a.threads)
    names = [i.name for i in sess.get_inputs()]
    tmp = tempfile.mkdtemp()
    dyn = os.path.join(tmp, "range.tsm")
    dims = a.dims or [f"{n}=1,N" for n in names]
    at = lambda v: [d.split("=")[0] + "=" + ",".join(  # noqa: E731
        str(v) if x == "N" else x for x in d.split("=")[1].split(",")) for d in dims]
    if a.batch_range:
        ranged = [f"{names[0]}=b:{a.batch_range},s:{a.range}"] + [f"{n}=b,s" for n in names[1:]]

        def at(v):  # noqa: F811
            return ranged if v == a.range else [f"{n}={v[0]},{v[1]}" for n in names]
    secs = compile_module(a.tessera, a.model, at(a.range), a.threads, dyn)
    print(f"range module ({a.range}): compiled in {secs:.1f} s", flush=True)
    tuned = None
    if a.log:
        tuned = os.path.join(tmp, "tuned.tsm")
        secs = compile_module(a.tessera, a.model, at(a.range), a.threads, tuned, a.log)
        print(f"range module with {a.log}: compiled in {secs:.1f} s", flush=True)
    fixed, files, fd = {}, {}, {}
    for s in sizes:
        if not a.no_fixed:
            fixed[s] = os.path.join(tmp, f"fixed_{name_of(s)}.tsm")
            secs = compile_module(a.tessera, a.model, at(s), a.threads, fixed[s])
            print(f"length {name_of(s)} module: compiled in {secs:.1f} s", flush=True)
        fd[s] = feeds(names, s, a.dims, sess)
        files[s] = {}
        for n, v in fd[s].items():
            files[s][n] = os.path.join(tmp, f"{n}_{name_of(s)}.npy")
            np.save(files[s][n], v)
        out = os.path.join(tmp, f"out_{name_of(s)}.npy")
        tessera_ms(a.tessera, dyn, files[s], 1, out)
        want = sess.run(None, fd[s])[0]
        diff = np.abs(np.load(out) - want).max()
        print(f"length {name_of(s)}: range module against onnxruntime, max abs diff {diff:.2e}", flush=True)
        if tuned:
            tessera_ms(a.tessera, tuned, files[s], 1, out)
            diff = np.abs(np.load(out) - want).max()
            print(f"length {name_of(s)}: tuned range module against onnxruntime, max abs diff {diff:.2e}",
                  flush=True)
    st0 = steal()
    times = {s: {"range": [], "fixed": [], "ort": [], "tuned": []} for s in sizes}
    for r in range(a.rounds):
        for s in sizes:
            t = times[s]
            t["range"].append(tessera_ms(a.tessera, dyn, files[s], a.repeat))
            t["ort"].append(ort_median_ms(sess, fd[s], a.repeat))
            if tuned:
                t["tuned"].append(tessera_ms(a.tessera, tuned, files[s], a.repeat))
            if fixed:
                t["fixed"].append(tessera_ms(a.tessera, fixed[s], files[s], a.repeat))
            said = " ".join(f"{k} {v[-1]:.3f} ms," for k, v in t.items() if v)
            print(f"round {r + 1} length {name_of(s)}: {said}", flush=True)
    st1 = steal()
    print(f"steal {100 * (st1[0] - st0[0]) / max(1, st1[1] - st0[1]):.2f}%")
    cols = [("range", "ort")]
    if fixed:
        cols += [("range", "fixed"), ("fixed", "ort")]
    if tuned:
        cols += [("tuned", "range"), ("tuned", "ort")]
    name = {"range": "range", "ort": "onnxruntime", "fixed": "length's own", "tuned": "tuned range"}
    heads = " | ".join(f"{name[x]} / {name[y]} (median; min; minima)" for x, y in cols)
    print(f"| length | {heads} | minima (ms) |")
    print("|---" * (len(cols) + 2) + "|")
    for s in sizes:
        t = times[s]
        def ratio(x, y):
            rs = [p / q for p, q in zip(t[x], t[y])]
            return f"{statistics.median(rs):.2f}; {min(rs):.2f}; {min(t[x]) / min(t[y]):.2f}"
        minima = ", ".join(f"{name[k]} {min(v):.2f}" for k, v in t.items() if v)
        print(f"| {name_of(s)} | " + " | ".join(ratio(x, y) for x, y in cols) + f" | {minima} |")


if __name__ == "__main__":
    main()
