#!/usr/bin/env python3
"""Exports the benchmark-size models of today's families, built from `transformers` configs
with random weights (no download) and torch modules, with PyTorch's default
(torch.export-based, `dynamo=True`) exporter — the same wrappers as the test models of
tests/onnx/export_today.py, at the sizes BENCHMARKS.md's tables name:

- gpt2: GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=8000), ids [1, 64];
- bert: BertConfig(hidden 768, 6 layers, 12 heads, ffn 3072, vocab 8000), ids and a
  padding mask [1, 64] (the last 10 positions masked);
- llama: LlamaConfig(hidden 512, ffn 1376, 6 layers, 8 heads, 2 key/value heads,
  vocab 8000), ids [1, 64];
- t5enc: T5Config(d_model 512, d_ff 2048, 6 layers, 8 heads, d_kv 64, vocab 8000),
  ids [1, 64];
- whisper_enc: Whisper-tiny's encoder (d_model 384, 4 layers, 6 heads, ffn 1536), a
  log-mel input [1, 80, 3000] (30 s of audio);
- wav2vec2: Wav2Vec2Config(hidden 384, 4 layers, 6 heads, ffn 1536, the default
  7-conv feature extractor of 512 channels, positional conv kernel 128 in 16 groups),
  1 s of audio [1, 16000];
- lstm: a 2-layer LSTM(256 → 512) and a linear layer, [1, 64, 256];
- gru: a GRU(256 → 512) and a linear layer, [1, 64, 256].

Usage: /tmp/torchenv/bin/python bench/export_today_bench.py OUT_DIR [name ...]
Each model lands in OUT_DIR/NAME/model.onnx (weights in model.onnx.data).
"""
import os
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
import torch  # noqa: E402
import export_today as t  # noqa: E402


class RNNLin(torch.nn.Module):
    def __init__(self, rnn, hidden):
        super().__init__()
        self.rnn = rnn
        self.fc = torch.nn.Linear(hidden, 256)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)


# the test models' makers (tests/onnx/export_today.py) at the sizes above
def gpt2():
    return t.make_gpt2(seq=64, n_layer=6, n_embd=768, n_head=12, vocab_size=8000, n_positions=128)


def bert():
    return t.make_bert_b1(seq=64, masked=10, hidden_size=768, num_hidden_layers=6,
                          num_attention_heads=12, intermediate_size=3072, vocab_size=8000,
                          max_position_embeddings=128)


def llama():
    return t.make_llama(seq=64, hidden_size=512, intermediate_size=1376, num_hidden_layers=6,
                        num_attention_heads=8, num_key_value_heads=2, vocab_size=8000,
                        max_position_embeddings=128)


def t5enc():
    return t.make_t5enc(seq=64, d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64,
                        vocab_size=8000)


def whisper_enc():
    return t.make_whisper_enc(frames=3000, d_model=384, encoder_layers=4, encoder_attention_heads=6,
                              decoder_attention_heads=6, encoder_ffn_dim=1536,
                              decoder_ffn_dim=1536, max_source_positions=1500)


def wav2vec2():
    # transformers' default feature extractor: 7 convs of 512 channels
    return t.make_wav2vec2(samples=16000, hidden_size=384, num_hidden_layers=4,
                           num_attention_heads=6, intermediate_size=1536,
                           conv_dim=(512,) * 7, conv_stride=(5, 2, 2, 2, 2, 2, 2),
                           conv_kernel=(10, 3, 3, 3, 3, 2, 2), num_conv_pos_embeddings=128,
                           num_conv_pos_embedding_groups=16)


def lstm():
    return RNNLin(torch.nn.LSTM(256, 512, num_layers=2, batch_first=True), 512), (torch.randn(1, 64, 256),)


def gru():
    return RNNLin(torch.nn.GRU(256, 512, num_layers=1, batch_first=True), 512), (torch.randn(1, 64, 256),)


MODELS = {f.__name__: f for f in [gpt2, bert, llama, t5enc, whisper_enc, wav2vec2, lstm, gru]}


def main():
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MODELS):
        torch.manual_seed(0)
        model, args = MODELS[name]()
        model.eval()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(model, args, os.path.join(d, "model.onnx"), dynamo=True)
        print(f"{name}: {d}/model.onnx", flush=True)


if __name__ == "__main__":
    main()
