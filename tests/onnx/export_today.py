"""Exports the small models of tests/onnx/exports/ with PyTorch's default (torch.export-based,
`dynamo=True`) exporter: an LSTM, a bidirectional LSTM, a GRU, and, built from `transformers`
configs with random weights (no download), a BERT encoder with a padding mask (batch 2,
and batch 1), a GPT-2 decoder,
a LLaMA decoder (grouped-query heads, rotary embeddings, RMS norm), a T5 encoder (relative
position bias), Whisper's and wav2vec2's audio encoders, and a BERT encoder quantized by
onnxruntime's quantize_dynamic. Each gets its inputs and onnxruntime's outputs (.npy), and manifest.json lists
them; crates/graph/tests/onnx_exports.rs checks Tessera against those outputs (CI has no torch).

Usage (torch, transformers, onnx, onnxscript, onnxruntime from PyPI, ~3 GB with torch's CUDA
libraries; no GPU is needed):
    python3 -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install torch transformers onnx onnxscript onnxruntime==1.31.1
    /tmp/torchenv/bin/python tests/onnx/export_today.py [name ...]
"""
import json, os, sys, traceback
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import numpy as np
import torch
import onnx
import onnxruntime as ort

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exports")


# ---------------------------------------------------------------- models
class LSTMLin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(input_size=16, hidden_size=32, num_layers=2, batch_first=True)
        self.fc = torch.nn.Linear(32, 8)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)


class LSTMBidir(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(16, 24, num_layers=1, bidirectional=True, batch_first=False)
    def forward(self, x):
        y, _ = self.rnn(x)
        return y


class GRULin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(16, 32, num_layers=1, batch_first=True)
        self.fc = torch.nn.Linear(32, 8)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)


def _hf(model_cls, config):
    config._attn_implementation = "eager"
    try:
        m = model_cls(config, attn_implementation="eager")
    except TypeError:
        m = model_cls(config)
    return m


class HFWrap(torch.nn.Module):
    def __init__(self, model, **kw):
        super().__init__()
        self.model = model
        self.kw = kw
    def forward(self, input_ids):
        return self.model(input_ids=input_ids, return_dict=False, **self.kw)[0]


class HFWrapMask(HFWrap):
    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False, **self.kw)[0]


def make_bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     vocab_size=1000, max_position_embeddings=64)
    m = HFWrapMask(_hf(BertModel, cfg))
    ids = torch.randint(0, 1000, (2, 16), dtype=torch.int64)
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, -5:] = 0
    return m, (ids, mask)


def make_bert_b1(seq=32, masked=7, **sizes):
    """Batch 1: the padding mask broadcasts over the heads and query rows ([1, 1, M, N]
    once expanded), the form the CPU plan fuses into its attention operator. `sizes`
    override the config's (bench/export_today_bench.py's larger models)."""
    from transformers import BertConfig, BertModel
    cfg = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               vocab_size=1000, max_position_embeddings=64)
    cfg.update(sizes)
    m = HFWrapMask(_hf(BertModel, BertConfig(**cfg)))
    ids = torch.randint(0, cfg["vocab_size"], (1, seq), dtype=torch.int64)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, -masked:] = 0
    return m, (ids, mask)


def make_gpt2(seq=16, **sizes):
    from transformers import GPT2Config, GPT2Model
    cfg = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64)
    cfg.update(sizes)
    m = HFWrap(_hf(GPT2Model, GPT2Config(**cfg)), use_cache=False)
    return m, (torch.randint(0, cfg["vocab_size"], (1, seq), dtype=torch.int64),)


def make_llama(seq=16, **sizes):
    from transformers import LlamaConfig, LlamaModel
    cfg = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=1000, max_position_embeddings=64)
    cfg.update(sizes)
    m = HFWrap(_hf(LlamaModel, LlamaConfig(**cfg)), use_cache=False)
    return m, (torch.randint(0, cfg["vocab_size"], (1, seq), dtype=torch.int64),)


def make_t5enc(seq=16, **sizes):
    from transformers import T5Config, T5EncoderModel
    cfg = dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000, d_kv=16)
    cfg.update(sizes)
    m = HFWrap(_hf(T5EncoderModel, T5Config(**cfg)))
    return m, (torch.randint(0, cfg["vocab_size"], (1, seq), dtype=torch.int64),)


class LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, x):
        return self.model(x, return_dict=False)[0]


def make_whisper_enc(frames=100, **sizes):
    from transformers import WhisperConfig, WhisperModel
    cfg = dict(d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
               num_mel_bins=80, max_source_positions=50)
    cfg.update(sizes)
    model = _hf(WhisperModel, WhisperConfig(**cfg)).encoder
    return LastHidden(model), (torch.randn(1, cfg["num_mel_bins"], frames),)


def make_wav2vec2(samples=4000, **sizes):
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    cfg = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
               do_stable_layer_norm=False)
    cfg.update(sizes)
    return LastHidden(_hf(Wav2Vec2Model, Wav2Vec2Config(**cfg))), (torch.randn(1, samples),)


def quantize_dynamic_in_place(path):
    """onnxruntime's dynamic quantization (DynamicQuantizeLinear, MatMulInteger) of the
    exported float model, which replaces it (weights inline)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    q = path + ".quant.onnx"
    quantize_dynamic(path, q, weight_type=QuantType.QInt8)
    os.replace(q, path)
    data = path + ".data"
    if os.path.exists(data):
        os.remove(data)


def make_bert_dynamic():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     vocab_size=1000, max_position_embeddings=64)
    m = HFWrapMask(_hf(BertModel, cfg))
    ids = torch.randint(0, 1000, (1, 16), dtype=torch.int64)
    return m, (ids, torch.ones(1, 16, dtype=torch.int64)), quantize_dynamic_in_place


MODELS = {
    "lstm": lambda: (LSTMLin(), (torch.randn(2, 10, 16),)),
    "lstm_bidir": lambda: (LSTMBidir(), (torch.randn(7, 3, 16),)),
    "gru": lambda: (GRULin(), (torch.randn(2, 10, 16),)),
    "bert_mask": make_bert,
    "bert_mask_b1": make_bert_b1,
    "gpt2": make_gpt2,
    "llama": make_llama,
    "t5enc": make_t5enc,
    "whisper_enc": make_whisper_enc,
    "wav2vec2": make_wav2vec2,
    "bert_dynamic": make_bert_dynamic,
}


# ---------------------------------------------------------------- helpers
def collect_ops(model):
    ops = set()
    def walk(graph):
        for n in graph.node:
            ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}")
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for g in a.graphs:
                    walk(g)
    walk(model.graph)
    for f in model.functions:  # local functions (normally inlined by the exporter)
        for n in f.node:
            ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}")
    return sorted(ops)


def export_one(name):
    torch.manual_seed(0)
    made = MODELS[name]()
    model, args = made[0], made[1]
    post = made[2] if len(made) > 2 else None
    model.eval()
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    entry = {"name": name, "model": f"{name}/model.onnx"}
    errors = {}
    with torch.no_grad():
        ref = model(*args)
        try:
            torch.onnx.export(model, args, path, dynamo=True)
            entry["exporter"] = "dynamo"
        except Exception as e:
            errors["dynamo"] = f"{type(e).__name__}: {str(e)[:500]}"
            traceback.print_exc()
            torch.onnx.export(model, args, path, dynamo=False, opset_version=17)
            entry["exporter"] = "torchscript(dynamo=False)"
    if post:
        post(path)
        entry["quantized"] = post.__name__
    if errors:
        entry["export_errors"] = errors
    m = onnx.load(path)
    entry["opset"] = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    entry["ops"] = collect_ops(m)
    try:
        onnx.checker.check_model(path, full_check=True)
        entry["checker"] = "ok"
    except Exception as e:
        entry["checker"] = f"{type(e).__name__}: {str(e)[:300]}"

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    gins = sess.get_inputs()
    assert len(gins) == len(args), f"graph has {len(gins)} inputs, expected {len(args)}"
    feeds, entry["inputs"] = {}, []
    for k, (gi, a) in enumerate(zip(gins, args)):
        arr = a.numpy()
        fn = f"input_{k}.npy"
        np.save(os.path.join(d, fn), arr)
        feeds[gi.name] = arr
        entry["inputs"].append({"name": gi.name, "file": f"{name}/{fn}",
                                "dtype": str(arr.dtype), "shape": list(arr.shape)})
    outs = sess.run(None, feeds)
    entry["outputs"] = []
    entry["output_names"] = [o.name for o in sess.get_outputs()]
    for k, o in enumerate(outs):
        fn = f"output_{k}.npy"
        np.save(os.path.join(d, fn), o)
        entry["outputs"].append(f"{name}/{fn}")
    entry["output_shapes"] = [list(o.shape) for o in outs]
    entry["max_abs_diff_vs_torch"] = float(np.max(np.abs(outs[0] - ref.numpy())))
    entry["files_bytes"] = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    return entry


def main():
    names = sys.argv[1:] or list(MODELS)
    mpath = os.path.join(OUT, "manifest.json")
    manifest = json.load(open(mpath)) if os.path.exists(mpath) else []
    manifest = [e for e in manifest if e["name"] not in names]
    for name in names:
        print(f"=== {name}", flush=True)
        try:
            entry = export_one(name)
        except Exception as e:
            traceback.print_exc()
            entry = {"name": name, "failed": f"{type(e).__name__}: {str(e)[:500]}"}
        print(json.dumps(entry, indent=None)[:2000], flush=True)
        manifest.append(entry)
    order = list(MODELS)
    manifest.sort(key=lambda e: order.index(e["name"]) if e["name"] in order else 99)
    json.dump(manifest, open(mpath, "w"), indent=2)


if __name__ == "__main__":
    main()
