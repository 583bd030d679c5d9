#!/usr/bin/env python3
"""PyTorch's side of `bench/gpu_check.sh` on an NVIDIA GPU: the peers, and the models
tessera runs, exported from the same modules.

    python3 bench/gpu_peers.py --out DIR [--repeat 50]

Writes into DIR:
- resnet18_b1.onnx, resnet18_b16.onnx, resnet50_b1.onnx: torchvision models with random
  weights (seed 0), exported with `torch.onnx.export(..., dynamo=False)`;
- input.npy and torch_out.npy: one seeded image and ResNet-18's output for it (the
  parity check's reference);
- peers.jsonl: one JSON line per measurement, milliseconds with CUDA events, median
  and minimum over --repeat runs after 10 warm-up runs: cuBLAS matmul 1024³, cuDNN
  conv 1×512×7×7 → 512 3×3 pad 1 (benchmark mode), each network in eager mode, and
  ResNet-18 b1 under torch.compile.

TF32 is off (tessera computes in full fp32). Needs torch, torchvision, onnx.
"""
import argparse
import json
import os
import statistics

import numpy as np
import torch
import torchvision


def timed(fn, repeat):
    with torch.no_grad():
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeat):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return {"median_ms": round(statistics.median(times), 5), "min_ms": round(min(times), 5)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = "cuda"
    lines = open(os.path.join(a.out, "peers.jsonl"), "w")

    def emit(what, r):
        r = dict(what=what, device=torch.cuda.get_device_name(), **r)
        print(json.dumps(r), flush=True)
        lines.write(json.dumps(r) + "\n")
        lines.flush()

    torch.manual_seed(0)
    x = torch.randn(1024, 1024, device=dev)
    y = torch.randn(1024, 1024, device=dev)
    emit("matmul 1024^3 (cuBLAS)", timed(lambda: x @ y, a.repeat))
    conv = torch.nn.Conv2d(512, 512, 3, padding=1, bias=False).to(dev).eval()
    img = torch.randn(1, 512, 7, 7, device=dev)
    emit("conv2d 1x512x7x7 -> 512 3x3 pad 1 (cuDNN)", timed(lambda: conv(img), a.repeat))

    models = {
        "resnet18_b1": (torchvision.models.resnet18, 1),
        "resnet18_b16": (torchvision.models.resnet18, 16),
        "resnet50_b1": (torchvision.models.resnet50, 1),
    }
    rng = np.random.default_rng(0)
    for name, (make, batch) in models.items():
        torch.manual_seed(0)
        model = make(weights=None).eval()
        inp = rng.uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)
        path = os.path.join(a.out, f"{name}.onnx")
        torch.onnx.export(model, torch.from_numpy(inp), path, input_names=["input"],
                          output_names=["output"], dynamo=False)
        model = model.to(dev)
        t = torch.from_numpy(inp).to(dev)
        emit(f"{name} eager", timed(lambda: model(t), a.repeat))
        if name == "resnet18_b1":
            np.save(os.path.join(a.out, "input.npy"), inp)
            with torch.no_grad():
                np.save(os.path.join(a.out, "torch_out.npy"), model(t).cpu().numpy())
            r18 = (model, t)
    # last: a cold torch.compile may take long, and everything tessera needs is written
    if not a.no_compile:
        model, t = r18
        try:
            compiled = torch.compile(model)
            emit("resnet18_b1 torch.compile", timed(lambda: compiled(t), a.repeat))
        except Exception as e:  # inductor needs a working Triton
            emit("resnet18_b1 torch.compile", {"error": str(e)[:300]})


if __name__ == "__main__":
    main()
