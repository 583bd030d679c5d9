#!/usr/bin/env python3
"""Latency of an ONNX model: `tessera run --onnx` (untuned, default schedules) against
onnxruntime on the same machine and thread count, in alternating rounds, so that both
see the same machine load. Prints each round's medians and their ratio, then the median
ratio over the rounds. Every input is fed: floats uniform in [-1, 1), integers (token
ids, masks) zeros, bools true.

With `--log FILE` each round also times the build with the history best of that record
log (`tessera run --log`), so untuned, tuned and onnxruntime are compared in one run.

With `--baseline EXE` each round also times another tessera binary (e.g. one built from
an earlier commit) on the same model, untuned: before/after a change in one run.

With `--openvino` each round also times the `openvino` package's CPU plugin on the same
feed, its inference precision hint set to f32 (its default on a CPU with AVX-512 BF16 is
bf16) and its threads to `--threads`.

Usage: bench/network_vs_ort.py MODEL.onnx [--tessera target/release/tessera]
       [--threads 2] [--rounds 5] [--repeat 30] [--layout NHWC] [--log FILE]
       [--baseline EXE] [--openvino]
"""
import argparse
import re
import statistics
import subprocess
import time

import numpy as np
import onnxruntime as ort


def ort_median_ms(sess, feed, repeat):
    for _ in range(3):
        sess.run(None, feed)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, feed)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def ort_session(model, threads):
    """An onnxruntime CPU session of `model` on `threads` intra-op threads, all graph
    optimizations on."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def openvino_model(model, threads):
    """The `openvino` CPU plugin's compiled model of `model`: f32 precision, `threads`
    inference threads, latency mode (one stream)."""
    import openvino as ov
    core = ov.Core()
    return core.compile_model(model, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32",
        "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": 1,
    })


def openvino_median_ms(compiled, feed, repeat):
    req = compiled.create_infer_request()
    for _ in range(3):
        req.infer(feed)
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        req.infer(feed)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def feed_of(sess):
    """A value for every input of `sess`: floats uniform in [-1, 1), bools true, integers
    (token ids, masks) zeros, which index the first row and time the same."""
    feed = {}
    for inp in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        if inp.type == "tensor(float)":
            feed[inp.name] = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
        elif inp.type == "tensor(bool)":
            feed[inp.name] = np.ones(shape, dtype=bool)
        else:
            dt = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}[inp.type]
            feed[inp.name] = np.zeros(shape, dtype=dt)
    return feed


def tessera_median_ms(exe, model, threads, repeat, layout, log=None, extra=()):
    cmd = [exe, "run", "--onnx", model, "--benchmark", "--repeat", str(repeat),
           "--layout", layout, "--target", f"cpu -num-cores={threads}", *extra]
    if log:
        cmd += ["--log", log]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    i = next(k for k, l in enumerate(lines) if "median (ms)" in l)
    mean, median = (float(v) for v in lines[i + 1].split()[:2])
    build = next(l for l in lines if l.startswith("built"))
    return median, (lines[0] + "\n" + build) if log else build


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--layout", default="NHWC")
    ap.add_argument("--log", help="also time the build with this log's history best")
    ap.add_argument("--baseline", help="also time this tessera binary, untuned")
    ap.add_argument("--openvino", action="store_true",
                    help="also time OpenVINO's CPU plugin (f32 precision hint)")
    a = ap.parse_args()
    sess = ort_session(a.model, a.threads)
    feed = feed_of(sess)
    ov_model = openvino_model(a.model, a.threads) if a.openvino else None
    print(f"model {a.model}, {a.threads} threads, onnxruntime {ort.__version__}, "
          f"{a.rounds} rounds of {a.repeat} runs each")
    ratios, tuned_ratios, gains, base_ratios, ov_ratios = [], [], [], [], []
    minima = {"tessera": [], "onnxruntime": [], "openvino": []}
    for r in range(a.rounds):
        t_ms, build_line = tessera_median_ms(a.tessera, a.model, a.threads, a.repeat, a.layout)
        o_ms = ort_median_ms(sess, feed, a.repeat)
        ratios.append(t_ms / o_ms)
        minima["tessera"].append(t_ms)
        minima["onnxruntime"].append(o_ms)
        if r == 0:
            print(build_line)
        line = (f"round {r + 1}: tessera median {t_ms:8.2f} ms   onnxruntime median {o_ms:8.2f} ms"
                f"   ratio {t_ms / o_ms:5.2f}")
        if a.log:
            tt_ms, tuned_line = tessera_median_ms(a.tessera, a.model, a.threads, a.repeat,
                                                  a.layout, a.log)
            if r == 0:
                print(tuned_line)
            tuned_ratios.append(tt_ms / o_ms)
            gains.append(t_ms / tt_ms)
            line += f"   tuned {tt_ms:8.2f} ms (ratio {tt_ms / o_ms:5.2f}, {t_ms / tt_ms:4.2f}x untuned)"
        if a.baseline:
            b_ms, base_line = tessera_median_ms(a.baseline, a.model, a.threads, a.repeat,
                                                a.layout)
            if r == 0:
                print("baseline " + base_line)
            base_ratios.append(t_ms / b_ms)
            line += f"   baseline {b_ms:8.2f} ms (ratio {b_ms / o_ms:5.2f})"
        if ov_model is not None:
            v_ms = openvino_median_ms(ov_model, feed, a.repeat)
            minima["openvino"].append(v_ms)
            ov_ratios.append(t_ms / v_ms)
            line += f"   openvino {v_ms:8.2f} ms (tessera / openvino {t_ms / v_ms:5.2f})"
        print(line)
    if ov_ratios:
        print(f"median ratio tessera / openvino: {statistics.median(ov_ratios):.2f} "
              f"(min {min(ov_ratios):.2f}, max {max(ov_ratios):.2f}); minima "
              f"{min(minima['tessera']):.2f} / {min(minima['openvino']):.2f} ms = "
              f"{min(minima['tessera']) / min(minima['openvino']):.2f}")
    if a.baseline:
        print(f"median ratio tessera / baseline: {statistics.median(base_ratios):.2f} "
              f"(min {min(base_ratios):.2f}, max {max(base_ratios):.2f})")
    print(f"median ratio tessera / onnxruntime: {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}); minima "
          f"{min(minima['tessera']):.2f} / {min(minima['onnxruntime']):.2f} ms = "
          f"{min(minima['tessera']) / min(minima['onnxruntime']):.2f}")
    if a.log:
        print(f"median ratio tuned tessera / onnxruntime: {statistics.median(tuned_ratios):.2f} "
              f"(min {min(tuned_ratios):.2f}, max {max(tuned_ratios):.2f})")
        print(f"median speed-up tuned / untuned: {statistics.median(gains):.2f} "
              f"(min {min(gains):.2f}, max {max(gains):.2f})")

if __name__ == "__main__":
    main()
