#!/usr/bin/env python3
"""ResNet-18's stem max pool (3x3, stride 2, pad 1 over 64 channels of 112x112):
`tessera op max_pool2d` (NHWC, its default schedule) against onnxruntime's MaxPool
(NCHW, a one-node model) on the same machine and thread count, in alternating rounds.

Usage: bench/pool_vs_ort.py [--tessera target/release/tessera] [--threads 2] [--rounds 3]
"""
import argparse
import json
import statistics
import subprocess
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper


def ort_median_ms(threads):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 112, 112])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "pool", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    feed = {"x": np.random.rand(1, 64, 112, 112).astype(np.float32)}
    for _ in range(20):
        sess.run(None, feed)
    times = []
    for _ in range(7):
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < 0.1:
            sess.run(None, feed)
            n += 1
        times.append((time.perf_counter() - start) / n * 1e3)
    return statistics.median(times)


def tessera_median_ms(exe, threads):
    out = subprocess.run(
        [exe, "op", "max_pool2d", "--shape", "1,112,112,64,3,3", "--stride", "2",
         "--pad", "1", "--check", "none", "--json", "--target", f"cpu -num-cores={threads}"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ratios = []
    for r in range(args.rounds):
        t = tessera_median_ms(args.tessera, args.threads)
        o = ort_median_ms(args.threads)
        ratios.append(t / o)
        print(f"round {r + 1}: tessera {t:.3f} ms  onnxruntime {o:.3f} ms  ratio {t / o:.2f}")
    print(f"median ratio tessera / onnxruntime: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
