#!/usr/bin/env python3
"""Exports a GPT-2 decoder with its KV cache as ONNX inputs and outputs (the Hugging Face /
optimum "decoder with past" convention), with PyTorch's default (torch.export-based,
`dynamo=True`) exporter and `dynamic_shapes`:

- inputs: input_ids int64 [1, seq], attention_mask int64 [1, total], position_ids int64
  [1, seq], then per layer i past_key_values.{i}.key and past_key_values.{i}.value float32
  [1, n_head, past, head_dim];
- outputs: logits float32 [1, seq, vocab], then per layer present.{i}.key and
  present.{i}.value float32 [1, n_head, past + seq, head_dim].

torch.export's Dims cannot express total = past + seq (a sum of two Dims), so `total` is
its own symbol; callers pass total = past + seq (the graph gathers the mask at 0..past+seq-1,
so a shorter mask fails in GatherND and a longer one is ignored past its end).

The model is GPT2LMHeadModel (eager attention, random weights) with
tests/onnx/export_today.py's make_gpt2 configs: `small` its test size with n_positions=512,
`bench` bench/export_dynamic.py's (6 layers, 768 wide, 12 heads, vocab 8000); `tiny` (2
layers, 32 wide, vocabulary 100) is the tests' fixture (tests/onnx/export_kv.py).
torch.export specializes sizes 0 and 1, so the example has past = 3 and seq = 4; the ONNX
model also runs with past = 0 (prefill) and seq = 1 (decode), which `--check` verifies.

Usage: python bench/export_kv.py OUT_DIR gpt2[:tiny|small|bench] llama[:small|bench] ... [--check]
Each model lands in OUT_DIR/NAME_kv_SIZE/model.onnx. `llama` is LlamaForCausalLM
(grouped-query heads: the cache holds the key/value heads; rotary positions from
position_ids): `small` 2 layers, 64 wide; `bench` bench/export_dynamic.py's (6 layers, 512
wide, 8 heads, 2 key/value heads). `--check` runs each exported model in
onnxruntime: a prefill of 8 tokens on an empty cache, then 5 greedy
decode steps feeding present back as past, each step's last logits against PyTorch's
cache-free run on the whole sequence so far.
"""
import os
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel  # noqa: E402
import export_today as t  # noqa: E402

SMALL = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=512)  # make_gpt2's
BENCH = dict(n_layer=6, n_embd=768, n_head=12, vocab_size=8000, n_positions=512)
TINY = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64)  # tests' fixture


# LLaMA-style: grouped-query heads (4 query heads share 2 key/value heads), rotary positions
LLAMA = {
    "small": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512),
    "bench": dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=6,
                  num_attention_heads=8, num_key_value_heads=2, vocab_size=8000,
                  max_position_embeddings=512),
}


def make_lm(size, family="gpt2"):
    torch.manual_seed(0)
    if family == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        return t._hf(LlamaForCausalLM, LlamaConfig(**LLAMA[size])).eval()
    config = {"tiny": TINY, "small": SMALL, "bench": BENCH}[size]
    return t._hf(GPT2LMHeadModel, GPT2Config(**config)).eval()


def dims_of(c):
    """(layers, key/value heads, head size, vocabulary, positions) of a GPT-2 or LLaMA config."""
    if hasattr(c, "n_layer"):
        return c.n_layer, c.n_head, c.n_embd // c.n_head, c.vocab_size, c.n_positions
    heads = c.num_attention_heads
    return (c.num_hidden_layers, c.num_key_value_heads, c.hidden_size // heads, c.vocab_size,
            c.max_position_embeddings)


class KVWrap(torch.nn.Module):
    """Flat tensors in, flat tensors out: (ids, mask, positions, k0, v0, k1, v1, ...) ->
    (logits, present k0, v0, ...)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache(list(zip(past[0::2], past[1::2])))
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask,
                      position_ids=position_ids, cache=cache, use_cache=True,
                      return_dict=True)
        flat = [x for layer in out.cache.layers for x in (layer.keys, layer.values)]
        return (out.logits, *flat)


def names(n_layer):
    ins = ["input_ids", "attention_mask", "position_ids"]
    outs = ["logits"]
    for i in range(n_layer):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outs += [f"present.{i}.key", f"present.{i}.value"]
    return ins, outs


def export(lm, path):
    layers, kv_heads, hd, vocab, positions = dims_of(lm.config)
    past, seq = 3, 4
    args = (torch.randint(0, vocab, (1, seq)), torch.ones(1, past + seq, dtype=torch.int64),
            torch.arange(past, past + seq).unsqueeze(0),
            *[torch.randn(1, kv_heads, past, hd) for _ in range(2 * layers)])
    S = torch.export.Dim("seq", min=1, max=positions)
    P = torch.export.Dim("past", min=0, max=positions)
    T = torch.export.Dim("total", min=1, max=2 * positions)
    dyn = ({1: S}, {1: T}, {1: S}, ({2: P},) * (2 * layers))  # *past: one tuple
    ins, outs = names(layers)
    with torch.no_grad():
        torch.onnx.export(KVWrap(lm).eval(), args, path, dynamo=True, dynamic_shapes=dyn,
                          input_names=ins, output_names=outs, external_data=False)


def check(lm, path, prompt=8, steps=5):
    """Prefill + greedy decode in onnxruntime vs PyTorch without cache; returns the max diff."""
    import onnxruntime as ort
    layers, kv_heads, hd, vocab, _ = dims_of(lm.config)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ins, _ = names(layers)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (1, prompt), dtype=np.int64)
    past = [np.zeros((1, kv_heads, 0, hd), np.float32) for _ in range(2 * layers)]
    new, worst = ids, 0.0
    for step in range(steps + 1):
        n, total = new.shape[1], ids.shape[1]
        feed = [new, np.ones((1, total), np.int64),
                np.arange(total - n, total, dtype=np.int64)[None], *past]
        logits, *past = sess.run(None, dict(zip(ins, feed)))
        with torch.no_grad():
            ref = lm(input_ids=torch.from_numpy(ids), use_cache=False).logits[0, -1].numpy()
        diff = float(np.abs(logits[0, -1] - ref).max())
        worst = max(worst, diff)
        print(f"  step {step}: seq {n} past {total - n} max|diff| {diff:.3g}", flush=True)
        new = logits[:, -1:].argmax(-1).astype(np.int64)
        ids = np.concatenate([ids, new], 1)
    return worst


def main():
    argv = [a for a in sys.argv[1:] if a != "--check"]
    out, do_check = argv[0], "--check" in sys.argv
    for arg in argv[1:]:
        name, _, size = arg.partition(":")
        assert name in ("gpt2", "llama"), f"gpt2 or llama, not {name}"
        size = size or "small"
        lm = make_lm(size, name)
        d = os.path.join(out, f"{name}_kv_{size}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        if os.path.exists(path + ".data"):
            os.remove(path + ".data")  # weights are kept inline (external_data=False)
        export(lm, path)
        print(f"{name}:{size}: {path}", flush=True)
        if do_check:
            print(f"{name}:{size}: check max|diff| {check(lm, path):.3g}", flush=True)


if __name__ == "__main__":
    main()
