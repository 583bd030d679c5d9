#!/usr/bin/env python3
"""Greedy decoding with onnxruntime on a KV-cache decoder exported by bench/export_kv.py
(inputs input_ids, attention_mask, position_ids, past_key_values.{i}.key/.value; outputs
logits, present.{i}.key/.value): the reference Tessera's KV decode is checked and timed
against.

A random prompt (seed 0, ids below the vocabulary size read from the logits' shape) is
prefilled on an empty cache (past = 0), then `steps` tokens are decoded one at a time
(seq = 1), each step feeding the previous presents back as pasts. Prints the prefill time
and the median per-token decode latency. With --save DIR, step k's inputs are saved as
DIR/step{k:03d}_{input name}.npy and its logits as DIR/step{k:03d}_logits.npy (step 0 is
the prefill).

Usage: python bench/kv_decode_ort.py MODEL [--prompt 32] [--steps 64] [--save DIR] [--threads 2]
"""
import argparse
import os
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--save")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    ins = sess.get_inputs()
    vocab = sess.get_outputs()[0].shape[-1]
    pasts = [i for i in ins if i.name.startswith("past_key_values.")]
    _, heads, _, hd = pasts[0].shape  # [1, n_head, past, head_dim]
    if a.save:
        os.makedirs(a.save, exist_ok=True)

    ids = np.random.default_rng(0).integers(0, vocab, (1, a.prompt), dtype=np.int64)
    past = [np.zeros((1, heads, 0, hd), np.float32) for _ in pasts]
    new, times, out = ids, [], []
    for k in range(a.steps + 1):
        n, total = new.shape[1], ids.shape[1]
        arrays = [new, np.ones((1, total), np.int64),
                  np.arange(total - n, total, dtype=np.int64)[None], *past]
        feed = {i.name: x for i, x in zip(ins, arrays)}
        t0 = time.perf_counter()
        logits, *past = sess.run(None, feed)
        times.append(time.perf_counter() - t0)
        if a.save:
            for name, x in feed.items():
                np.save(os.path.join(a.save, f"step{k:03d}_{name}.npy"), x)
            np.save(os.path.join(a.save, f"step{k:03d}_logits.npy"), logits)
        new = logits[:, -1:].argmax(-1).astype(np.int64)
        out.append(int(new[0, 0]))
        ids = np.concatenate([ids, new], 1)

    print(f"{a.model}: prompt {a.prompt}, {a.steps} steps, {a.threads} threads")
    print(f"prefill {times[0] * 1e3:.2f} ms; decode median {np.median(times[1:]) * 1e3:.3f} ms/token"
          f" (min {min(times[1:]) * 1e3:.3f}, max {max(times[1:]) * 1e3:.3f})")
    print("tokens:", out[:16], "..." if len(out) > 16 else "")


if __name__ == "__main__":
    main()
