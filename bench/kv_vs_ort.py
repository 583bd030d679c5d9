#!/usr/bin/env python3
"""Token-by-token generation from one module against onnxruntime (issue 61): a decoder
exported with its KV cache (bench/export_kv.py: inputs input_ids, attention_mask,
position_ids, past_key_values.{i}.key/.value; outputs logits, present.{i}.key/.value) is
compiled once for a range of new tokens and a range of cache lengths (`--shape
input_ids=1,seq:1..SEQ --shape past_key_values.{i}.key=1,H,past:0..PAST,D …
--shape attention_mask=1,past+seq`); then, in alternating rounds, a greedy generation —
a prompt of `--prompt` random ids prefilled on an empty cache, then `--steps` tokens one
at a time — runs in `tessera generate` (the cache fed back on the device) and in one
onnxruntime session (presents fed back as pasts, as its users write the loop). The first
round checks every step's logits of the module against onnxruntime's.

Prints per round both medians of the per-token decode latency and the prefill, then the
median over rounds of the ratio tessera / onnxruntime, its smallest round, and the ratio
of the minima; the CPU steal over the run (from /proc/stat).

With --fixed-at PAST, then the price of generality: in alternating rounds, `tessera run
--module --benchmark` of the range module and of a build for exactly the shapes of the
decode step whose cache holds PAST tokens, on that step's inputs (onnxruntime's).

Usage: bench/kv_vs_ort.py MODEL.onnx [--prompt 32] [--steps 64] [--rounds 7]
       [--tessera target/release/tessera] [--threads 2] [--module FILE (reuse)]
       [--fixed-at PAST]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort


def steal():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7], sum(v)


def ort_generate(sess, ids, steps, heads, hd, layers, keep_past=None):
    """Greedy decoding in onnxruntime: (per-step logits, prefill s, decode s per step, the
    feed of the decode step whose cache holds `keep_past` tokens)."""
    names = [i.name for i in sess.get_inputs()]
    past = [np.zeros((1, heads, 0, hd), np.float32) for _ in range(2 * layers)]
    new, all_ids, logits_of, times, kept = ids, ids, [], [], None
    for _ in range(steps + 1):
        n, total = new.shape[1], all_ids.shape[1]
        feed = [new, np.ones((1, total), np.int64),
                np.arange(total - n, total, dtype=np.int64)[None], *past]
        if total - n == keep_past and n == 1:
            kept = dict(zip(names, feed))
        t = time.perf_counter()
        logits, *past = sess.run(None, dict(zip(names, feed)))
        times.append(time.perf_counter() - t)
        logits_of.append(logits)
        new = logits[:, -1:].argmax(-1).astype(np.int64)
        all_ids = np.concatenate([all_ids, new], 1)
    return logits_of, times[0], times[1:], kept


def bench_ms(exe, module, files, repeat):
    """The median of `tessera run --module --benchmark` on input files `files`."""
    cmd = [exe, "run", "--module", module, "--benchmark", "--repeat", str(repeat)]
    for n, f in files.items():
        cmd += ["--input", f"{n}={f}"]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    i = next(k for k, line in enumerate(lines) if "median (ms)" in line)
    return float(lines[i + 1].split()[1])


def price_of_generality(a, module, feed, tmp):
    """The range module against a build for exactly one decode step's shapes, in
    alternating rounds of `run --benchmark` on that step's inputs."""
    files, cmd = {}, [a.tessera, "compile", "--onnx", a.model, "--target",
                      f"cpu -num-cores={a.threads}", "--out", os.path.join(tmp, "fixed.tsm")]
    for n, v in feed.items():
        files[n] = os.path.join(tmp, f"step_{n}.npy")
        np.save(files[n], v)
        cmd += ["--shape", f"{n}=" + ",".join(str(d) for d in v.shape)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = []
    for r in range(a.rounds):
        one = bench_ms(a.tessera, module, files, 100)
        fixed = bench_ms(a.tessera, os.path.join(tmp, "fixed.tsm"), files, 100)
        rows.append((one, fixed))
        print(f"round {r}: one module {one:.3f} ms, build for past {a.fixed_at} {fixed:.3f} ms "
              f"(ratio {one / fixed:.3f})", flush=True)
    ratios = [x / y for x, y in rows]
    print(f"one module / the build for one token after {a.fixed_at}: median "
          f"{statistics.median(ratios):.3f}, min {min(ratios):.3f}, minima "
          f"{min(x for x, _ in rows) / min(y for _, y in rows):.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tessera", default="target/release/tessera")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--module")
    ap.add_argument("--fixed-at", type=int,
                    help="then time the module at the decode step after this many cached "
                         "tokens against a build for exactly that step's shapes")
    a = ap.parse_args()

    m = onnx.load(a.model, load_external_data=False)
    pasts = [i for i in m.graph.input if i.name.startswith("past_key_values.")]
    dims = pasts[0].type.tensor_type.shape.dim
    heads, hd = dims[1].dim_value, dims[3].dim_value
    vocab = m.graph.output[0].type.tensor_type.shape.dim[2].dim_value
    layers = len(pasts) // 2
    tmp = tempfile.mkdtemp()
    module = a.module or os.path.join(tmp, "kv.tsm")
    if not a.module:
        # the cache holds the prompt and every step but the last one's token
        seq, past = a.prompt, a.prompt + a.steps
        cmd = [a.tessera, "compile", "--onnx", a.model, "--target", f"cpu -num-cores={a.threads}",
               "--out", module, "--shape", f"input_ids=1,seq:1..{seq}",
               "--shape", "position_ids=1,seq", "--shape", "attention_mask=1,past+seq"]
        for p in pasts:
            cmd += ["--shape", f"{p.name}=1,{heads},past:0..{past},{hd}"]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        print(f"compiled {module} in {time.perf_counter() - t:.1f} s")

    ids = np.random.default_rng(0).integers(0, vocab, (1, a.prompt), dtype=np.int64)
    prompt = os.path.join(tmp, "prompt.npy")
    np.save(prompt, ids)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])

    s0 = steal()
    rows = []
    for r in range(a.rounds):
        logits_npz = os.path.join(tmp, "logits.npz")
        cmd = [a.tessera, "generate", "--module", module, "--prompt", prompt,
               "--steps", str(a.steps), "--json"] + (["--logits", logits_npz] if r == 0 else [])
        rep = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        ort_logits, ort_prefill, ort_steps, kept = ort_generate(sess, ids, a.steps, heads, hd,
                                                                layers, a.fixed_at)
        if r == 0:
            got = np.load(logits_npz)
            worst = max(float(np.abs(got[f"step{k:03d}"] - w).max())
                        for k, w in enumerate(ort_logits))
            print(f"every step's logits against onnxruntime's: max abs diff {worst:.2e}")
        t_med = statistics.median(rep["step_ms"])
        o_med = statistics.median(ort_steps) * 1e3
        rows.append((t_med, o_med, rep["prefill_ms"], ort_prefill * 1e3))
        print(f"round {r}: decode tessera {t_med:.3f} ms/token, onnxruntime {o_med:.3f} "
              f"(ratio {t_med / o_med:.3f}); prefill {rep['prefill_ms']:.2f} vs "
              f"{ort_prefill * 1e3:.2f} ms", flush=True)
    s1 = steal()
    ratios = [t / o for t, o, _, _ in rows]
    pre = [t / o for _, _, t, o in rows]
    print(f"decode per token, tessera / onnxruntime: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, minima {min(r[0] for r in rows) / min(r[1] for r in rows):.3f}")
    print(f"prefill of {a.prompt}, tessera / onnxruntime: median {statistics.median(pre):.3f}, "
          f"min {min(pre):.3f}, minima {min(r[2] for r in rows) / min(r[3] for r in rows):.3f}")
    print(f"steal {100 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1]):.2f} %")
    if a.fixed_at is not None:
        if kept is None:
            raise SystemExit(f"--fixed-at {a.fixed_at}: no decode step has that many cached tokens")
        price_of_generality(a, module, kept, tmp)


if __name__ == "__main__":
    main()
