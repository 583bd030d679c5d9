#!/usr/bin/env python3
"""Quantizes a float ONNX model with onnxruntime's own tools, the two ways its users do:

  OUT/dynamic.onnx   quantize_dynamic (int8 weights; DynamicQuantizeLinear and
                     MatMulInteger at run time)
  OUT/dynamic_7bit.onnx  the same with reduce_range (7-bit weights: what onnxruntime
                     recommends on CPUs without VNNI)
  OUT/qdq.onnx       quantize_static in the QDQ format, per-channel int8 weights, the
                     activation type of --activations (int8 by default, onnxruntime's),
                     calibrated on 8 random feeds like the benchmarks' (floats uniform in
                     [-1, 1), token ids random below --vocab, masks ones)
  OUT/qdq_7bit.onnx  the same with reduce_range

Usage: bench/quantize_model.py MODEL.onnx OUT [--vocab 8000] [--activations s8|u8]
       [--ops MatMul,Gemm | all]   (the operators quantize_static quantizes; `all`: every
                                    one onnxruntime can, convolutions included)
Needs onnx, onnxruntime and numpy (tests/onnx/requirements.txt).
"""
import argparse
import os

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)


def feeds(model, vocab, n, seed=0):
    rng = np.random.default_rng(seed)
    m = onnx.load(model, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    out = []
    for _ in range(n):
        f = {}
        for i in m.graph.input:
            if i.name in inits:
                continue
            t = i.type.tensor_type
            shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
            if t.elem_type == onnx.TensorProto.FLOAT:
                f[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
            elif "mask" in i.name:
                f[i.name] = np.ones(shape, dtype=np.int64)
            else:
                f[i.name] = rng.integers(0, vocab, shape).astype(np.int64)
        out.append(f)
    return out


class Reader(CalibrationDataReader):
    def __init__(self, data):
        self.it = iter(data)

    def get_next(self):
        return next(self.it, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--activations", choices=["s8", "u8"], default="s8")
    ap.add_argument("--ops", default="MatMul,Gemm")
    ap.add_argument("--static-only", action="store_true",
                    help="only the QDQ forms (a CNN's convolutions are not quantized dynamically)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.static_only:
        quantize_dynamic(a.model, os.path.join(a.out, "dynamic.onnx"),
                         weight_type=QuantType.QInt8)
        quantize_dynamic(a.model, os.path.join(a.out, "dynamic_7bit.onnx"),
                         weight_type=QuantType.QInt8, reduce_range=True)
    act = QuantType.QInt8 if a.activations == "s8" else QuantType.QUInt8
    for name, reduce_range in [("qdq.onnx", False), ("qdq_7bit.onnx", True)]:
        quantize_static(a.model, os.path.join(a.out, name),
                        Reader(feeds(a.model, a.vocab, 8)), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=act, weight_type=QuantType.QInt8,
                        op_types_to_quantize=None if a.ops == "all" else a.ops.split(","),
                        reduce_range=reduce_range)
    print("wrote", *sorted(os.listdir(a.out)))


if __name__ == "__main__":
    main()
