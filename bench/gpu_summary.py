#!/usr/bin/env python3
"""The tables of a `bench/gpu_check.sh` run, for BENCHMARKS.md.

    python3 bench/gpu_summary.py OUT

Reads OUT's step outputs (tessera's `--json` lines, peers.jsonl, the tune's progress
lines, clocks.csv) and prints Markdown: operators against cuBLAS/cuDNN, networks
against PyTorch eager and torch.compile, the launch sequence against kernel-by-kernel,
the tune's estimate against the tuned network's measured latency, the slowest kernels
inside the network against the same convolution alone, ONNX parity, and the SM clocks.
A step that failed or was cut short shows as missing, with its rc in steps.txt.
"""
import json
import os
import re
import sys


def last_json(path):
    try:
        lines = [l for l in open(path) if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except OSError:
        return None


def peers(out):
    p = {}
    try:
        for line in open(os.path.join(out, "peers.jsonl")):
            r = json.loads(line)
            p[r["what"]] = r.get("median_ms")
    except (OSError, ValueError):  # missing, or its last line cut by a timeout
        pass
    return p


def median(run):
    return run and run.get("benchmark", {}).get("median_ms")


def fmt(x):
    return "—" if x is None else f"{x:.4g}"


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"**{a / b:.2f}**"


def estimate(out, step):
    """The last estimated latency a tune printed (ms), if any."""
    try:
        text = open(os.path.join(out, f"{step}.err")).read()
    except OSError:
        return None
    found = re.findall(r"estimated latency ([0-9.]+) ms", text)
    return float(found[-1]) if found else None


def main():
    out = sys.argv[1]
    p = peers(out)
    print("| what | tessera (ms) | peer (ms) | ratio |\n| --- | --- | --- | --- |")
    for step, key, what in [
        ("tune_matmul", "matmul 1024^3 (cuBLAS)", "matmul 1024³ tuned (64 trials) vs cuBLAS"),
        ("tune_conv7", "conv2d 1x512x7x7 -> 512 3x3 pad 1 (cuDNN)", "conv 7×7×512 3×3 tuned (64 trials) vs cuDNN"),
    ]:
        r = last_json(os.path.join(out, f"{step}.out"))
        best = r and min((t["best_ms"] for t in r.get("tasks", []) if t.get("best_ms")), default=None)
        print(f"| {what} | {fmt(best)} | {fmt(p.get(key))} | {ratio(best, p.get(key))} |")
    for step, key, what in [
        ("nvrtc_matmul_default", "matmul 1024^3 (cuBLAS)", "matmul 1024³ default schedule vs cuBLAS"),
        ("op_conv7_default", "conv2d 1x512x7x7 -> 512 3x3 pad 1 (cuDNN)", "conv 7×7×512 default vs cuDNN"),
    ]:
        r = last_json(os.path.join(out, f"{step}.out"))
        t = r and r.get("median_ms")
        print(f"| {what} | {fmt(t)} | {fmt(p.get(key))} | {ratio(t, p.get(key))} |")
    for step, key, what in [
        ("run_resnet18_b1", "resnet18_b1 eager", "ResNet-18 b1 untuned vs eager"),
        ("run_resnet18_b1", "resnet18_b1 torch.compile", "ResNet-18 b1 untuned vs torch.compile"),
        ("run_resnet18_b16", "resnet18_b16 eager", "ResNet-18 b16 untuned vs eager"),
        ("run_resnet50_b1", "resnet50_b1 eager", "ResNet-50 b1 untuned vs eager"),
        ("run_resnet18_b1_tuned", "resnet18_b1 eager", "ResNet-18 b1 tuned vs eager"),
        ("run_resnet18_b1_tuned", "resnet18_b1 torch.compile", "ResNet-18 b1 tuned vs torch.compile"),
    ]:
        t = median(last_json(os.path.join(out, f"{step}.out")))
        print(f"| {what} | {fmt(t)} | {fmt(p.get(key))} | {ratio(t, p.get(key))} |")

    seq = median(last_json(os.path.join(out, "run_resnet18_b1.out")))
    steps = median(last_json(os.path.join(out, "run_resnet18_b1_steps.out")))
    print(f"\nResNet-18 b1 untuned: launch sequence {fmt(seq)} ms, kernel by kernel "
          f"{fmt(steps)} ms (ratio {ratio(seq, steps)}).")
    tuned = median(last_json(os.path.join(out, "run_resnet18_b1_tuned.out")))
    est = estimate(out, "tune_resnet18")
    print(f"ResNet-18 b1 tuned: the tune's last estimate {fmt(est)} ms, measured "
          f"{fmt(tuned)} ms (measured / estimate {ratio(tuned, est)}).")

    # issue 42: each tune's rate and where its time went (printed at its end; a tune
    # killed at its deadline has none, and its rate is read from its last progress line)
    print("\nTuning throughput (goal: at least 4× the 110–125 trials a minute of 8cac1e9):")
    for step in ["tune_matmul", "tune_conv7", "tune_resnet18"]:
        try:
            text = open(os.path.join(out, f"{step}.err")).read()
        except OSError:
            continue
        at = text.rfind("where the time went")
        if at >= 0:
            block = text[at:].splitlines()[:4]
            print(f"- {step}: " + " / ".join(l.strip() for l in block))
            continue
        prog = re.findall(r"progress: (\d+)/\d+ trials \(\d+%\) in (\d+) s", text)
        if prog:
            n, secs = int(prog[-1][0]), int(prog[-1][1])
            rate = n * 60 / secs if secs else float("nan")
            print(f"- {step}: {n} trials in {secs} s ({rate:.0f} a minute; cut at its deadline)")
        # the last round's table: `| ID | latency | speed | trials |`, one row a task
        rows = re.findall(r"^\|\s*(\d+) \|[^|]*\|[^|]*\|\s*(\d+) \|$", text, re.M)
        last = {}
        for task, trials in rows:
            last[int(task)] = int(trials)
        if last:
            reached = sum(1 for t in last.values() if t > 0)
            print(f"  tasks reached: {reached} of {len(last)}")

    for step in ["profile_resnet18_b1", "profile_resnet18_b1_tuned"]:
        r = last_json(os.path.join(out, f"{step}.out"))
        prof = (r or {}).get("profile") or []
        if not prof:
            continue
        total = sum(k["ms"] for k in prof)
        print(f"\n{step}: the kernels sum to {total:.3f} ms inside the run; slowest:")
        for k in prof[:6]:
            print(f"- step {k['step']} `{k['kernel']}`: {k['ms']:.4f} ms")
    alone = last_json(os.path.join(out, "op_conv7_default.out"))
    cold = last_json(os.path.join(out, "op_conv7_default_flushed.out"))
    print(f"\nconv 7×7×512 3×3 default alone: {fmt(alone and alone.get('median_ms'))} ms "
          f"(L2 flushed: {fmt(cold and cold.get('median_ms'))} ms)")

    try:
        import numpy as np
        a = np.load(os.path.join(out, "tessera_out.npy"))
        b = np.load(os.path.join(out, "torch_out.npy"))
        top = lambda x: list(np.argsort(-x[0])[:5])
        print(f"\nParity (ResNet-18, same image): max |tessera − torch| = "
              f"{float(np.abs(a - b).max()):.3g}; top-5 equal: {top(a) == top(b)}")
    except Exception as e:
        print(f"\nParity: not available ({e})")

    ocl = last_json(os.path.join(out, "opencl_nvidia_resnet18.out"))
    try:
        import numpy as np
        a = np.load(os.path.join(out, "opencl_out.npy"))
        b = np.load(os.path.join(out, "torch_out.npy"))
        print(f"OpenCL on NVIDIA ({(ocl or {}).get('device')}): ResNet-18 max |tessera − torch| = "
              f"{float(np.abs(a - b).max()):.3g}, median {fmt(median(ocl))} ms "
              f"(eager {fmt(p.get('resnet18_b1 eager'))} ms)")
    except Exception as e:
        print(f"OpenCL on NVIDIA: not available ({e})")

    try:
        clocks = [float(l.split(",")[1].split()[0]) for l in open(os.path.join(out, "clocks.csv"))
                  if "," in l and l.split(",")[1].strip().split()[0].replace(".", "").isdigit()]
        if clocks:
            print(f"SM clock over the run: min {min(clocks):.0f} MHz, "
                  f"median {sorted(clocks)[len(clocks) // 2]:.0f}, max {max(clocks):.0f}")
    except OSError:
        pass


if __name__ == "__main__":
    main()
