#!/usr/bin/env python3
"""PyTorch's ResNet-18 at batch 1, float32, on a GPU: eager and torch.compile, the peer of
`tessera run --network resnet-18 --target cuda --benchmark` in BENCHMARKS.md.

    python3 bench/resnet18_torch.py [--device cuda] [--repeat 50] [--size 224]

Prints one JSON line per mode: the median and mean latency in milliseconds over
--repeat runs, each timed with CUDA events after 10 warm-up runs (cudnn.benchmark on,
as a user tuning for speed would have it). Needs torch and torchvision.
"""
import argparse
import json
import statistics

import torch
import torchvision


def timed(fn, x, repeat, device):
    with torch.no_grad():
        for _ in range(10):
            fn(x)
        times = []
        for _ in range(repeat):
            if device == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn(x)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                import time

                t0 = time.perf_counter()
                fn(x)
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), statistics.mean(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet18(weights=None).eval().to(a.device)
    x = torch.randn(1, 3, a.size, a.size, device=a.device)
    modes = [("eager", model)]
    try:
        modes.append(("torch.compile", torch.compile(model)))
    except Exception as e:  # torch.compile needs a working Triton/inductor
        print(json.dumps({"mode": "torch.compile", "error": str(e)}))
    for name, fn in modes:
        try:
            median, mean = timed(fn, x, a.repeat, a.device)
        except Exception as e:
            print(json.dumps({"mode": name, "error": str(e)}))
            continue
        print(json.dumps({
            "mode": name,
            "device": torch.cuda.get_device_name() if a.device == "cuda" else a.device,
            "median_ms": round(median, 4),
            "mean_ms": round(mean, 4),
        }))


if __name__ == "__main__":
    main()
