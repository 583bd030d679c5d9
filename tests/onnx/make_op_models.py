#!/usr/bin/env python3
"""Generate small per-operator ONNX test models for Tessera's importer, with reference outputs.

Usage: python3 tests/onnx/make_op_models.py OUTDIR

Every model is built with onnx.helper (no torch, no downloads) and checked with
onnx.checker (full_check=True where the checker's strict shape inference accepts it).
There are two groups of cases:

  "ops"   single-node (or few-node) models, one per operator and attribute combination,
          at the opset where the operator has that form (old opsets included);
  "arch"  small opset-9 networks in the node patterns of the classic ONNX model zoo models
          (AlexNet, ZFNet-512, Inception v1/v2, ResNet-50 (Caffe2), ShuffleNet, SqueezeNet 1.0,
          DenseNet-121, VGG-19) with He-scaled seeded random weights, and two opset-17
          transformers in PyTorch's export patterns (a BERT-style encoder layer, a small ViT).

Weights, shapes, axes, indices, pads, scales etc. are initializers, never graph inputs, so the
importer sees them as constants. Graph inputs are seeded random arrays (a fixed seed per case,
derived from the case name). Reference outputs come from onnxruntime (CPU EP, 2 intra-op
threads); where onnxruntime has no kernel for an old opset, from a numpy implementation
(the case's "reference" is then "numpy"). Where both exist they are cross-checked.

OUTDIR gets, per case NAME:

    NAME.onnx
    NAME.in0.npy, NAME.in1.npy, ...    one per graph input, in graph input order
    NAME.out0.npy, NAME.out1.npy, ...  one per graph output

and op_manifest.json, a list of
    {"name", "op", "group": "ops"|"arch", "opset", "model",
     "inputs": [{"name", "file"}, ...], "outputs": [file, ...],
     "reference": "onnxruntime"|"numpy"}.

The output is deterministic: the same script and package versions give the same bytes.
Requirements: tests/onnx/requirements.txt (onnx, onnxruntime, numpy).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

PRODUCER = "tessera tests/onnx/make_op_models.py"
F32 = np.float32
I64 = np.int64
INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)
FLOAT = TensorProto.FLOAT
BOOL = TensorProto.BOOL


# ---------------------------------------------------------------------------------------
# plumbing
# ---------------------------------------------------------------------------------------
def hash_name(name):
    """A stable seed from the name (Python's hash() is salted per process)."""
    h = 0
    for ch in name.encode():
        h = (h * 131 + ch) % (2**31 - 1)
    return h + 1000


class Rng:
    """Seeded random arrays, one generator per case (seed from the case name)."""

    def __init__(self, name):
        self.r = np.random.default_rng(hash_name(name))

    def normal(self, *shape, scale=1.0):
        return (self.r.standard_normal(shape, dtype=F32) * F32(scale)).astype(F32)

    def uniform(self, lo, hi, *shape):
        return self.r.uniform(lo, hi, size=shape).astype(F32)

    def ints(self, lo, hi, *shape, dtype=I64):
        return self.r.integers(lo, hi, size=shape).astype(dtype)

    def bools(self, *shape):
        return self.r.random(shape) < 0.5


class Init:
    """Marks an array as an initializer (constant), not a graph input."""

    def __init__(self, arr):
        self.arr = np.asarray(arr)


CASES = []


def add_case(name, op, opset, nodes, inputs, inits, outputs, group="ops", ref=None):
    """inputs: [(name, array)] graph inputs in order; inits: [(name, array)];
    outputs: [(name, TensorProto elem type)]; ref: numpy function(*input arrays) -> [outputs]."""
    assert all(c["name"] != name for c in CASES), name
    CASES.append(dict(name=name, op=op, opset=opset, nodes=nodes, inputs=inputs, inits=inits,
                      outputs=outputs, group=group, ref=ref))


def single(name, op, opset, ins, attrs=None, n_out=1, out_type=FLOAT, ref=None, main_op=None):
    """A one-node case. ins: [(input name, array | Init(array) | None for an omitted
    optional input)] in the operator's input order."""
    node_inputs, inputs, inits = [], [], []
    for nm, v in ins:
        if v is None:
            node_inputs.append("")
            continue
        node_inputs.append(nm)
        if isinstance(v, Init):
            inits.append((nm, v.arr))
        else:
            inputs.append((nm, v))
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    outs = ["out"] if n_out == 1 else [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, node_inputs, outs, name=f"{name}_node", **(attrs or {}))
    add_case(name, main_op or op, opset, [node], inputs, inits, [(o, out_type) for o in outs], ref=ref)


def ir_version_for(opset):
    """The lowest IR version for the opset, but at least 4: IR 3 (opsets 1-8) requires every
    initializer to be listed as a graph input too, and here constants must not be inputs."""
    try:
        v = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    except ValueError:  # opsets with no table entry (e.g. 2): all before opset 9
        v = 3
    return max(v, 4)


def make_model(c, output_shapes):
    def vi(name, arr_or_type, shape):
        return helper.make_tensor_value_info(name, arr_or_type, shape)

    ginputs = [vi(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for n, a in c["inputs"]]
    goutputs = [vi(n, t, s) for (n, t), s in zip(c["outputs"], output_shapes)]
    inits = [numpy_helper.from_array(np.require(a, requirements="C"), n) for n, a in c["inits"]]
    graph = helper.make_graph(c["nodes"], c["name"], ginputs, goutputs, initializer=inits)
    opsets = [helper.make_opsetid("", c["opset"])]
    return helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER, producer_version="1",
                             ir_version=ir_version_for(c["opset"]))


def ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def build(c, outdir):
    name = c["name"]
    feeds = {n: a for n, a in c["inputs"]}
    # 1. a first model (outputs without shapes) to run; the saved one gets the real shapes
    draft = make_model(c, [None] * len(c["outputs"]))
    reference, refused = "onnxruntime", None
    try:
        sess = ort_session(draft)
    except Exception as e:  # onnxruntime refuses the model (no kernel for this old opset)
        if c["ref"] is None:
            raise SystemExit(f"{name}: onnxruntime refused the model and there is no numpy reference: {e}")
        sess, refused = None, str(e).split("\n")[0]
    if sess is not None:
        outs = sess.run(None, feeds)
    else:
        outs = c["ref"](*[a for _, a in c["inputs"]])
        reference = "numpy"
    outs = [np.asarray(o) for o in outs]
    if c["ref"] is not None and reference == "onnxruntime":  # cross-check our numpy version
        mine = c["ref"](*[a for _, a in c["inputs"]])
        for i, (a, b) in enumerate(zip(outs, mine)):
            b = np.asarray(b)
            if a.shape != b.shape or not np.allclose(a, b.astype(a.dtype), rtol=1e-4, atol=1e-5):
                raise SystemExit(f"{name}: numpy reference disagrees with onnxruntime on output {i}")
    assert len(outs) == len(c["outputs"]), name
    for (oname, otype), o in zip(c["outputs"], outs):
        if helper.np_dtype_to_tensor_dtype(o.dtype) != otype:
            raise SystemExit(f"{name}: output {oname} is {o.dtype}, declared {otype}")
        if o.dtype.kind == "f" and not np.all(np.isfinite(o)):
            raise SystemExit(f"{name}: non-finite output")

    # 2. the saved model, with output shapes, checked
    model = make_model(c, [list(o.shape) for o in outs])
    try:
        onnx.checker.check_model(model, full_check=True)
        check = "full"
    except Exception:
        onnx.checker.check_model(model)
        check = "basic"

    with open(os.path.join(outdir, f"{name}.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    in_entries = []
    for i, (n, a) in enumerate(c["inputs"]):
        fn = f"{name}.in{i}.npy"
        np.save(os.path.join(outdir, fn), a)
        in_entries.append({"name": n, "file": fn})
    out_files = []
    for i, o in enumerate(outs):
        fn = f"{name}.out{i}.npy"
        np.save(os.path.join(outdir, fn), o)
        out_files.append(fn)
    entry = {
        "name": name,
        "op": c["op"],
        "group": c["group"],
        "opset": c["opset"],
        "model": f"{name}.onnx",
        "inputs": in_entries,
        "outputs": out_files,
        "reference": reference,
    }
    return entry, refused, check


# ---------------------------------------------------------------------------------------
# numpy references (for old opsets onnxruntime has no kernels for; cross-checked otherwise)
# ---------------------------------------------------------------------------------------
def np_softmax_2d(x, axis):
    """Softmax with the opset < 13 semantics: flatten to [prod(d[:axis]), prod(d[axis:])]."""
    axis = axis % x.ndim
    x2 = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(x2 - x2.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(F32)


def np_bn(x, s, b, m, v, eps):
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + F32(eps)) * s.reshape(sh) + b.reshape(sh)).astype(F32)


def np_pad(x, pads, mode="constant", value=0.0):
    n = x.ndim
    pw = [(pads[i], pads[i + n]) for i in range(n)]
    if mode == "constant":
        return np.pad(x, pw, mode="constant", constant_values=value).astype(F32)
    return np.pad(x, pw, mode={"reflect": "reflect", "edge": "edge"}[mode]).astype(F32)


# ---------------------------------------------------------------------------------------
# 1. single-node cases
# ---------------------------------------------------------------------------------------
def unary_cases():
    shape = (2, 3, 5, 6)
    specs = [
        # name, op, opset, attrs, input kind
        ("abs", "Abs", 13, {}, "normal"),
        ("neg", "Neg", 13, {}, "normal"),
        ("sign", "Sign", 13, {}, "signzero"),
        ("log", "Log", 13, {}, "positive"),
        ("floor", "Floor", 13, {}, "wide"),
        ("ceil", "Ceil", 13, {}, "wide"),
        ("round", "Round", 11, {}, "halves"),
        ("reciprocal", "Reciprocal", 13, {}, "awayzero"),
        ("softplus", "Softplus", 13, {}, "wide"),
        ("softsign", "Softsign", 13, {}, "wide"),
        ("elu", "Elu", 13, {}, "wide"),
        ("elu_alpha0_5", "Elu", 13, {"alpha": 0.5}, "wide"),
        ("leakyrelu", "LeakyRelu", 13, {}, "normal"),
        ("leakyrelu_alpha0_2", "LeakyRelu", 13, {"alpha": 0.2}, "normal"),
        ("selu", "Selu", 13, {}, "wide"),
        ("selu_alpha1_5_gamma1_2", "Selu", 13, {"alpha": 1.5, "gamma": 1.2}, "wide"),
        ("hardsigmoid", "HardSigmoid", 13, {}, "wide"),
        ("hardsigmoid_alpha0_3_beta0_4", "HardSigmoid", 13, {"alpha": 0.3, "beta": 0.4}, "wide"),
        ("hardswish", "HardSwish", 14, {}, "wide"),
        ("gelu", "Gelu", 20, {}, "wide"),
        ("gelu_tanh", "Gelu", 20, {"approximate": "tanh"}, "wide"),
        ("erf", "Erf", 13, {}, "normal"),
        ("not", "Not", 1, {}, "bool"),
        ("relu", "Relu", 13, {}, "normal"),
        ("relu_o6", "Relu", 6, {}, "normal"),
        ("sigmoid", "Sigmoid", 13, {}, "wide"),
        ("tanh", "Tanh", 13, {}, "wide"),
        ("exp", "Exp", 13, {}, "normal"),
        ("sqrt", "Sqrt", 13, {}, "positive"),
    ]
    for name, op, opset, attrs, kind in specs:
        g = Rng(name)
        if kind == "normal":
            x = g.normal(*shape)
        elif kind == "wide":
            x = g.normal(*shape, scale=3.0)
        elif kind == "positive":
            x = g.uniform(0.05, 4.0, *shape)
        elif kind == "awayzero":
            x = g.uniform(0.2, 3.0, *shape) * np.where(g.bools(*shape), 1, -1).astype(F32)
        elif kind == "signzero":
            x = g.normal(*shape)
            x[0, 0, 0, :3] = 0.0
        elif kind == "halves":  # multiples of 0.25 (incl. exact .5 ties: round half to even)
            x = (g.ints(-16, 17, *shape) * 0.25).astype(F32)
        elif kind == "bool":
            x = g.bools(*shape)
        single(name, op, opset, [("X", x)], attrs, out_type=BOOL if kind == "bool" else FLOAT)


def prelu_cases():
    for name, sshape in [("prelu_slope_c11", (3, 1, 1)), ("prelu_slope_1", (1,)),
                         ("prelu_slope_full", (2, 3, 5, 6))]:
        g = Rng(name)
        x = g.normal(2, 3, 5, 6)
        slope = g.uniform(0.05, 0.5, *sshape)
        single(name, "PRelu", 9 if name == "prelu_slope_1" else 16, [("X", x), ("slope", Init(slope))])


def pow_cases():
    g = Rng("pow")
    single("pow_exp2", "Pow", 13, [("X", g.normal(2, 3, 4)), ("Y", Init(np.array(2.0, F32)))])
    single("pow_exp0_5", "Pow", 13, [("X", g.uniform(0.01, 4.0, 2, 3, 4)), ("Y", Init(np.array(0.5, F32)))])
    single("pow_exp3", "Pow", 13, [("X", g.normal(2, 3, 4)), ("Y", Init(np.array(3.0, F32)))])
    single("pow_exp_tensor", "Pow", 15, [("X", g.uniform(0.1, 3.0, 2, 3, 4)),
                                         ("Y", Init(np.array([0.5, 1.0, 2.0, -1.0], F32)))])
    single("pow_o7_exp2", "Pow", 7, [("X", g.normal(2, 3, 4)), ("Y", Init(np.array([2.0], F32)))])


def compare_cases():
    g = Rng("equal_int64")
    single("equal_int64", "Equal", 13, [("A", g.ints(0, 3, 2, 3, 4)), ("B", g.ints(0, 3, 3, 4))], out_type=BOOL)
    g = Rng("equal_float")
    a = g.ints(-2, 3, 2, 3, 4).astype(F32)
    b = g.ints(-2, 3, 4).astype(F32)
    single("equal_float", "Equal", 13, [("A", a), ("B", b)], out_type=BOOL)
    g = Rng("equal_o11")
    single("equal_o11_int64", "Equal", 11, [("A", g.ints(0, 3, 3, 4)), ("B", g.ints(0, 3, 1, 4))], out_type=BOOL)
    for name, op, opset in [("less", "Less", 13), ("greater", "Greater", 13), ("less_o9", "Less", 9),
                            ("lessorequal", "LessOrEqual", 12), ("lessorequal_o16", "LessOrEqual", 16),
                            ("greaterorequal", "GreaterOrEqual", 12),
                            ("greaterorequal_o16", "GreaterOrEqual", 16)]:
        g = Rng(name)
        # small integers as floats so that ties (equality) occur
        a = g.ints(-2, 3, 2, 3, 4).astype(F32)
        b = g.ints(-2, 3, 3, 1).astype(F32)
        single(name, op, opset, [("A", a), ("B", b)], out_type=BOOL)
    for op in ["And", "Or", "Xor"]:
        name = op.lower()
        g = Rng(name)
        single(name, op, 7, [("A", g.bools(2, 3, 4)), ("B", g.bools(3, 4))], out_type=BOOL)
    g = Rng("where")
    single("where", "Where", 16, [("C", g.bools(2, 1, 4)), ("X", g.normal(3, 4)), ("Y", g.normal(2, 3, 1))])
    g = Rng("where_o9")
    single("where_o9", "Where", 9, [("C", g.bools(3, 4)), ("X", g.normal(2, 3, 4)), ("Y", g.normal(4))])


def variadic_cases():
    g = Rng("sum")
    single("sum_1", "Sum", 13, [("A", g.normal(2, 3, 4))])
    single("sum_2", "Sum", 13, [("A", g.normal(2, 3, 4)), ("B", g.normal(2, 3, 4))])
    single("sum_3_broadcast", "Sum", 13, [("A", g.normal(2, 3, 4)), ("B", g.normal(3, 1)), ("C", g.normal(2, 3, 4))])
    single("sum_o6_2", "Sum", 6, [("A", g.normal(2, 3, 4)), ("B", g.normal(2, 3, 4))])
    single("mean_3", "Mean", 13, [("A", g.normal(2, 3, 4)), ("B", g.normal(4)), ("C", g.normal(2, 1, 4))])
    single("max_3", "Max", 13, [("A", g.normal(2, 3, 4)), ("B", g.normal(3, 1)), ("C", g.normal(1, 4))])
    single("min_3", "Min", 13, [("A", g.normal(2, 3, 4)), ("B", g.normal(3, 1)), ("C", g.normal(1, 4))])


def softmax_cases():
    for name, op, opset, attrs in [
        ("softmax_o11_axis1", "Softmax", 11, {"axis": 1}),
        ("softmax_o11_default", "Softmax", 11, {}),
        ("softmax_o13_axis1", "Softmax", 13, {"axis": 1}),
        ("softmax_o13_default", "Softmax", 13, {}),
        ("logsoftmax_o11_default", "LogSoftmax", 11, {}),
        ("logsoftmax_o11_axis2", "LogSoftmax", 11, {"axis": 2}),
        ("logsoftmax_o13_axism1", "LogSoftmax", 13, {"axis": -1}),
        ("logsoftmax_o13_axis1", "LogSoftmax", 13, {"axis": 1}),
    ]:
        g = Rng(name)
        x = g.normal(2, 3, 4, 5, scale=2.0)
        ref = None
        if op == "Softmax" and opset < 13:
            ref = (lambda ax: (lambda x: [np_softmax_2d(x, ax)]))(attrs.get("axis", 1))
        single(name, op, opset, [("X", x)], attrs, ref=ref)


def split_cases():
    g = Rng("split")
    x = g.normal(2, 6, 4)
    single("split_o11_attr", "Split", 11, [("X", x)], {"axis": 1, "split": [1, 2, 3]}, n_out=3)
    single("split_o11_equal", "Split", 11, [("X", x)], {"axis": 1}, n_out=2)
    single("split_o13_input", "Split", 13, [("X", x), ("split", Init(np.array([2, 4], I64)))], {"axis": 1}, n_out=2)
    single("split_o13_equal_axis1", "Split", 13, [("X", x)], {"axis": 1}, n_out=3)
    single("split_o13_equal_axism1", "Split", 13, [("X", x)], {"axis": -1}, n_out=2)
    single("split_o13_default_axis", "Split", 13, [("X", g.normal(4, 3))], {}, n_out=2)
    single("split_o18_num_outputs", "Split", 18, [("X", x)], {"axis": 1, "num_outputs": 3}, n_out=3)
    single("split_o18_num_outputs_uneven", "Split", 18, [("X", g.normal(2, 7, 3))],
           {"axis": 1, "num_outputs": 3}, n_out=3)
    single("split_o18_num_outputs_uneven4", "Split", 18, [("X", g.normal(2, 3, 10))],
           {"axis": -1, "num_outputs": 4}, n_out=4)
    single("split_o18_input", "Split", 18, [("X", x), ("split", Init(np.array([4, 2], I64)))], {"axis": 1}, n_out=2)


def expand_tile_cases():
    g = Rng("expand")
    single("expand_3x1_to_2x3x4", "Expand", 13, [("X", g.normal(3, 1)), ("shape", Init(np.array([2, 3, 4], I64)))])
    single("expand_1x4_shape3x1", "Expand", 13, [("X", g.normal(1, 4)), ("shape", Init(np.array([3, 1], I64)))])
    single("expand_o8_rank_up", "Expand", 8, [("X", g.normal(4)), ("shape", Init(np.array([2, 1, 4], I64)))])
    g = Rng("tile")
    single("tile_2d_1x2", "Tile", 13, [("X", g.normal(3, 4)), ("repeats", Init(np.array([1, 2], I64)))])
    single("tile_3d_2x1x3", "Tile", 13, [("X", g.normal(2, 3, 4)), ("repeats", Init(np.array([2, 1, 3], I64)))])
    single("tile_o6_3d", "Tile", 6, [("X", g.normal(2, 3, 4)), ("repeats", Init(np.array([1, 2, 2], I64)))])


def gather_cases():
    g = Rng("gather")
    data = g.normal(5, 4, 6)
    single("gather_axis0_scalar", "Gather", 13, [("X", data), ("idx", Init(np.array(2, I64)))], {"axis": 0})
    single("gather_axis0_scalar_neg", "Gather", 13, [("X", data), ("idx", Init(np.array(-1, I64)))], {"axis": 0})
    single("gather_axis1_1d", "Gather", 13, [("X", data), ("idx", Init(np.array([0, 3, -1, 1], I64)))], {"axis": 1})
    single("gather_axism1_2d", "Gather", 13, [("X", data), ("idx", Init(np.array([[0, 5], [-2, 1], [3, 3]], I64)))],
           {"axis": -1})
    single("gather_axis0_2d_neg", "Gather", 11, [("X", data), ("idx", Init(np.array([[4, -5], [0, -1]], I64)))],
           {"axis": 0})
    single("gather_axis1_int32_idx", "Gather", 13, [("X", data), ("idx", Init(np.array([2, 0], np.int32)))],
           {"axis": 1})
    single("gather_o1_axis1", "Gather", 1, [("X", data), ("idx", Init(np.array([1, 2], I64)))], {"axis": 1})


def slice_cases():
    g = Rng("slice")
    x = g.normal(4, 5, 6)

    def sl(name, starts, ends, axes=None, steps=None, opset=13):
        ins = [("X", x), ("starts", Init(np.array(starts, I64))), ("ends", Init(np.array(ends, I64))),
               ("axes", None if axes is None else Init(np.array(axes, I64))),
               ("steps", None if steps is None else Init(np.array(steps, I64)))]
        single(name, "Slice", opset, ins)

    sl("slice_o13_axes02_step2", [1, 0], [3, 6], axes=[0, 2], steps=[1, 2])
    sl("slice_o13_neg_steps", [-1, 5], [INT64_MIN, 0], axes=[1, 2], steps=[-1, -2])
    sl("slice_o13_neg_step_partial", [3, -2], [0, -6], axes=[0, 2], steps=[-2, -1])
    sl("slice_o13_no_axes", [1, 1, 1], [3, INT64_MAX, -1])
    sl("slice_o13_no_axes_steps", [0, 0, 0], [4, 5, 6], axes=None, steps=[2, 1, 3])
    sl("slice_o13_end_intmax_step2", [1], [INT64_MAX], axes=[-1], steps=[2])
    sl("slice_o13_neg_axes_neg_starts", [-3, -4], [-1, 100], axes=[-1, -2])
    sl("slice_o13_clamp_start_end", [-100, 1], [2, 20], axes=[0, 1])  # start and end clamp to the dim
    sl("slice_o10_axes", [1], [-1], axes=[1], steps=[1], opset=10)
    single("slice_o9_attr", "Slice", 9, [("X", x)], {"starts": [1, 0], "ends": [3, -1], "axes": [0, 2]})
    single("slice_o9_attr_noaxes", "Slice", 9, [("X", x)], {"starts": [0, 1, 2], "ends": [2, INT64_MAX, 5]})


def reduce_cases():
    x_shape = (2, 3, 4, 5)
    axes_sets = [("ax1", [1]), ("ax12", [1, 2]), ("axm1", [-1]), ("all", None)]

    def make_x(name, op):
        g = Rng(name)
        if op == "ReduceProd":
            return g.uniform(0.6, 1.5, *x_shape) * np.where(g.bools(*x_shape), 1, -1).astype(F32)
        return g.normal(*x_shape)

    # axes as an attribute
    attr_ops = ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                "ReduceLogSumExp", "ReduceMean"]
    for op in attr_ops:
        for an, axes in axes_sets:
            for keep in (0, 1):
                name = f"{op.lower()}_o13_{an}_k{keep}"
                attrs = {"keepdims": keep}
                if axes is not None:
                    attrs["axes"] = axes
                single(name, op, 13, [("X", make_x(name, op))], attrs)
    # ReduceSum: opset 13 axes as input (all combinations), opset 11 attribute
    for an, axes in axes_sets:
        for keep in (0, 1):
            name = f"reducesum_o13_{an}_k{keep}"
            ins = [("X", make_x(name, "ReduceSum")),
                   ("axes", None if axes is None else Init(np.array(axes, I64)))]
            single(name, "ReduceSum", 13, ins, {"keepdims": keep})
    for an, axes in axes_sets:
        keep = 0 if an in ("ax12", "all") else 1
        name = f"reducesum_o11_{an}_k{keep}"
        attrs = {"keepdims": keep}
        if axes is not None:
            attrs["axes"] = axes
        single(name, "ReduceSum", 11, [("X", make_x(name, "ReduceSum"))], attrs)
    name = "reducesum_o13_noop_empty_axes"
    single(name, "ReduceSum", 13, [("X", make_x(name, "ReduceSum"))], {"noop_with_empty_axes": 1})
    name = "reducesum_o13_empty_axes_input"  # axes given as an empty tensor: reduce all
    single(name, "ReduceSum", 13, [("X", make_x(name, "ReduceSum")), ("axes", Init(np.zeros(0, I64)))],
           {"keepdims": 0})
    # opset 18: axes as input for every reduction
    for op in attr_ops:
        for an, axes, keep in [("ax12", [1, 2], 1), ("axm1", [-1], 0), ("all", None, 1)]:
            if op != "ReduceMean" and an != "ax12":
                continue
            name = f"{op.lower()}_o18_{an}_k{keep}"
            ins = [("X", make_x(name, op)), ("axes", None if axes is None else Init(np.array(axes, I64)))]
            single(name, op, 18, ins, {"keepdims": keep})


def instnorm_cases():
    for name, attrs in [("instancenorm", {}), ("instancenorm_eps1e_3", {"epsilon": 1e-3})]:
        g = Rng(name)
        x = g.normal(2, 3, 5, 6, scale=2.0) + F32(0.5)
        single(name, "InstanceNormalization", 6,
               [("X", x), ("scale", Init(g.uniform(0.5, 1.5, 3))), ("B", Init(g.normal(3, scale=0.2)))], attrs)


def pad_cases():
    g = Rng("pad")
    x = g.normal(2, 3, 4, 5)
    p_hw = np.array([0, 0, 1, 2, 0, 0, 2, 1], I64)
    single("pad_o13_constant_value", "Pad", 13,
           [("X", x), ("pads", Init(p_hw)), ("value", Init(np.array(0.5, F32)))], {"mode": "constant"})
    single("pad_o11_constant_default", "Pad", 11, [("X", x), ("pads", Init(p_hw))])
    single("pad_o13_reflect", "Pad", 13, [("X", x), ("pads", Init(np.array([0, 0, 2, 1, 0, 0, 1, 3], I64)))],
           {"mode": "reflect"})
    single("pad_o13_edge", "Pad", 13, [("X", x), ("pads", Init(p_hw))], {"mode": "edge"})
    single("pad_o13_constant_batch_axis", "Pad", 13,
           [("X", x), ("pads", Init(np.array([1, 0, 1, 0, 0, 1, 0, 2], I64))),
            ("value", Init(np.array(-1.25, F32)))], {"mode": "constant"})
    single("pad_o13_negative_crop", "Pad", 13, [("X", x), ("pads", Init(np.array([0, 0, -1, 1, 0, 0, 1, -2], I64)))])
    single("pad_o18_axes", "Pad", 18,
           [("X", x), ("pads", Init(np.array([1, 2, 2, 1], I64))), ("value", Init(np.array(0.25, F32))),
            ("axes", Init(np.array([2, -1], I64)))])
    pads2 = [0, 0, 1, 1, 0, 0, 2, 0]
    single("pad_o2_attr_constant", "Pad", 2, [("X", x)], {"mode": "constant", "pads": pads2, "value": 1.5},
           ref=lambda x: [np_pad(x, pads2, "constant", 1.5)])
    single("pad_o2_attr_reflect", "Pad", 2, [("X", x)], {"mode": "reflect", "pads": pads2},
           ref=lambda x: [np_pad(x, pads2, "reflect")])
    single("pad_o2_attr_edge", "Pad", 2, [("X", x)], {"mode": "edge", "pads": pads2},
           ref=lambda x: [np_pad(x, pads2, "edge")])


def lrn_cases():
    for size in (3, 5):
        for tag, attrs in [("default", {}), ("a1e_3_b0_7_bias2", {"alpha": 1e-3, "beta": 0.7, "bias": 2.0})]:
            name = f"lrn_size{size}_{tag}"
            g = Rng(name)
            single(name, "LRN", 13, [("X", g.normal(2, 8, 5, 6, scale=5.0))], dict(size=size, **attrs))


def conv_pool_cases():
    g = Rng("conv1d")
    x1 = g.normal(2, 4, 16)
    w = g.normal(6, 4, 3, scale=1 / np.sqrt(12))
    b = g.normal(6, scale=0.1)
    single("conv1d_pads", "Conv", 11, [("X", x1), ("W", Init(w))], {"kernel_shape": [3], "pads": [1, 1]})
    single("conv1d_stride2_bias", "Conv", 11, [("X", x1), ("W", Init(w)), ("B", Init(b))],
           {"kernel_shape": [3], "strides": [2], "pads": [1, 0]})
    single("conv1d_dilation2", "Conv", 11, [("X", x1), ("W", Init(w)), ("B", Init(b))],
           {"dilations": [2], "pads": [2, 2]})
    wg = g.normal(6, 2, 3, scale=1 / np.sqrt(6))
    single("conv1d_group2_bias", "Conv", 11, [("X", x1), ("W", Init(wg)), ("B", Init(b))],
           {"group": 2, "pads": [1, 1], "strides": [2]})
    single("conv1d_autopad_same", "Conv", 11, [("X", x1), ("W", Init(w))], {"auto_pad": "SAME_UPPER", "strides": [3]})
    g = Rng("conv3d")
    x3 = g.normal(1, 2, 6, 7, 8)
    w3 = g.normal(4, 2, 3, 3, 3, scale=1 / np.sqrt(54))
    b3 = g.normal(4, scale=0.1)
    single("conv3d_pads_strides", "Conv", 11, [("X", x3), ("W", Init(w3)), ("B", Init(b3))],
           {"kernel_shape": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1], "strides": [2, 2, 2]})
    single("conv3d_asym", "Conv", 11, [("X", x3), ("W", Init(w3))],
           {"pads": [0, 1, 1, 1, 0, 1], "strides": [1, 2, 1]})

    g = Rng("pool1d")
    p1 = g.normal(2, 3, 17)
    single("maxpool1d", "MaxPool", 12, [("X", p1)], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]})
    single("maxpool1d_ceil", "MaxPool", 12, [("X", p1)], {"kernel_shape": [4], "strides": [3], "ceil_mode": 1})
    single("maxpool1d_dilation", "MaxPool", 12, [("X", p1)], {"kernel_shape": [3], "dilations": [2]})
    single("averagepool1d_cip0", "AveragePool", 11, [("X", p1)],
           {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "count_include_pad": 0})
    single("averagepool1d_cip1", "AveragePool", 11, [("X", p1)],
           {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "count_include_pad": 1})
    single("averagepool1d_ceil", "AveragePool", 11, [("X", p1)],
           {"kernel_shape": [4], "strides": [3], "ceil_mode": 1})
    single("averagepool1d_ceil_pads_cip1", "AveragePool", 11, [("X", p1)],
           {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1, "count_include_pad": 1})
    g = Rng("pool3d")
    p3 = g.normal(1, 2, 7, 8, 9)
    single("maxpool3d", "MaxPool", 12, [("X", p3)], {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]})
    single("maxpool3d_pads", "MaxPool", 12, [("X", p3)],
           {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1]})
    single("averagepool3d_cip0", "AveragePool", 11, [("X", p3)],
           {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1]})
    single("averagepool3d_cip1", "AveragePool", 11, [("X", p3)],
           {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1], "count_include_pad": 1})
    g = Rng("gap")
    single("globalaveragepool_3d", "GlobalAveragePool", 1, [("X", g.normal(2, 3, 10))])
    single("globalaveragepool_5d", "GlobalAveragePool", 1, [("X", g.normal(1, 2, 3, 4, 5))])
    single("globalmaxpool_4d", "GlobalMaxPool", 1, [("X", g.normal(2, 3, 4, 5))])


def convtranspose_cases():
    g = Rng("convtranspose")
    x = g.normal(1, 4, 5, 5)
    w = g.normal(4, 3, 3, 3, scale=1 / np.sqrt(12))
    b = g.normal(3, scale=0.1)
    w4 = g.normal(4, 3, 4, 4, scale=1 / np.sqrt(16))

    def ct(name, ins, attrs):
        single(name, "ConvTranspose", 11, [("X", x)] + ins, attrs)

    ct("convtranspose_s2_p1_bias", [("W", Init(w)), ("B", Init(b))], {"strides": [2, 2], "pads": [1, 1, 1, 1]})
    ct("convtranspose_s2_outpad1", [("W", Init(w))],
       {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]})
    ct("convtranspose_group2", [("W", Init(g.normal(4, 3, 3, 3, scale=0.4))), ("B", Init(g.normal(6, scale=0.1)))],
       {"group": 2, "strides": [1, 1], "pads": [1, 1, 1, 1]})
    ct("convtranspose_k4_s2_p1", [("W", Init(w4)), ("B", Init(b))], {"strides": [2, 2], "pads": [1, 1, 1, 1]})
    ct("convtranspose_same_upper_s2", [("W", Init(w))], {"strides": [2, 2], "auto_pad": "SAME_UPPER"})
    ct("convtranspose_output_shape", [("W", Init(w)), ("B", Init(b))],
       {"strides": [2, 2], "output_shape": [9, 11]})
    ct("convtranspose_no_attrs", [("W", Init(w))], {})
    ct("convtranspose_dilation2", [("W", Init(w))], {"dilations": [2, 2], "strides": [2, 1]})
    g = Rng("convtranspose1d")
    x1 = g.normal(1, 4, 7)
    single("convtranspose1d_s2", "ConvTranspose", 11,
           [("X", x1), ("W", Init(g.normal(4, 2, 3, scale=0.5))), ("B", Init(g.normal(2, scale=0.1)))],
           {"strides": [2]})
    single("convtranspose1d_s2_p1", "ConvTranspose", 11,
           [("X", x1), ("W", Init(g.normal(4, 2, 4, scale=0.5)))], {"strides": [2], "pads": [1, 1]})


def resize_cases():
    g = Rng("resize")
    x = g.normal(1, 2, 4, 5)
    xl = g.normal(1, 2, 8, 10)
    empty_f = np.zeros(0, F32)

    def rs(name, opset, xin, scales=None, sizes=None, **attrs):
        if opset == 11:  # roi and scales are required inputs; unused ones are empty tensors
            ins = [("X", xin), ("roi", Init(empty_f)),
                   ("scales", Init(np.array(scales if scales is not None else [], F32)))]
            if sizes is not None:
                ins.append(("sizes", Init(np.array(sizes, I64))))
        else:
            ins = [("X", xin), ("roi", None),
                   ("scales", None if scales is None else Init(np.array(scales, F32))),
                   ("sizes", None if sizes is None else Init(np.array(sizes, I64)))]
        single(name, "Resize", opset, ins, attrs)

    rs("resize_o13_nearest_asym_floor_x2", 13, x, scales=[1, 1, 2, 2], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rs("resize_o11_nearest_asym_floor_x2", 11, x, scales=[1, 1, 2, 2], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rs("resize_o13_nearest_halfpixel_rpf_x1_5", 13, x, scales=[1, 1, 1.5, 1.5], mode="nearest",
       coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor")
    rs("resize_o13_nearest_halfpixel_rpc_x1_5", 13, x, scales=[1, 1, 1.5, 1.5], mode="nearest",
       coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")
    rs("resize_o13_nearest_default_down0_5", 13, xl, scales=[1, 1, 0.5, 0.5])
    rs("resize_o11_nearest_sizes", 11, x, sizes=[1, 2, 7, 9], mode="nearest")
    rs("resize_o13_nearest_sizes", 13, x, sizes=[1, 2, 3, 8], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rs("resize_o13_nearest_align_corners", 13, x, sizes=[1, 2, 7, 9], mode="nearest",
       coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil")
    rs("resize_o13_linear_halfpixel_x2", 13, x, scales=[1, 1, 2, 2], mode="linear")
    rs("resize_o13_linear_halfpixel_x1_5", 13, x, scales=[1, 1, 1.5, 1.5], mode="linear",
       coordinate_transformation_mode="half_pixel")
    rs("resize_o11_linear_align_corners_x1_5", 11, x, scales=[1, 1, 1.5, 1.5], mode="linear",
       coordinate_transformation_mode="align_corners")
    rs("resize_o13_linear_align_corners_sizes", 13, x, sizes=[1, 2, 7, 8], mode="linear",
       coordinate_transformation_mode="align_corners")
    rs("resize_o13_linear_asym_down0_5", 13, xl, scales=[1, 1, 0.5, 0.5], mode="linear",
       coordinate_transformation_mode="asymmetric")
    rs("resize_o11_linear_asym_x2", 11, x, scales=[1, 1, 2, 2], mode="linear",
       coordinate_transformation_mode="asymmetric")
    rs("resize_o13_linear_pytorch_halfpixel_sizes", 13, x, sizes=[1, 2, 7, 8], mode="linear",
       coordinate_transformation_mode="pytorch_half_pixel")
    rs("resize_o13_linear_pytorch_halfpixel_down0_5", 13, xl, scales=[1, 1, 0.5, 0.5], mode="linear",
       coordinate_transformation_mode="pytorch_half_pixel")
    rs("resize_o11_linear_halfpixel_down0_5", 11, xl, scales=[1, 1, 0.5, 0.5], mode="linear",
       coordinate_transformation_mode="half_pixel")
    rs("resize_o18_linear_axes", 18, x, scales=[2, 1.5], mode="linear", axes=[2, 3])
    rs("resize_o18_nearest_asym_floor_x2", 18, x, scales=[1, 1, 2, 2], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    rs("resize_o18_nearest_sizes_axes", 18, x, sizes=[9, 7], mode="nearest", axes=[3, 2])
    rs("resize_o18_linear_halfpixel_x1_5", 18, x, scales=[1, 1, 1.5, 1.5], mode="linear")
    # bicubic: Keys' a = -0.75 (ONNX's and PyTorch's) and -0.5 with exclude_outside
    # (TensorFlow's), up and down, by scales and sizes
    rs("resize_o13_cubic_halfpixel_x2", 13, x, scales=[1, 1, 2, 2], mode="cubic")
    rs("resize_o13_cubic_pytorch_sizes", 13, x, sizes=[1, 2, 7, 9], mode="cubic",
       coordinate_transformation_mode="pytorch_half_pixel")
    rs("resize_o13_cubic_a05_exclude_down", 13, xl, scales=[1, 1, 0.5, 0.75], mode="cubic",
       cubic_coeff_a=-0.5, exclude_outside=1)
    rs("resize_o13_cubic_align_corners_sizes", 13, x, sizes=[1, 2, 8, 3], mode="cubic",
       coordinate_transformation_mode="align_corners")
    rs("resize_o11_cubic_asym_x1_5", 11, x, scales=[1, 1, 1.5, 1.5], mode="cubic",
       coordinate_transformation_mode="asymmetric")
    # opset 19's centred half-pixel, and opset 18's aspect-ratio policies
    rs("resize_o19_linear_halfpixel_symmetric", 19, x, scales=[1, 1, 1.7, 0.7], mode="linear",
       coordinate_transformation_mode="half_pixel_symmetric")
    rs("resize_o18_nearest_not_larger", 18, x, sizes=[1, 2, 7, 7], mode="nearest",
       keep_aspect_ratio_policy="not_larger")
    rs("resize_o18_linear_not_smaller_axes", 18, x, sizes=[7, 7], mode="linear", axes=[2, 3],
       keep_aspect_ratio_policy="not_smaller")
    # Upsample: opset 9 scales input, opset 7 scales attribute
    single("upsample_o9_nearest", "Upsample", 9, [("X", x), ("scales", Init(np.array([1, 1, 2, 2], F32)))],
           {"mode": "nearest"})
    single("upsample_o9_nearest_2x3", "Upsample", 9, [("X", x), ("scales", Init(np.array([1, 1, 2, 3], F32)))])
    single("upsample_o9_linear", "Upsample", 9, [("X", x), ("scales", Init(np.array([1, 1, 2, 2], F32)))],
           {"mode": "linear"})
    single("upsample_o7_nearest", "Upsample", 7, [("X", x)], {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 3.0]})


def constant_cases():
    g = Rng("constantofshape")
    cos_value = numpy_helper.from_array(np.array([0.5], F32), "value")
    x = g.normal(2, 3, 4)
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos", value=cos_value),
             helper.make_node("Add", ["X", "c"], ["Y"], name="add")]
    add_case("constantofshape_init_add", "ConstantOfShape", 13, nodes, [("X", x)],
             [("shape", np.array([2, 3, 4], I64))], [("Y", FLOAT)])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos", value=cos_value),
             helper.make_node("Add", ["X", "c"], ["Y"], name="add")]
    add_case("constantofshape_init_broadcast", "ConstantOfShape", 9, nodes, [("X", x)],
             [("shape", np.array([3, 1], I64))], [("Y", FLOAT)])
    nodes = [helper.make_node("Shape", ["X"], ["s"], name="shape"),
             helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos",
                              value=numpy_helper.from_array(np.array([-1.5], F32), "value")),
             helper.make_node("Mul", ["X", "c"], ["Y"], name="mul")]
    add_case("constantofshape_of_shape", "ConstantOfShape", 13, nodes, [("X", x)], [], [("Y", FLOAT)])
    nodes = [helper.make_node("Shape", ["X"], ["s"], name="shape"),
             helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),  # default: float 0
             helper.make_node("Add", ["c", "X"], ["Y"], name="add")]
    add_case("constantofshape_default_zeros", "ConstantOfShape", 9, nodes, [("X", x)], [], [("Y", FLOAT)])
    # the flatten pattern used in the architectures below: Reshape(x, Concat(N, ConstantOfShape([1])=-1))
    x4 = g.normal(2, 3, 4, 5)
    add_case("constantofshape_reshape_flatten", "ConstantOfShape", 9, flatten_nodes("X", "Y", "f"),
             [("X", x4)], flatten_inits("f"), [("Y", FLOAT)])

    g = Rng("range")
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
             helper.make_node("Add", ["X", "r"], ["Y"], name="add")]
    add_case("range_float_add", "Range", 11, nodes, [("X", g.normal(2, 6))],
             [("start", np.array(0.5, F32)), ("limit", np.array(3.5, F32)), ("delta", np.array(0.5, F32))],
             [("Y", FLOAT)])
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
             helper.make_node("Add", ["X", "r"], ["Y"], name="add")]
    add_case("range_float_negative_delta", "Range", 11, nodes, [("X", g.normal(4, 3))],
             [("start", np.array(5.0, F32)), ("limit", np.array(1.0, F32)), ("delta", np.array(-1.5, F32))],
             [("Y", FLOAT)])


def squeeze_cases():
    g = Rng("squeeze")
    xs = g.normal(2, 1, 3, 1, 4)
    single("squeeze_o11_axes", "Squeeze", 11, [("X", xs)], {"axes": [1, 3]})
    single("squeeze_o11_neg_axes", "Squeeze", 11, [("X", xs)], {"axes": [-2]})
    single("squeeze_o11_no_axes", "Squeeze", 11, [("X", xs)])
    single("squeeze_o1_axes", "Squeeze", 1, [("X", xs)], {"axes": [1]})
    single("squeeze_o13_axes_input", "Squeeze", 13, [("X", xs), ("axes", Init(np.array([1, -2], I64)))])
    single("squeeze_o13_no_axes", "Squeeze", 13, [("X", xs)])
    xu = g.normal(2, 3, 4)
    single("unsqueeze_o11_axes", "Unsqueeze", 11, [("X", xu)], {"axes": [0, 4]})
    single("unsqueeze_o11_neg_axes", "Unsqueeze", 11, [("X", xu)], {"axes": [-1]})
    single("unsqueeze_o1_axes", "Unsqueeze", 1, [("X", xu)], {"axes": [1]})
    single("unsqueeze_o13_axes_input", "Unsqueeze", 13, [("X", xu), ("axes", Init(np.array([1, -1], I64)))])
    single("unsqueeze_o13_unsorted_axes", "Unsqueeze", 13, [("X", xu), ("axes", Init(np.array([3, 0], I64)))])


def matmul_cases():
    for name, sa, sb in [("matmul_4d_x_2d", (2, 3, 4, 5), (5, 6)),
                         ("matmul_3d_x_4d_bcast", (3, 4, 5), (2, 1, 5, 6)),
                         ("matmul_2d_x_3d", (4, 5), (2, 5, 6)),
                         ("matmul_1d_x_2d", (5,), (5, 6)),
                         ("matmul_2d_x_1d", (3, 5), (5,)),
                         ("matmul_1d_x_3d", (5,), (2, 5, 6)),
                         ("matmul_4d_x_4d", (2, 3, 4, 5), (2, 3, 5, 6))]:
        g = Rng(name)
        single(name, "MatMul", 13, [("A", g.normal(*sa)), ("B", g.normal(*sb))])


def np_group_norm(x, scale, bias, groups, eps, per_group):
    n, c = x.shape[:2]
    xr = x.reshape(n, groups, -1)
    y = ((xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + eps)).reshape(x.shape)
    if per_group:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    shape = (c,) + (1,) * (x.ndim - 2)
    return [(y * scale.reshape(shape) + bias.reshape(shape)).astype(F32)]


def transformer_op_cases():
    """The operators of transformer exports: LayerNormalization, GroupNormalization, Mod,
    Einsum (the batched-matmul forms attention uses, implicit output, a summed letter)."""
    g = Rng("layernorm")
    single("layernorm_last_axis", "LayerNormalization", 17,
           [("X", g.normal(2, 5, 8, scale=2.0) + F32(0.3)), ("Scale", Init(g.uniform(0.5, 1.5, 8))),
            ("B", Init(g.normal(8, scale=0.2)))])
    g = Rng("layernorm_axis")
    single("layernorm_axis_m2_no_bias", "LayerNormalization", 17,
           [("X", g.normal(2, 3, 4, 5)), ("Scale", Init(g.uniform(0.5, 1.5, 4, 5)))], {"axis": -2, "epsilon": 1e-3})
    # (opset 18's per-group form is converted too, but onnx's checker refuses it as deprecated)
    for name, opset, groups, per in [("groupnorm_opset21", 21, 2, 6), ("groupnorm_opset21_g3", 21, 3, 6)]:
        g = Rng(name)
        x = g.normal(2, 6, 4, 4, scale=1.5)
        scale, bias = g.uniform(0.5, 1.5, per), g.normal(per, scale=0.2)
        single(name, "GroupNormalization", opset, [("X", x), ("scale", Init(scale)), ("bias", Init(bias))],
               {"num_groups": groups, "epsilon": 1e-5},
               ref=lambda x, s=scale, b=bias, gr=groups, pg=(opset < 21): np_group_norm(x, s, b, gr, 1e-5, pg))
    g = Rng("mod")
    single("mod_int_floor", "Mod", 13, [("A", g.ints(-20, 20, 3, 4)), ("B", Init(np.array([3, -4, 5, 7], dtype=I64)))],
           out_type=TensorProto.INT64)
    single("mod_float_fmod", "Mod", 13, [("A", g.normal(3, 4, scale=5.0)), ("B", Init(g.uniform(1.0, 2.0, 4)))],
           {"fmod": 1})
    for name, eq, sa, sb in [("einsum_bhid_bhjd", "bhid,bhjd->bhij", (1, 2, 5, 4), (1, 2, 6, 4)),
                             ("einsum_bhij_bhjd", "bhij,bhjd->bhid", (1, 2, 5, 6), (1, 2, 6, 4)),
                             ("einsum_bij_bjk", "bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
                             ("einsum_implicit_ij_jk", "ij,jk", (3, 4), (4, 5)),
                             ("einsum_summed_letter", "bij,jk->bk", (2, 3, 4), (4, 5))]:
        g = Rng(name)
        single(name, "Einsum", 12, [("A", g.normal(*sa)), ("B", g.normal(*sb))], {"equation": eq})
    single("einsum_one_operand", "Einsum", 12, [("A", Rng("einsum1").normal(2, 3, 4))], {"equation": "abc->ca"})


def old_opset_cases():
    g = Rng("old")
    x = g.normal(2, 3, 4, 5)
    s, b, m = g.uniform(0.5, 1.5, 3), g.normal(3, scale=0.2), g.normal(3, scale=0.2)
    v = g.uniform(0.5, 1.5, 3)
    bn_ins = [("X", x), ("scale", Init(s)), ("B", Init(b)), ("mean", Init(m)), ("var", Init(v))]
    single("batchnorm_o6_spatial_is_test", "BatchNormalization", 6, bn_ins,
           {"spatial": 1, "is_test": 1, "epsilon": 1e-5}, ref=lambda x: [np_bn(x, s, b, m, v, 1e-5)])
    single("batchnorm_o7_spatial", "BatchNormalization", 7, bn_ins, {"spatial": 1, "epsilon": 1e-3},
           ref=lambda x: [np_bn(x, s, b, m, v, 1e-3)])
    single("batchnorm_o9", "BatchNormalization", 9, bn_ins, {}, ref=lambda x: [np_bn(x, s, b, m, v, 1e-5)])
    single("batchnorm_o15", "BatchNormalization", 15, bn_ins, {"epsilon": 1e-4},
           ref=lambda x: [np_bn(x, s, b, m, v, 1e-4)])
    single("dropout_o6_is_test", "Dropout", 6, [("X", x)], {"is_test": 1, "ratio": 0.3}, ref=lambda x: [x.copy()])
    single("dropout_o7", "Dropout", 7, [("X", x)], {"ratio": 0.5}, ref=lambda x: [x.copy()])
    single("dropout_o13", "Dropout", 13, [("X", x)], ref=lambda x: [x.copy()])
    bias = g.normal(3)
    single("add_o6_broadcast_axis1", "Add", 6, [("A", x), ("B", Init(bias))], {"broadcast": 1, "axis": 1},
           ref=lambda a: [(a + bias.reshape(1, 3, 1, 1)).astype(F32)])
    tail = g.normal(4, 5)
    single("mul_o6_broadcast_suffix", "Mul", 6, [("A", x), ("B", Init(tail))], {"broadcast": 1},
           ref=lambda a: [(a * tail).astype(F32)])
    single("reshape_o1_attr", "Reshape", 1, [("X", x)], {"shape": [6, 20]}, ref=lambda x: [x.reshape(6, 20)])
    single("reshape_o1_attr_0_m1", "Reshape", 1, [("X", x)], {"shape": [0, -1, 5]},
           ref=lambda x: [x.reshape(2, -1, 5)])
    single("reshape_o5_input", "Reshape", 5, [("X", x), ("shape", Init(np.array([2, -1], I64)))],
           ref=lambda x: [x.reshape(2, -1)])
    single("reshape_o13_zero_copy", "Reshape", 13, [("X", x), ("shape", Init(np.array([0, 0, -1], I64)))],
           ref=lambda x: [x.reshape(2, 3, -1)])
    single("clip_o6_attrs", "Clip", 6, [("X", x)], {"min": -0.5, "max": 0.7},
           ref=lambda x: [np.clip(x, -0.5, 0.7).astype(F32)])
    single("clip_o6_default", "Clip", 6, [("X", x)], ref=lambda x: [x.copy()])
    single("clip_o11_inputs", "Clip", 11, [("X", x), ("min", Init(np.array(-0.3, F32))),
                                           ("max", Init(np.array(0.4, F32)))],
           ref=lambda x: [np.clip(x, -0.3, 0.4).astype(F32)])
    single("clip_o13_max_only", "Clip", 13, [("X", x), ("min", None), ("max", Init(np.array(0.4, F32)))],
           ref=lambda x: [np.minimum(x, 0.4).astype(F32)])
    y = g.normal(2, 2, 4, 5)
    single("concat_o1_default_axis", "Concat", 1, [("A", x), ("B", y)],
           ref=lambda a, b: [np.concatenate([a, b], axis=1)])
    single("concat_o4_axis1", "Concat", 4, [("A", x), ("B", y)], {"axis": 1},
           ref=lambda a, b: [np.concatenate([a, b], axis=1)])
    single("concat_o13_neg_axis", "Concat", 13, [("A", x), ("B", g.normal(2, 3, 4, 2))], {"axis": -1},
           ref=lambda a, b_: [np.concatenate([a, b_], axis=-1)])
    a2 = g.normal(3, 5)
    wb = g.normal(4, 5)
    cb = g.normal(4)
    single("gemm_o7_transb_alpha_beta", "Gemm", 7, [("A", a2), ("B", Init(wb)), ("C", Init(cb))],
           {"transB": 1, "alpha": 0.5, "beta": 2.0}, ref=lambda a: [(0.5 * a @ wb.T + 2.0 * cb).astype(F32)])
    wa = g.normal(5, 4)
    cs = g.normal(1, 4)
    single("gemm_o7_transa", "Gemm", 7, [("A", g.normal(5, 3)), ("B", Init(wa)), ("C", Init(cs))], {"transA": 1},
           ref=lambda a: [(a.T @ wa + cs).astype(F32)])
    single("gemm_o13_no_c", "Gemm", 13, [("A", a2), ("B", Init(wb))], {"transB": 1},
           ref=lambda a: [(a @ wb.T).astype(F32)])
    single("gemm_o6_broadcast", "Gemm", 6, [("A", a2), ("B", Init(wb)), ("C", Init(cb))],
           {"transB": 1, "broadcast": 1}, ref=lambda a: [(a @ wb.T + cb).astype(F32)])
    x3 = g.normal(2, 3, 4, scale=2.0)
    single("softmax_o1_default_axis", "Softmax", 1, [("X", x3)], ref=lambda x: [np_softmax_2d(x, 1)])
    single("softmax_o1_axis2", "Softmax", 1, [("X", x3)], {"axis": 2}, ref=lambda x: [np_softmax_2d(x, 2)])
    single("flatten_o1_default", "Flatten", 1, [("X", x)], ref=lambda x: [x.reshape(2, -1)])
    single("flatten_o13_axis2", "Flatten", 13, [("X", x)], {"axis": 2}, ref=lambda x: [x.reshape(6, -1)])
    single("transpose_o1_perm", "Transpose", 1, [("X", x)], {"perm": [0, 2, 3, 1]},
           ref=lambda x: [x.transpose(0, 2, 3, 1)])
    single("transpose_o13_default", "Transpose", 13, [("X", x)], ref=lambda x: [x.transpose()])


# ---------------------------------------------------------------------------------------
# 2. architectures (opset 9, model zoo node patterns)
# ---------------------------------------------------------------------------------------
def flatten_inits(p):
    return [(f"{p}_gather_idx", np.array(0, I64)), (f"{p}_cos_shape", np.array([1], I64))]


def flatten_nodes(x, y, p):
    """x.view(x.size(0), -1) as opset-9 nodes, the -1 made by ConstantOfShape:
    Shape -> Gather(0) -> Unsqueeze ; ConstantOfShape([1], value=int64 -1) ; Concat -> Reshape."""
    minus1 = numpy_helper.from_array(np.array([-1], I64), "value")
    return [
        helper.make_node("Shape", [x], [f"{p}_shape"], name=f"{p}_Shape"),
        helper.make_node("Gather", [f"{p}_shape", f"{p}_gather_idx"], [f"{p}_n"], name=f"{p}_Gather", axis=0),
        helper.make_node("Unsqueeze", [f"{p}_n"], [f"{p}_n1"], name=f"{p}_Unsqueeze", axes=[0]),
        helper.make_node("ConstantOfShape", [f"{p}_cos_shape"], [f"{p}_minus1"], name=f"{p}_ConstantOfShape",
                         value=minus1),
        helper.make_node("Concat", [f"{p}_n1", f"{p}_minus1"], [f"{p}_newshape"], name=f"{p}_Concat", axis=0),
        helper.make_node("Reshape", [x, f"{p}_newshape"], [y], name=f"{p}_Reshape"),
    ]


class Net:
    """Builds an opset-9 network with Caffe2-exporter-like names (`conv1_w`, `conv1_1`, ...)."""

    def __init__(self, name, seed_name=None):
        self.name = name
        self.rng = np.random.default_rng(hash_name("arch/" + (seed_name or name)))
        self.nodes, self.inits, self.used = [], [], set()
        self.count = 0

    def out(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def init(self, name, arr):
        assert name not in self.used, name
        self.used.add(name)
        self.inits.append((name, np.asarray(arr)))
        return name

    def node(self, op, inputs, base, n_out=1, **attrs):
        outs = [self.out(base)] + [self.out(f"_{base}_mask") for _ in range(n_out - 1)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=base, **attrs))
        return outs[0]

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape, dtype=F32) * F32(std)).astype(F32)

    def conv(self, x, name, cin, cout, k, stride=1, pad=0, group=1, bias=True, gain=np.sqrt(2.0)):
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        fan_in = cin // group * kh * kw
        ins = [x, self.init(f"{name}_w", self.normal((cout, cin // group, kh, kw), gain / np.sqrt(fan_in)))]
        if bias:
            ins.append(self.init(f"{name}_b", self.normal((cout,), 0.05)))
        attrs = dict(kernel_shape=[kh, kw], pads=[ph, pw, ph, pw], strides=[stride, stride])
        if group != 1:
            attrs["group"] = group
        return self.node("Conv", ins, name, **attrs)

    def bn(self, x, name, c, gamma=(0.8, 1.2)):
        ins = [x,
               self.init(f"{name}_s", self.rng.uniform(*gamma, size=c).astype(F32)),
               self.init(f"{name}_b", self.normal((c,), 0.05)),
               self.init(f"{name}_rm", self.normal((c,), 0.05)),
               self.init(f"{name}_riv", self.rng.uniform(0.5, 1.5, size=c).astype(F32))]
        return self.node("BatchNormalization", ins, name, epsilon=1e-5, momentum=0.9)

    def relu(self, x, name):
        return self.node("Relu", [x], name)

    def maxpool(self, x, name, k, s, pads=(0, 0, 0, 0)):
        return self.node("MaxPool", [x], name, kernel_shape=[k, k], strides=[s, s], pads=list(pads))

    def avgpool(self, x, name, k, s, pads=(0, 0, 0, 0)):
        return self.node("AveragePool", [x], name, kernel_shape=[k, k], strides=[s, s], pads=list(pads))

    def lrn(self, x, name, size=5):
        return self.node("LRN", [x], name, size=size, alpha=1e-4, beta=0.75, bias=1.0)

    def dropout(self, x, name, ratio=0.5, mask=False):
        return self.node("Dropout", [x], name, n_out=2 if mask else 1, ratio=ratio)

    def fc(self, x, name, cin, cout, gain=np.sqrt(2.0)):
        w = self.init(f"{name}_w", self.normal((cout, cin), gain / np.sqrt(cin)))
        b = self.init(f"{name}_b", self.normal((cout,), 0.01))
        return self.node("Gemm", [x, w, b], name, transB=1)

    def flatten(self, x, name):
        y = self.out(name)
        self.nodes += flatten_nodes(x, y, name)
        self.inits += flatten_inits(name)
        return y

    def concat(self, xs, name):
        return self.node("Concat", xs, name, axis=1)

    def softmax(self, x, name="softmax"):
        return self.node("Softmax", [x], name)

    def finish(self, in_name, in_shape, y, seed_name, opset=9):
        last = self.nodes[-1]
        assert last.output[0] == y
        last.output[0] = f"{last.name}out_1"
        x = np.random.default_rng(hash_name("input/" + seed_name)).standard_normal(in_shape, dtype=F32)
        add_case(self.name, self.name, opset, self.nodes, [(in_name, x)], self.inits, [(last.output[0], FLOAT)],
                 group="arch")


def alexnet():
    n = Net("alexnet")
    x = n.conv("data_0", "conv1", 3, 16, 11, stride=4)
    x = n.lrn(n.relu(x, "relu1"), "norm1")
    x = n.maxpool(x, "pool1", 3, 2)
    x = n.relu(n.conv(x, "conv2", 16, 32, 5, pad=2, group=2), "relu2")
    x = n.maxpool(n.lrn(x, "norm2"), "pool2", 3, 2)
    x = n.relu(n.conv(x, "conv3", 32, 48, 3, pad=1), "relu3")
    x = n.relu(n.conv(x, "conv4", 48, 48, 3, pad=1, group=2), "relu4")
    x = n.relu(n.conv(x, "conv5", 48, 32, 3, pad=1, group=2), "relu5")
    x = n.maxpool(x, "pool5", 3, 2)  # 67 -> 15 -> 7 -> 3 -> 1
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.dropout(n.relu(n.fc(x, "fc6", 32, 64), "relu6"), "drop6", mask=True)
    x = n.dropout(n.relu(n.fc(x, "fc7", 64, 64), "relu7"), "drop7", mask=True)
    x = n.softmax(n.fc(x, "fc8", 64, 10, gain=1.4), "prob")
    n.finish("data_0", (1, 3, 67, 67), x, "alexnet")


def zfnet512():
    n = Net("zfnet512")
    # Caffe's ceil-mode pooling exported as explicit asymmetric pads [0, 0, 1, 1]
    x = n.relu(n.conv("gpu_0/data_0", "conv1", 3, 16, 7, stride=2, pad=1), "conv1_relu")
    x = n.maxpool(n.lrn(x, "norm1", size=3), "pool1", 3, 2, pads=(0, 0, 1, 1))
    x = n.relu(n.conv(x, "conv2", 16, 32, 5, stride=2), "conv2_relu")
    x = n.maxpool(n.lrn(x, "norm2", size=3), "pool2", 3, 2, pads=(0, 0, 1, 1))
    x = n.relu(n.conv(x, "conv3", 32, 48, 3, pad=1), "conv3_relu")
    x = n.relu(n.conv(x, "conv4", 48, 48, 3, pad=1), "conv4_relu")
    x = n.relu(n.conv(x, "conv5", 48, 32, 3, pad=1), "conv5_relu")
    x = n.maxpool(x, "pool5", 3, 2, pads=(0, 0, 1, 1))  # 64 -> 30 -> 15 -> 6 -> 3 -> 1
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.dropout(n.relu(n.fc(x, "fc6", 32, 64), "fc6_relu"), "fc6_dropout", mask=True)
    x = n.dropout(n.relu(n.fc(x, "fc7", 64, 64), "fc7_relu"), "fc7_dropout", mask=True)
    x = n.softmax(n.fc(x, "fc8", 64, 10, gain=1.0), "gpu_0/softmax")
    n.finish("gpu_0/data_0", (1, 3, 64, 64), x, "zfnet512")


def inception_v1():
    n = Net("inception_v1")

    def module(x, p, cin, c1, c3r, c3, c5r, c5, pp):
        b1 = n.relu(n.conv(x, f"{p}/1x1", cin, c1, 1), f"{p}/relu_1x1")
        b2 = n.relu(n.conv(x, f"{p}/3x3_reduce", cin, c3r, 1), f"{p}/relu_3x3_reduce")
        b2 = n.relu(n.conv(b2, f"{p}/3x3", c3r, c3, 3, pad=1), f"{p}/relu_3x3")
        b3 = n.relu(n.conv(x, f"{p}/5x5_reduce", cin, c5r, 1), f"{p}/relu_5x5_reduce")
        b3 = n.relu(n.conv(b3, f"{p}/5x5", c5r, c5, 5, pad=2), f"{p}/relu_5x5")
        b4 = n.maxpool(x, f"{p}/pool", 3, 1, pads=(1, 1, 1, 1))
        b4 = n.relu(n.conv(b4, f"{p}/pool_proj", cin, pp, 1), f"{p}/relu_pool_proj")
        return n.concat([b1, b2, b3, b4], f"{p}/output"), c1 + c3 + c5 + pp

    x = n.relu(n.conv("data_0", "conv1/7x7_s2", 3, 16, 7, stride=2, pad=3), "conv1/relu_7x7")
    x = n.lrn(n.maxpool(x, "pool1/3x3_s2", 3, 2, pads=(0, 0, 1, 1)), "pool1/norm1")
    x = n.relu(n.conv(x, "conv2/3x3_reduce", 16, 16, 1), "conv2/relu_3x3_reduce")
    x = n.relu(n.conv(x, "conv2/3x3", 16, 32, 3, pad=1), "conv2/relu_3x3")
    x = n.maxpool(n.lrn(x, "conv2/norm2"), "pool2/3x3_s2", 3, 2, pads=(0, 0, 1, 1))
    x, c = module(x, "inception_3a", 32, 8, 12, 16, 4, 4, 4)
    x, c = module(x, "inception_3b", c, 16, 16, 24, 4, 8, 8)
    x = n.maxpool(x, "pool3/3x3_s2", 3, 2, pads=(0, 0, 1, 1))
    x, c = module(x, "inception_4a", c, 24, 12, 24, 4, 8, 8)
    x = n.avgpool(x, "pool5/7x7_s1", 4, 1)  # 64 -> 32 -> 16 -> 8 -> 4 -> 1
    x = n.dropout(x, "pool5/drop_7x7_s1", ratio=0.4, mask=True)
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.softmax(n.fc(x, "loss3/classifier", c, 10, gain=0.6), "prob")
    n.finish("data_0", (1, 3, 64, 64), x, "inception_v1")


def inception_v2():
    n = Net("inception_v2")

    def cbr(x, p, cin, cout, k, stride=1, pad=0):
        return n.relu(n.bn(n.conv(x, p, cin, cout, k, stride=stride, pad=pad, bias=False), f"{p}_bn", cout),
                      f"{p}_relu")

    def module(x, p, cin, c1, c3r, c3, d3r, d3, pp):
        b1 = cbr(x, f"{p}_1x1", cin, c1, 1)
        b2 = cbr(cbr(x, f"{p}_3x3_reduce", cin, c3r, 1), f"{p}_3x3", c3r, c3, 3, pad=1)
        b3 = cbr(x, f"{p}_double_3x3_reduce", cin, d3r, 1)
        b3 = cbr(cbr(b3, f"{p}_double_3x3_1", d3r, d3, 3, pad=1), f"{p}_double_3x3_2", d3, d3, 3, pad=1)
        b4 = n.avgpool(x, f"{p}_pool", 3, 1, pads=(1, 1, 1, 1))
        b4 = cbr(b4, f"{p}_pool_proj", cin, pp, 1)
        return n.concat([b1, b2, b3, b4], f"{p}_output"), c1 + c3 + d3 + pp

    def reduction(x, p, cin, c3r, c3, d3r, d3):
        b1 = cbr(cbr(x, f"{p}_3x3_reduce", cin, c3r, 1), f"{p}_3x3", c3r, c3, 3, stride=2, pad=1)
        b2 = cbr(x, f"{p}_double_3x3_reduce", cin, d3r, 1)
        b2 = cbr(cbr(b2, f"{p}_double_3x3_1", d3r, d3, 3, pad=1), f"{p}_double_3x3_2", d3, d3, 3, stride=2, pad=1)
        b3 = n.maxpool(x, f"{p}_pool", 3, 2, pads=(1, 1, 1, 1))
        return n.concat([b1, b2, b3], f"{p}_output"), c3 + d3 + cin

    x = cbr("data_0", "conv1_7x7_s2", 3, 16, 7, stride=2, pad=3)
    x = n.maxpool(x, "pool1_3x3_s2", 3, 2, pads=(0, 0, 1, 1))
    x = cbr(x, "conv2_3x3_reduce", 16, 16, 1)
    x = cbr(x, "conv2_3x3", 16, 32, 3, pad=1)
    x = n.maxpool(x, "pool2_3x3_s2", 3, 2, pads=(0, 0, 1, 1))
    x, c = module(x, "inception_3a", 32, 8, 8, 12, 8, 12, 8)
    x, c = reduction(x, "inception_3c", c, 16, 24, 8, 12)
    x, c = module(x, "inception_4a", c, 16, 12, 16, 12, 16, 16)
    x = n.avgpool(x, "pool5_7x7_s1", 4, 1)  # 64 -> 32 -> 16 -> 8 -> 4 -> 1
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.softmax(n.fc(x, "fc", c, 10, gain=0.45), "prob")
    n.finish("data_0", (1, 3, 64, 64), x, "inception_v2")


def resnet50_caffe2():
    n = Net("resnet50_caffe2")

    def cb(x, p, cin, cout, k, stride=1, pad=0, gamma=(0.8, 1.2)):
        return n.bn(n.conv(x, p, cin, cout, k, stride=stride, pad=pad, bias=False), f"{p}_bn", cout, gamma)

    def bottleneck(x, p, cin, mid, cout, stride):
        # original (Caffe) ResNet: the stride sits in the first 1x1 conv
        y = n.relu(cb(x, f"{p}_branch2a", cin, mid, 1, stride=stride), f"{p}_branch2a_relu")
        y = n.relu(cb(y, f"{p}_branch2b", mid, mid, 3, pad=1), f"{p}_branch2b_relu")
        y = cb(y, f"{p}_branch2c", mid, cout, 1, gamma=(0.2, 0.4))
        sc = x if (cin == cout and stride == 1) else cb(x, f"{p}_branch1", cin, cout, 1, stride=stride)
        s = n.node("Sum", [y, sc], f"{p}_sum")
        return n.relu(s, f"{p}_relu")

    x = n.relu(cb("gpu_0/data_0", "conv1", 3, 16, 7, stride=2, pad=3), "conv1_relu")
    x = n.maxpool(x, "pool1", 3, 2)  # 64 -> 32 -> 15
    cin = 16
    for si, (mid, cout, blocks, stride) in enumerate([(8, 32, 2, 1), (16, 64, 2, 2), (32, 128, 2, 2)], start=2):
        for bi in range(blocks):
            x = bottleneck(x, f"res{si}_{bi}", cin, mid, cout, stride if bi == 0 else 1)
            cin = cout
    x = n.avgpool(x, "pool5", 4, 1)  # 15 -> 8 -> 4 -> 1
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.softmax(n.fc(x, "pred", cin, 10, gain=0.4), "gpu_0/softmax")
    n.finish("gpu_0/data_0", (1, 3, 64, 64), x, "resnet50_caffe2")


def shufflenet():
    n = Net("shufflenet")
    groups = 3

    def cb(x, p, cin, cout, k, stride=1, pad=0, group=1, gamma=(0.8, 1.2)):
        return n.bn(n.conv(x, p, cin, cout, k, stride=stride, pad=pad, group=group, bias=False), f"{p}_bn", cout,
                    gamma)

    def shuffle(x, p, c, hw):
        # Caffe2's ChannelShuffle as its ONNX exporter writes it: Reshape -> Transpose -> Reshape
        s1 = n.init(f"{p}_shape1", np.array([1, groups, c // groups, hw, hw], I64))
        y = n.node("Reshape", [x, s1], f"{p}_reshape1")
        y = n.node("Transpose", [y], f"{p}_transpose", perm=[0, 2, 1, 3, 4])
        s2 = n.init(f"{p}_shape2", np.array([1, c, hw, hw], I64))
        return n.node("Reshape", [y, s2], f"{p}_reshape2")

    def unit(x, p, cin, cout, stride, hw_out, first_group=groups):
        mid = cout // 4
        branch_out = cout - cin if stride == 2 else cout
        y = n.relu(cb(x, f"{p}_gconv1", cin, mid, 1, group=first_group), f"{p}_gconv1_relu")
        y = shuffle(y, f"{p}_shuffle", mid, hw_out * stride)
        y = cb(y, f"{p}_dwconv", mid, mid, 3, stride=stride, pad=1, group=mid)
        y = cb(y, f"{p}_gconv2", mid, branch_out, 1, group=groups, gamma=(0.3, 0.6))
        if stride == 2:
            sc = n.avgpool(x, f"{p}_shortcut_pool", 3, 2, pads=(1, 1, 1, 1))
            out = n.concat([sc, y], f"{p}_concat")
        else:
            out = n.node("Sum", [x, y], f"{p}_sum")
        return n.relu(out, f"{p}_relu")

    x = n.relu(cb("gpu_0/data_0", "conv1", 3, 24, 3, stride=2, pad=1), "conv1_relu")  # 64 -> 32
    x = n.maxpool(x, "pool1", 3, 2, pads=(1, 1, 1, 1))  # -> 16
    x = unit(x, "stage2_0", 24, 48, 2, 8, first_group=1)
    x = unit(x, "stage2_1", 48, 48, 1, 8)
    x = unit(x, "stage3_0", 48, 96, 2, 4)
    x = unit(x, "stage3_1", 96, 96, 1, 4)
    x = n.node("GlobalAveragePool", [x], "pool5")
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.softmax(n.fc(x, "fc", 96, 10, gain=0.9), "gpu_0/softmax")
    n.finish("gpu_0/data_0", (1, 3, 64, 64), x, "shufflenet")


def squeezenet1_0():
    n = Net("squeezenet1_0")

    def fire(x, p, cin, sq, e):
        s = n.relu(n.conv(x, f"{p}/squeeze1x1", cin, sq, 1), f"{p}/relu_squeeze1x1")
        a = n.relu(n.conv(s, f"{p}/expand1x1", sq, e, 1), f"{p}/relu_expand1x1")
        b = n.relu(n.conv(s, f"{p}/expand3x3", sq, e, 3, pad=1), f"{p}/relu_expand3x3")
        return n.concat([a, b], f"{p}/concat"), 2 * e

    x = n.relu(n.conv("data_0", "conv1", 3, 32, 7, stride=2), "relu_conv1")  # 64 -> 29
    x = n.maxpool(x, "pool1", 3, 2)  # -> 14
    x, c = fire(x, "fire2", 32, 8, 16)
    x, c = fire(x, "fire3", c, 8, 16)
    x, c = fire(x, "fire4", c, 16, 32)
    x = n.maxpool(x, "pool4", 3, 2)  # -> 6
    x, c = fire(x, "fire5", c, 16, 32)
    x, c = fire(x, "fire6", c, 24, 48)
    x = n.maxpool(x, "pool8", 3, 2)  # -> 2
    x, c = fire(x, "fire9", c, 32, 64)
    x = n.dropout(x, "drop9", mask=True)
    x = n.relu(n.conv(x, "conv10", c, 10, 1, gain=0.7), "relu_conv10")
    x = n.node("GlobalAveragePool", [x], "pool10")
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.softmax(x, "softmaxout")
    n.finish("data_0", (1, 3, 64, 64), x, "squeezenet1_0")


def densenet121():
    n = Net("densenet121")
    growth = 8

    def br(x, p, c):
        return n.relu(n.bn(x, f"{p}_bn", c), f"{p}_relu")

    def dense_layer(x, p, cin):
        y = n.conv(br(x, f"{p}_x1", cin), f"{p}_x1", cin, 4 * growth, 1, bias=False)
        y = n.conv(br(y, f"{p}_x2", 4 * growth), f"{p}_x2", 4 * growth, growth, 3, pad=1, bias=False)
        return n.concat([x, y], f"concat_{p}"), cin + growth

    x = n.conv("data_0", "conv1", 3, 16, 7, stride=2, pad=3, bias=False)  # 64 -> 32
    x = n.maxpool(br(x, "conv1", 16), "pool1", 3, 2, pads=(1, 1, 1, 1))  # -> 16
    c = 16
    for bi, layers in enumerate([3, 4, 3], start=2):
        for li in range(layers):
            x, c = dense_layer(x, f"conv{bi}_{li + 1}", c)
        if bi < 4:  # transition: BN-Relu-Conv1x1-AveragePool
            x = n.conv(br(x, f"conv{bi}_blk", c), f"conv{bi}_blk", c, c // 2, 1, bias=False)
            c //= 2
            x = n.avgpool(x, f"pool{bi}", 2, 2)  # 16 -> 8 -> 4
    x = br(x, "conv5_blk", c)
    x = n.node("GlobalAveragePool", [x], "pool5")
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.softmax(n.fc(x, "fc6", c, 10, gain=2.0), "fc6_softmax")
    n.finish("data_0", (1, 3, 64, 64), x, "densenet121")


def vgg19():
    n = Net("vgg19")
    x, cin = "data_0", 3
    for si, (c, reps) in enumerate([(8, 2), (16, 2), (24, 4), (32, 4), (32, 4)], start=1):
        for ri in range(reps):
            x = n.relu(n.conv(x, f"conv{si}_{ri + 1}", cin, c, 3, pad=1), f"relu{si}_{ri + 1}")
            cin = c
        x = n.maxpool(x, f"pool{si}", 2, 2)  # 32 -> 16 -> 8 -> 4 -> 2 -> 1
    x = n.flatten(x, "OC2_DUMMY_0")
    x = n.dropout(n.relu(n.fc(x, "fc6", cin, 64), "relu6"), "drop6", mask=True)
    x = n.dropout(n.relu(n.fc(x, "fc7", 64, 64), "relu7"), "drop7", mask=True)
    x = n.softmax(n.fc(x, "fc8", 64, 10, gain=6.0), "prob")
    n.finish("data_0", (1, 3, 32, 32), x, "vgg19")


class Encoder(Net):
    """An opset-17 transformer in the node patterns PyTorch exports: linear layers as
    MatMul + Add, heads by Reshape/Transpose, LayerNormalization, GELU as x/2·(1+erf(x/√2))."""

    def linear(self, x, name, cin, cout):
        y = self.node("MatMul", [x, self.init(f"{name}_w", self.normal((cin, cout), 1 / np.sqrt(cin)))], f"{name}_mm")
        return self.node("Add", [y, self.init(f"{name}_b", self.normal((cout,), 0.02))], f"{name}_bias")

    def layer_norm(self, x, name, width):
        scale = self.init(f"{name}_scale", self.rng.uniform(0.8, 1.2, size=width).astype(F32))
        return self.node("LayerNormalization", [x, scale, self.init(f"{name}_bias", self.normal((width,), 0.05))],
                         name, axis=-1, epsilon=1e-5)

    def const(self, name, value, dtype=F32):
        return self.init(name, np.array(value, dtype=dtype))

    def gelu(self, x, name):
        e = self.node("Erf", [self.node("Div", [x, self.const(f"{name}_sqrt2", np.sqrt(2.0))], f"{name}_div")],
                      f"{name}_erf")
        e = self.node("Add", [e, self.const(f"{name}_one", 1.0)], f"{name}_add")
        return self.node("Mul", [self.node("Mul", [x, e], f"{name}_mul"), self.const(f"{name}_half", 0.5)],
                         f"{name}_half")

    def attention(self, x, name, seq, width, heads, mask=None, einsum=False):
        """Multi-head self-attention of x [1, seq, width]; the heads' shape is computed from
        x's as exporters do (Shape → Gather → Unsqueeze → Concat), folded at import."""
        d = width // heads
        shape = self.node("Shape", [x], f"{name}_shape")
        batch = self.node("Gather", [shape, self.const(f"{name}_i0", 0, I64)], f"{name}_batch", axis=0)
        batch = self.node("Unsqueeze", [batch, self.const(f"{name}_ax0", [0], I64)], f"{name}_batch1")
        split = self.node("Concat", [batch, self.const(f"{name}_rest", [seq, heads, d], I64)], f"{name}_heads_shape",
                          axis=0)

        def heads_of(t, tag):
            r = self.node("Reshape", [self.linear(t, f"{name}_{tag}", width, width), split], f"{name}_{tag}_split")
            return self.node("Transpose", [r], f"{name}_{tag}_heads", perm=[0, 2, 1, 3])

        q, k, v = heads_of(x, "q"), heads_of(x, "k"), heads_of(x, "v")
        if einsum:
            s = self.node("Einsum", [q, k], f"{name}_qk", equation="bhid,bhjd->bhij")
        else:
            kt = self.node("Transpose", [k], f"{name}_kt", perm=[0, 1, 3, 2])
            s = self.node("MatMul", [q, kt], f"{name}_qk")
        s = self.node("Div", [s, self.const(f"{name}_sqrt_d", np.sqrt(d))], f"{name}_scale")
        if mask is not None:
            # an additive padding mask: Where(mask == 0, -10000, 0), folded at import
            cond = self.node("Equal", [self.init(f"{name}_mask", mask), self.const(f"{name}_z", 0, I64)],
                             f"{name}_mask_eq")
            add = self.node("Where", [cond, self.const(f"{name}_neg", -1e4), self.const(f"{name}_zf", 0.0)],
                            f"{name}_mask_where")
            s = self.node("Add", [s, add], f"{name}_masked")
        p = self.node("Softmax", [s], f"{name}_softmax", axis=-1)
        if einsum:
            o = self.node("Einsum", [p, v], f"{name}_pv", equation="bhij,bhjd->bhid")
        else:
            o = self.node("MatMul", [p, v], f"{name}_pv")
        o = self.node("Transpose", [o], f"{name}_merge", perm=[0, 2, 1, 3])
        o = self.node("Reshape", [o, self.const(f"{name}_merged", [1, seq, width], I64)], f"{name}_merged")
        return self.linear(o, f"{name}_out", width, width)


def bert_encoder_layer():
    """A post-norm BERT-style encoder layer (nn.TransformerEncoderLayer's export): seq 16,
    width 64, 4 heads, a padding mask, FFN 128."""
    n = Encoder("bert_encoder_layer")
    seq, width = 16, 64
    mask = np.ones((1, 1, 1, seq), dtype=I64)
    mask[..., -3:] = 0
    x = "hidden_states"
    h = n.layer_norm(n.node("Add", [x, n.attention(x, "attn", seq, width, 4, mask=mask)], "res1"), "ln1", width)
    f = n.linear(n.gelu(n.linear(h, "ffn1", width, 128), "gelu"), "ffn2", 128, width)
    y = n.layer_norm(n.node("Add", [h, f], "res2"), "ln2", width)
    n.finish(x, (1, seq, width), y, "bert_encoder_layer", opset=17)


def vit_tiny():
    """A pre-norm vision transformer (torchvision's ViT export, small): 8×8 patches of a
    32×32 image, width 32, a class token, position embeddings, one block with attention
    by Einsum, the class token's LayerNorm and head."""
    n = Encoder("vit_tiny")
    width, seq = 32, 17
    x = n.conv("image", "patch", 3, width, 8, stride=8, gain=1.0)
    x = n.node("Reshape", [x, n.const("flat_shape", [1, width, 16], I64)], "flatten_patches")
    x = n.node("Transpose", [x], "patches", perm=[0, 2, 1])
    x = n.node("Concat", [n.init("class_token", n.normal((1, 1, width), 0.5)), x], "with_class", axis=1)
    x = n.node("Add", [x, n.init("pos_embedding", n.normal((1, seq, width), 0.1))], "embedded")
    a = n.attention(n.layer_norm(x, "ln1", width), "attn", seq, width, 2, einsum=True)
    x = n.node("Add", [x, a], "res1")
    m = n.linear(n.gelu(n.linear(n.layer_norm(x, "ln2", width), "mlp1", width, 64), "gelu"), "mlp2", 64, width)
    x = n.node("Add", [x, m], "res2")
    cls = n.node("Gather", [n.layer_norm(x, "ln_final", width), n.const("cls_index", 0, I64)], "class_out", axis=1)
    y = n.linear(cls, "head", width, 10)
    n.finish("image", (1, 3, 32, 32), y, "vit_tiny", opset=17)


def bitwise_cases():
    """BitShift (both directions, the unsigned types of opset 11, a broadcast amount),
    BitwiseAnd/Or/Xor/Not (opset 18, signed and unsigned), and Pow of mixed and integer
    types (opset 15: a float base with an int64 exponent input, an int32 power)."""
    for dt, code in [(np.uint8, TensorProto.UINT8), (np.uint32, TensorProto.UINT32), (np.uint64, TensorProto.UINT64)]:
        width = np.iinfo(dt).bits
        for direction in ["LEFT", "RIGHT"]:
            name = f"bitshift_{direction.lower()}_{np.dtype(dt).name}"
            g = Rng(name)
            x = g.ints(0, 200, 3, 4).astype(dt)
            y = g.ints(0, min(width, 8), 4).astype(dt)
            single(name, "BitShift", 11, [("X", x), ("Y", y)], attrs=dict(direction=direction), out_type=code)
    for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
        for dt, code in [(np.int32, TensorProto.INT32), (np.uint8, TensorProto.UINT8)]:
            name = f"{op.lower()}_{np.dtype(dt).name}"
            g = Rng(name)
            lo = -100 if dt == np.int32 else 0
            single(name, op, 18, [("A", g.ints(lo, 200, 2, 3, 4).astype(dt)), ("B", g.ints(lo, 200, 3, 4).astype(dt))],
                   out_type=code)
    g = Rng("bitwisenot_int16")
    single("bitwisenot_int16", "BitwiseNot", 18, [("X", g.ints(-300, 300, 3, 4).astype(np.int16))],
           out_type=TensorProto.INT16)
    g = Rng("pow_float_int64_exponent")
    single("pow_float_int64_exponent", "Pow", 15, [("X", g.uniform(0.5, 2.0, 3, 4)), ("Y", g.ints(-2, 4, 4))])
    g = Rng("pow_int32")
    single("pow_int32", "Pow", 15, [("X", g.ints(-4, 5, 3, 4).astype(np.int32)),
                                    ("Y", g.ints(0, 5, 3, 4).astype(np.int32))], out_type=TensorProto.INT32)


def topk_cases():
    """TopK: k an attribute (opset 1) or an input (10, 11), largest and smallest, on the
    last and a middle axis, ties (lower index first), an integer type."""
    g = Rng("topk")
    x = g.normal(3, 5, 6)
    ties = g.ints(-2, 3, 4, 7).astype(F32)

    def topk(name, opset, xin, k_input=None, value_type=FLOAT, **attrs):
        ins = [("X", xin)] + ([] if k_input is None else [("K", Init(np.array([k_input], I64)))])
        inputs = [(n, v) for n, v in ins if not isinstance(v, Init)]
        inits = [(n, v.arr) for n, v in ins if isinstance(v, Init)]
        node = helper.make_node("TopK", [n for n, _ in ins], ["values", "indices"], name=f"{name}_node", **attrs)
        add_case(name, "TopK", opset, [node], inputs, inits, [("values", value_type), ("indices", TensorProto.INT64)])

    topk("topk_o1_attr", 1, x, axis=-1, k=3)
    topk("topk_o10_axis1", 10, x, 2, axis=1)
    topk("topk_o11_smallest", 11, x, 4, largest=0)
    topk("topk_o11_ties", 11, ties, 5, axis=1)
    topk("topk_o11_ties_smallest_axis0", 11, ties, 4, axis=0, largest=0, sorted=1)
    topk("topk_o11_int32", 11, g.ints(-50, 50, 2, 9).astype(np.int32), 9, value_type=TensorProto.INT32)
    # a small k on a longer axis: Tessera selects (k passes) rather than ranks
    topk("topk_o11_select_ties", 11, ties, 2, axis=1)
    topk("topk_o11_select_smallest", 11, x, 2, largest=0)
    topk("topk_o11_select_int32", 11, g.ints(-5, 5, 3, 11).astype(np.int32), 3, value_type=TensorProto.INT32)
    topk("topk_o11_select_wide", 11, g.normal(2, 300), 10)

def scatter_nd_cases():
    """ScatterND on computed tensors (network inputs): slices (k = 1) and elements (k = 3)
    of a 3-D tensor, negative indices, the reductions of opsets 16 and 18."""
    g = Rng("scatter_nd")
    data = g.normal(4, 3, 5)
    slices_at = Init(np.array([[2], [-4]], I64))
    single("scatternd_slices", "ScatterND", 13, [("data", data), ("indices", slices_at),
                                                 ("updates", g.normal(2, 3, 5))])
    elems_at = Init(np.array([[[0, 1, 2], [3, 2, -1]], [[1, 0, 0], [2, 2, 2]]], I64))
    single("scatternd_elements", "ScatterND", 13, [("data", data), ("indices", elems_at),
                                                   ("updates", g.normal(2, 2))])
    twice = Init(np.array([[1], [1], [3]], I64))
    single("scatternd_add_o16", "ScatterND", 16, [("data", data), ("indices", twice),
                                                  ("updates", g.normal(3, 3, 5))], dict(reduction="add"))
    single("scatternd_max_o18", "ScatterND", 18, [("data", data), ("indices", twice),
                                                  ("updates", g.normal(3, 3, 5))], dict(reduction="max"))


def clip_cases():
    """Clip with bounds that are network inputs (computed at run time), one of them
    constant, and a lower bound above the upper (the upper everywhere)."""
    g = Rng("clip_inputs")
    x = g.normal(3, 4, scale=2.0)
    single("clip_bounds_inputs", "Clip", 13, [("X", x), ("lo", np.array(-0.5, F32)), ("hi", np.array(1.0, F32))])
    single("clip_lower_input_upper_const", "Clip", 13,
           [("X", x), ("lo", np.array(-1.0, F32)), ("hi", Init(np.array(0.5, F32)))])
    single("clip_lower_const_upper_input", "Clip", 13,
           [("X", x), ("lo", Init(np.array(0.25, F32))), ("hi", np.array(-0.75, F32))])
    single("clip_min_above_max", "Clip", 13,
           [("X", x), ("lo", Init(np.array(2.0, F32))), ("hi", Init(np.array(1.0, F32)))])


def grid_sample_cases():
    """GridSample: every mode and padding, with and without align_corners, at opset 16's
    names and 20's, a grid reaching past [-1, 1] so that every padding rule is taken."""
    g = Rng("grid_sample")
    x = g.normal(2, 3, 5, 6)
    grid = g.uniform(-1.3, 1.3, 2, 4, 7, 2)
    for opset, modes in [(16, ["nearest", "bilinear", "bicubic"]), (20, ["linear", "cubic"])]:
        for mode in modes:
            for padding in ["zeros", "border", "reflection"]:
                for align in [0, 1]:
                    if opset == 20 and align == 1 and padding != "reflection":
                        continue
                    name = f"gridsample_o{opset}_{mode}_{padding}_a{align}"
                    single(name, "GridSample", opset, [("X", x), ("grid", grid)],
                           dict(mode=mode, padding_mode=padding, align_corners=align))


def affine_grid_cases():
    """AffineGrid: 2-D and 3-D, with and without align_corners, a batch of two thetas
    (an input) and the size an initializer, as a spatial transformer feeds GridSample."""
    g = Rng("affine_grid")
    for nd, size in [(2, [2, 3, 5, 7]), (3, [2, 1, 3, 4, 5])]:
        theta = g.uniform(-1.2, 1.2, 2, nd, nd + 1)
        for align in [0, 1]:
            single(f"affinegrid_{nd}d_a{align}", "AffineGrid", 20,
                   [("theta", theta), ("size", Init(np.array(size, np.int64)))],
                   dict(align_corners=align))


def col2im_cases():
    """Col2Im of 2-D images: plain, and strides, dilations and uneven pads together on an
    image the blocks do not reach the end of (the last row and column get nothing)."""
    g = Rng("col2im")
    for name, image, block, attrs in [
        ("col2im_plain", [5, 6], [2, 3], {}),
        ("col2im_stride_dil_pads", [8, 9], [2, 2],
         dict(strides=[2, 3], dilations=[2, 1], pads=[1, 0, 2, 1])),
    ]:
        st, dl = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
        pd = attrs.get("pads", [0, 0, 0, 0])
        blocks = [(image[d] + pd[d] + pd[d + 2] - (block[d] - 1) * dl[d] - 1) // st[d] + 1
                  for d in range(2)]
        x = g.normal(2, 3 * block[0] * block[1], blocks[0] * blocks[1])
        single(name, "Col2Im", 18,
               [("X", x), ("image", Init(np.array(image, np.int64))),
                ("block", Init(np.array(block, np.int64)))], attrs)


def max_unpool_cases():
    """MaxUnpool of a batch of two with three channels: unique flat positions over the
    whole output (batch and channels included, as MaxPool's Indices are)."""
    g = Rng("max_unpool")
    x = g.normal(2, 3, 3, 4)
    total = 2 * 3 * ((3 - 1) * 2 + 3 - 1) * ((4 - 1) * 2 + 3 - 1)  # (in - 1)·stride + kernel - pads
    at = np.random.default_rng(7).permutation(total)[: x.size].reshape(x.shape).astype(np.int64)
    single("maxunpool_batch_channels", "MaxUnpool", 11, [("X", x), ("I", at)],
           dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 0, 1]))


OP_GROUPS = [unary_cases, prelu_cases, pow_cases, compare_cases, variadic_cases, softmax_cases, split_cases,
             expand_tile_cases, gather_cases, slice_cases, reduce_cases, instnorm_cases, pad_cases, lrn_cases,
             conv_pool_cases, convtranspose_cases, resize_cases, constant_cases, squeeze_cases, matmul_cases,
             transformer_op_cases, old_opset_cases, bitwise_cases, topk_cases, scatter_nd_cases, clip_cases, grid_sample_cases,
             affine_grid_cases, col2im_cases, max_unpool_cases]
ARCHS = [alexnet, zfnet512, inception_v1, inception_v2, resnet50_caffe2, shufflenet, squeezenet1_0, densenet121,
         vgg19, bert_encoder_layer, vit_tiny]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = ap.parse_args()
    t0 = time.time()
    ort.set_default_logger_severity(3)
    os.makedirs(args.outdir, exist_ok=True)
    for fn in OP_GROUPS + ARCHS:
        fn()
    manifest, numpy_refs, basic_checks = [], [], []
    for c in CASES:
        entry, refused, check = build(c, args.outdir)
        manifest.append(entry)
        if refused:
            numpy_refs.append(f"{c['name']} ({refused[:120]})")
        if check != "full":
            basic_checks.append(c["name"])
        if args.verbose:
            print(f"{c['name']}: {c['op']} opset {c['opset']}, {len(c['nodes'])} nodes, ref {entry['reference']}, "
                  f"check {check}, outs {[list(np.load(os.path.join(args.outdir, f)).shape) for f in entry['outputs']]}")
    mpath = os.path.join(args.outdir, "op_manifest.json")
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    for r in numpy_refs:
        print(f"numpy reference: {r}")
    for r in basic_checks:
        print(f"checked without full_check: {r}")
    n_ops = sum(1 for e in manifest if e["group"] == "ops")
    n_arch = len(manifest) - n_ops
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}: wrote {mpath} "
          f"({len(manifest)} cases: {n_ops} ops, {n_arch} arch; {len(numpy_refs)} numpy references) "
          f"in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
