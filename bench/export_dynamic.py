#!/usr/bin/env python3
"""Exports today's transformer families with a symbolic sequence length (issue 61), with
PyTorch's default (torch.export-based, `dynamo=True`) exporter and `dynamic_shapes`, so
that the ONNX inputs' sequence dimension is a named symbol, as Hugging Face users export
for serving:

- bert: tests/onnx/export_today.py's BERT (ids and a padding mask), `sizes` as given;
- gpt2, llama, t5enc: the same makers, ids only.

Usage: python bench/export_dynamic.py OUT_DIR NAME[:small|bench][:batch] ...
`small` is the test size of export_today.py; `bench` bench/export_today_bench.py's;
`batch` makes the batch symbolic too (the example inputs repeated to a batch of 2, so
that the exporter does not take the batch for the constant 1).
Each model lands in OUT_DIR/NAME[_SIZE][_batch]/model.onnx.
"""
import os
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "onnx"))
sys.path.insert(0, here)
import torch  # noqa: E402
import export_today as t  # noqa: E402
import export_today_bench as b  # noqa: E402

SMALL = {
    "bert": lambda: t.make_bert_b1(seq=32, masked=7, max_position_embeddings=512),
    "gpt2": lambda: t.make_gpt2(seq=16, n_positions=512),
    "llama": lambda: t.make_llama(seq=16, max_position_embeddings=512),
    "t5enc": lambda: t.make_t5enc(seq=16),
}
BENCH = {
    "bert": lambda: t.make_bert_b1(seq=64, masked=10, hidden_size=768, num_hidden_layers=6,
                                   num_attention_heads=12, intermediate_size=3072,
                                   vocab_size=8000, max_position_embeddings=512),
    "gpt2": lambda: t.make_gpt2(seq=64, n_layer=6, n_embd=768, n_head=12, vocab_size=8000,
                                n_positions=512),
    "llama": lambda: t.make_llama(seq=64, hidden_size=512, intermediate_size=1376,
                                  num_hidden_layers=6, num_attention_heads=8,
                                  num_key_value_heads=2, vocab_size=8000,
                                  max_position_embeddings=512),
    "t5enc": b.t5enc,
}


def main():
    out = sys.argv[1]
    for arg in sys.argv[2:]:
        name, _, size = arg.partition(":")
        size, _, batch = size.partition(":")
        size = size or "small"
        torch.manual_seed(0)
        model, args = (SMALL if size == "small" else BENCH)[name]()
        model.eval()
        seq = torch.export.Dim("seq", min=2, max=512)
        dyn = tuple({1: seq} for _ in args)
        suffix = ""
        if batch == "batch":
            n = torch.export.Dim("batch", min=1, max=64)
            args = tuple(a.repeat(2, *([1] * (a.dim() - 1))) for a in args)
            dyn = tuple({0: n, 1: seq} for _ in args)
            suffix = "_batch"
        d = os.path.join(out, f"{name}_{size}{suffix}")
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(model, args, os.path.join(d, "model.onnx"), dynamo=True,
                              dynamic_shapes=dyn)
        print(f"{name}: {d}/model.onnx", flush=True)


if __name__ == "__main__":
    main()
