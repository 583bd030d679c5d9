#!/usr/bin/env python3
"""The KV-cache decoder fixture (issue 61), kept in tests/onnx/exports/gpt2_kv/ because CI
has no torch: bench/export_kv.py's `tiny` GPT-2 (2 layers, width 32, vocabulary 100),
exported with its past keys and values as inputs and presents as outputs, a prompt of 8
token ids (`prompt.npy`), and onnxruntime's greedy run of it — the prompt prefilled on an
empty cache, then 3 decode steps, each step's logits in `expected.npz` (`step000` the
prompt's) and the 4 tokens chosen in `tokens.json`.

Usage: python tests/onnx/export_kv.py [OUT_DIR]   (default: tests/onnx/exports)
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import export_kv as kv  # noqa: E402

PROMPT, STEPS = 8, 3


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "exports"),
                       "gpt2_kv")
    os.makedirs(out, exist_ok=True)
    lm = kv.make_lm("tiny")
    path = os.path.join(out, "model.onnx")
    kv.export(lm, path)
    c = lm.config
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ins, _ = kv.names(c.n_layer)
    ids = np.random.default_rng(0).integers(0, c.vocab_size, (1, PROMPT), dtype=np.int64)
    np.save(os.path.join(out, "prompt.npy"), ids)
    past = [np.zeros((1, c.n_head, 0, c.n_embd // c.n_head), np.float32)
            for _ in range(2 * c.n_layer)]
    new, all_ids, logits_of, tokens = ids, ids, {}, []
    for step in range(STEPS + 1):
        n, total = new.shape[1], all_ids.shape[1]
        feed = [new, np.ones((1, total), np.int64),
                np.arange(total - n, total, dtype=np.int64)[None], *past]
        logits, *past = sess.run(None, dict(zip(ins, feed)))
        logits_of[f"step{step:03d}"] = logits
        new = logits[:, -1:].argmax(-1).astype(np.int64)
        tokens.append(int(new[0, 0]))
        all_ids = np.concatenate([all_ids, new], 1)
    np.savez(os.path.join(out, "expected.npz"), **logits_of)
    with open(os.path.join(out, "tokens.json"), "w") as f:
        json.dump(tokens, f)
    print(f"{out}: tokens {tokens}")


if __name__ == "__main__":
    main()
