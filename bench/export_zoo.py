#!/usr/bin/env python3
"""Export the model families of issue 38 to ONNX with random weights, with a seeded
input and onnxruntime's output, so that tessera's import, correctness and latency can be
checked on architectures no one here wrote: torchvision classifiers and a segmentation
network, and BERT-style encoders (PyTorch's nn.TransformerEncoder; the HF transformers
package is not needed).

Usage: python3 bench/export_zoo.py OUTDIR [--only NAME[,NAME…]] [--list]

Needs torch and torchvision, onnx and onnxruntime (pip, in a venv: `pip install torch
torchvision onnx onnxruntime`; where only PyPI is reachable its Linux torch is a CUDA
build, and torch 2.15 does not import without the CUDA library packages it depends on
— about 5 GB — though it runs on the CPU). Weights are torch's default
random initialisation under a fixed seed (no download is possible or needed); every
model is exported in eval mode, opset 17, constant folding on, with the legacy
(TorchScript) exporter, which writes the node patterns users' exports have.

OUTDIR gets per model NAME: NAME.onnx, NAME.input.npy, NAME.expected.npy (onnxruntime,
CPU EP, first output), NAME.exact.npy (torch in float64, the same weights) and
manifest.json ([{"name", "model", "input_name", "input",
"expected", "exact", "family", "ops"}]).
"""
import argparse
import json
import os
import sys

import numpy as np


def vision(name, ctor, size=224, **kw):
    return (name, lambda tv: getattr(tv.models, ctor)(weights=None, **kw), (1, 3, size, size))


def segmentation(name, ctor, size=224, **kw):
    def make(tv):
        m = getattr(tv.models.segmentation, ctor)(weights=None, weights_backbone=None, **kw)
        return OutOnly(m)
    return (name, make, (1, 3, size, size))


class OutOnly:
    """A segmentation model's dict output reduced to its "out" tensor."""

    def __new__(cls, m):
        import torch

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        return Wrap()


def encoder(name, layers, width, heads, ffn, seq):
    def make(tv):
        import torch

        class Encoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                layer = torch.nn.TransformerEncoderLayer(width, heads, ffn, dropout=0.0,
                                                         activation="gelu", batch_first=True)
                self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

            def forward(self, x):
                return self.enc(x)
        return Encoder()
    return (name, make, (1, seq, width))


MODELS = {
    "transformer": [
        vision("vit_b_16", "vit_b_16"),
        vision("swin_t", "swin_t"),
        vision("convnext_tiny", "convnext_tiny"),
        encoder("bert_base_seq128", 12, 768, 12, 3072, 128),
        encoder("bert_small_seq128", 4, 256, 4, 1024, 128),
    ],
    "cnn": [
        vision("resnet50", "resnet50"),
        vision("resnext50_32x4d", "resnext50_32x4d"),
        vision("regnet_y_400mf", "regnet_y_400mf"),
        vision("efficientnet_b0", "efficientnet_b0"),
        vision("mobilenet_v3_large", "mobilenet_v3_large"),
        vision("shufflenet_v2_x1_0", "shufflenet_v2_x1_0"),
        vision("inception_v3", "inception_v3", size=299, aux_logits=False, init_weights=True),
        segmentation("deeplabv3_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", aux_loss=False),
    ],
}


def calibrate(m, shape, seed):
    """Sets every batch norm's running statistics to those of a batch of random inputs, so
    that activations stay O(1) through the network: under torch's default initialisation
    with identity running statistics, Inception-v3's logits reach 1e11 and
    EfficientNet's 1e-14, where a per-element comparison means nothing."""
    import torch

    bns = [b for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for b in bns:
        b.reset_running_stats()
        b.momentum = None  # a cumulative average over the calibration batches
    m.train()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _ in range(2):
            m(torch.rand((4,) + tuple(shape[1:]), generator=g) * 2 - 1)


def export(name, make, shape, family, outdir, seed=0):
    import onnx
    import onnxruntime as ort
    import torch
    import torchvision as tv

    torch.manual_seed(seed)
    # the fused inference path of nn.TransformerEncoderLayer has no ONNX export
    torch.backends.mha.set_fastpath_enabled(False)
    m = make(tv)
    for lin in m.modules():
        # ViT's head is initialised to zeros: every output would be its bias
        if isinstance(lin, torch.nn.Linear) and not lin.weight.any():
            torch.nn.init.normal_(lin.weight, std=lin.in_features ** -0.5)
    calibrate(m, shape, seed)
    m = m.eval()
    x = np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)
    path = os.path.join(outdir, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (torch.from_numpy(x),), path, opset_version=17, input_names=["input"],
                          output_names=["output"], do_constant_folding=True, dynamo=False)
    model = onnx.load(path)
    ops = sorted({n.op_type for n in model.graph.node})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    y = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    # a float64 reference (torch, the same weights): where tessera and onnxruntime
    # differ, it says which one is nearer the exact result
    with torch.no_grad():
        y64 = m.double()(torch.from_numpy(x).double())
    np.save(os.path.join(outdir, f"{name}.exact.npy"), y64.numpy())
    np.save(os.path.join(outdir, f"{name}.input.npy"), x)
    np.save(os.path.join(outdir, f"{name}.expected.npy"), y.astype(np.float32))
    return {"name": name, "model": f"{name}.onnx", "input_name": "input", "input": f"{name}.input.npy",
            "expected": f"{name}.expected.npy", "exact": f"{name}.exact.npy", "family": family, "ops": ops}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    todo = [(fam, m) for fam, ms in MODELS.items() for m in ms]
    if args.list:
        for fam, (name, _, shape) in todo:
            print(f"{name}\t{fam}\t{shape}")
        return
    if args.only:
        want = set(args.only.split(","))
        unknown = want - {m[0] for _, m in todo}
        if unknown:
            sys.exit(f"unknown model(s): {', '.join(sorted(unknown))}")
        todo = [(f, m) for f, m in todo if m[0] in want]
    os.makedirs(args.outdir, exist_ok=True)
    manifest_path = os.path.join(args.outdir, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else []
    for fam, (name, make, shape) in todo:
        entry = export(name, make, shape, fam, args.outdir)
        manifest = [e for e in manifest if e["name"] != name] + [entry]
        print(f"{name}: {len(entry['ops'])} operator types: {' '.join(entry['ops'])}", flush=True)
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
