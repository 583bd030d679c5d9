#!/usr/bin/env python3
"""Makes int8 models the way onnxruntime's quantization tools write them, with inputs and
onnxruntime's outputs, for crates/graph/tests/onnx_quant.rs:

  cnn_qdq_per_channel   a small CNN (conv, relu, conv, max pool, global average pool,
                        gemm) quantized by quantize_static, QDQ format, per-channel
                        weights, uint8 activations
  cnn_qoperator         the same CNN in the QOperator format (QLinearConv, QLinearMatMul
                        and com.microsoft contrib operators, which the importer refuses by
                        name), to check the refusal
  mlp_dynamic           an MLP (MatMul, Add, Relu, MatMul) quantized by quantize_dynamic
                        (DynamicQuantizeLinear, MatMulInteger)
  mlp_dynamic_7bit      mlp_dynamic with reduce_range (7-bit weights, what onnxruntime
                        recommends on CPUs without VNNI)
  mlp_qdq_s8            an MLP of 30 input features (not a multiple of 4) quantized by
                        quantize_static, QDQ, int8 activations and per-channel int8
                        weights (what a quantized transformer's linear layers are)
  mlp_qdq_u8            the same with uint8 activations and uint8 weights (asymmetric:
                        a zero point per output column)

Usage: python3 tests/onnx/make_quant_models.py OUTDIR    (writes OUTDIR/NAME/{model.onnx,
input_0.npy, output_0.npy, output_0_unfused.npy (onnxruntime with its graph optimizations
off: every operator as ONNX defines it)} and OUTDIR/quant_manifest.json, which also gives the scale of the
DequantizeLinear that makes a QDQ model's output). Seeded; needs onnx,
onnxruntime and numpy (tests/onnx/requirements.txt).
"""

import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

RNG = np.random.default_rng(7)


def init(name, shape, scale):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def cnn():
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    inits = [
        init("w1", (8, 3, 3, 3), 0.3),
        init("b1", (8,), 0.1),
        init("w2", (16, 8, 3, 3), 0.15),
        init("b2", (16,), 0.1),
        init("w3", (10, 16), 0.3),
        init("b3", (10,), 0.1),
    ]
    g = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # what onnxruntime 1.31 loads (onnx 1.23 writes 14 by default)
    return m


def depthwise_cnn():
    """A MobileNet block: a conv, a depthwise 3x3 (stride 2) and a pointwise conv."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd", "bd"], ["cd"], pads=[1, 1, 1, 1], strides=[2, 2],
                         group=8),
        helper.make_node("Relu", ["cd"], ["rd"]),
        helper.make_node("Conv", ["rd", "w2", "b2"], ["c2"]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    inits = [
        init("w1", (8, 3, 3, 3), 0.3),
        init("b1", (8,), 0.1),
        init("wd", (8, 1, 3, 3), 0.4),
        init("bd", (8,), 0.1),
        init("w2", (12, 8, 1, 1), 0.3),
        init("b2", (12,), 0.1),
    ]
    g = helper.make_graph(
        nodes,
        "depthwise_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def mlp(k=32, rows=4):
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["y"]),
    ]
    inits = [init("w1", (k, 64), 0.2), init("b1", (64,), 0.1), init("w2", (64, 16), 0.2)]
    g = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 16])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # what onnxruntime 1.31 loads (onnx 1.23 writes 14 by default)
    return m


class Reader(CalibrationDataReader):
    def __init__(self, shape):
        self.data = iter(
            [{"x": RNG.standard_normal(shape).astype(np.float32)} for _ in range(8)]
        )

    def get_next(self):
        return next(self.data, None)


def write(out, name, model_path, x):
    d = os.path.join(out, name)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"x": x})[0]
    np.save(os.path.join(d, "input_0.npy"), x)
    np.save(os.path.join(d, "output_0.npy"), y)
    # onnxruntime without its graph optimizations runs each Q/DQ and product as ONNX
    # defines them; its fused int8 kernels may differ (on CPUs without VNNI, its int8 ×
    # int8 kernels saturate 16-bit pair sums)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    unfused = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    np.save(os.path.join(d, "output_0_unfused.npy"), unfused.run(None, {"x": x})[0])
    m = onnx.load(model_path)
    ops = sorted({f"{n.domain}::{n.op_type}" if n.domain else n.op_type for n in m.graph.node})
    # the scale of the DequantizeLinear that makes the output, if one does: one step of
    # the grid the output lies on
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    step = None
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == m.graph.output[0].name:
            step = float(np.max(inits[n.input[1]]))
    return {"name": name, "model": f"{name}/model.onnx", "input": f"{name}/input_0.npy",
            "output": f"{name}/output_0.npy", "ops": ops, "output_step": step}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    entries = []
    for name, fmt in [("cnn_qdq_per_channel", QuantFormat.QDQ), ("cnn_qoperator", QuantFormat.QOperator)]:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        f = os.path.join(d, "float.onnx")
        onnx.save(cnn(), f)
        q = os.path.join(d, "model.onnx")
        quantize_static(f, q, Reader((1, 3, 16, 16)), quant_format=fmt, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        entries.append(write(out, name, q, RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)))
    d = os.path.join(out, "mlp_dynamic")
    os.makedirs(d, exist_ok=True)
    f = os.path.join(d, "float.onnx")
    onnx.save(mlp(), f)
    q = os.path.join(d, "model.onnx")
    quantize_dynamic(f, q, weight_type=QuantType.QInt8)
    entries.append(write(out, "mlp_dynamic", q, RNG.standard_normal((4, 32)).astype(np.float32)))
    d = os.path.join(out, "mlp_dynamic_7bit")
    os.makedirs(d, exist_ok=True)
    q = os.path.join(d, "model.onnx")
    quantize_dynamic(f, q, weight_type=QuantType.QInt8, reduce_range=True)
    entries.append(write(out, "mlp_dynamic_7bit", q,
                         RNG.standard_normal((4, 32)).astype(np.float32)))
    for name, act, wt in [("mlp_qdq_s8", QuantType.QInt8, QuantType.QInt8),
                          ("mlp_qdq_u8", QuantType.QUInt8, QuantType.QUInt8)]:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        f = os.path.join(d, "float.onnx")
        onnx.save(mlp(k=30, rows=6), f)
        q = os.path.join(d, "model.onnx")
        quantize_static(f, q, Reader((6, 30)), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=act, weight_type=wt)
        entries.append(write(out, name, q, RNG.standard_normal((6, 30)).astype(np.float32)))
    d = os.path.join(out, "cnn_qdq_depthwise")
    os.makedirs(d, exist_ok=True)
    f = os.path.join(d, "float.onnx")
    onnx.save(depthwise_cnn(), f)
    q = os.path.join(d, "model.onnx")
    quantize_static(f, q, Reader((1, 3, 16, 16)), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    entries.append(write(out, "cnn_qdq_depthwise", q,
                         RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)))
    with open(os.path.join(out, "quant_manifest.json"), "w") as fh:
        json.dump(entries, fh, indent=2)


if __name__ == "__main__":
    main()
