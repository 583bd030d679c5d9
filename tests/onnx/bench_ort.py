#!/usr/bin/env python3
"""Time an ONNX model in onnxruntime (CPU), for comparison with Tessera.

Usage: python3 tests/onnx/bench_ort.py MODEL.onnx [--threads N] [--repeat R]

Loads MODEL with intra_op_num_threads=N (default 2), inter_op_num_threads=1 and all
graph optimizations, runs it on a seeded random input (uniform [-1, 1], dynamic
dimensions taken as 1), warms up, times R runs (default 50) and prints

    onnxruntime  mean (ms) X  median (ms) Y  std (ms) Z
    onnxruntime <version>, N threads, R runs, input <name> <shape>
"""

import argparse
import sys
import time

import numpy as np
import onnxruntime as ort

DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


def main():
    ap = argparse.ArgumentParser(description="Time an ONNX model in onnxruntime (CPU).")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads (default 2)")
    ap.add_argument("--repeat", type=int, default=50, help="timed runs (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    args = ap.parse_args()

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])

    rng = np.random.default_rng(0)
    feeds = {}
    for inp in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
        dtype = DTYPES.get(inp.type, np.float32)
        if np.issubdtype(dtype, np.integer):
            feeds[inp.name] = np.zeros(shape, dtype)
        else:
            feeds[inp.name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)

    for _ in range(max(args.warmup, 1)):
        sess.run(None, feeds)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    t = np.array(times)
    print(f"onnxruntime  mean (ms) {t.mean():.4f}  median (ms) {np.median(t):.4f}  "
          f"std (ms) {t.std():.4f}")
    desc = ", ".join(f"{k} {list(v.shape)}" for k, v in feeds.items())
    print(f"onnxruntime {ort.__version__}, {args.threads} threads, {args.repeat} runs, input {desc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
