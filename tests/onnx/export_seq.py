#!/usr/bin/env python3
"""Test models with a symbolic sequence length (issue 61), kept in tests/onnx/exports/
because CI has no torch: a BERT encoder with a padding mask and a GPT-2 decoder built
from `transformers` configs (tiny: width 32, 2 layers, 2 heads, vocabulary 100), exported
with PyTorch's default (torch.export-based) exporter and `dynamic_shapes`, so that their
inputs' sequence dimension is the symbol `seq`. Each gets inputs at sizes 3, 17 and 48
and onnxruntime's outputs for them (`seq_manifest.json` lists them). `bert_batch` is the
BERT encoder with a symbolic batch too (`batch`, exported at 2), its inputs at
(batch, length) pairs (each run's `batch`), each row of the mask with its own padding.

Usage: python tests/onnx/export_seq.py [OUT_DIR [NAME ...]]   (default: tests/onnx/exports,
every model; names given: only those, merged into the manifest)
"""
import json
import os
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import export_today as t  # noqa: E402

SIZES = [3, 17, 48]
# (batch, length) pairs of the model with a symbolic batch
PAIRS = [(1, 3), (4, 17), (3, 48), (2, 5)]
MODELS = {
    "bert_seq": lambda: t.make_bert_b1(seq=48, masked=5, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64,
                                       vocab_size=100, max_position_embeddings=64),
    "gpt2_seq": lambda: t.make_gpt2(seq=48, n_layer=2, n_embd=32, n_head=2, vocab_size=100,
                                    n_positions=64),
    "bert_batch": lambda: t.make_bert_b1(seq=48, masked=5, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=64,
                                         vocab_size=100, max_position_embeddings=64),
}


def inputs_at(names, size, rng, batch=1):
    feeds = {}
    for n in names:
        if "mask" in n:
            m = np.ones((batch, size), np.int64)
            for b in range(batch):
                m[b, size - (size * (b + 1)) // (2 * batch + 2):] = 0
            feeds[n] = m
        else:
            feeds[n] = rng.integers(0, 100, (batch, size)).astype(np.int64)
    return feeds


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "exports")
    only = sys.argv[2:] or list(MODELS)
    listed = os.path.join(out, "seq_manifest.json")
    manifest = []
    if sys.argv[2:] and os.path.exists(listed):
        with open(listed) as f:
            manifest = [m for m in json.load(f) if m["name"] not in only]
    for name in only:
        torch.manual_seed(0)
        model, args = MODELS[name]()
        model.eval()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        seq = torch.export.Dim("seq", min=2, max=64)
        dyn = tuple({1: seq} for _ in args)
        batched = name.endswith("_batch")
        if batched:
            args = tuple(a.repeat(2, *([1] * (a.dim() - 1))) for a in args)
            batch = torch.export.Dim("batch", min=1, max=16)
            dyn = tuple({0: batch, 1: seq} for _ in args)
        path = os.path.join(d, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(model, args, path, dynamo=True, external_data=False,
                              dynamic_shapes=dyn)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        rng = np.random.default_rng(1)
        runs = []
        for batch, size in PAIRS if batched else [(1, s) for s in SIZES]:
            feeds = inputs_at(names, size, rng, batch)
            tag = f"{batch}x{size}" if batched else f"{size}"
            files = {}
            for n, v in feeds.items():
                files[n] = f"{name}/{n}_{tag}.npy"
                np.save(os.path.join(out, files[n]), v)
            np.save(os.path.join(d, f"output_{tag}.npy"), sess.run(None, feeds)[0])
            run = {"size": size, "inputs": files, "output": f"{name}/output_{tag}.npy"}
            if batched:
                run["batch"] = batch
            runs.append(run)
        manifest.append({"name": name, "model": f"{name}/model.onnx", "inputs": names, "runs": runs})
        print(f"{name}: {path}", flush=True)
    with open(os.path.join(out, "seq_manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
