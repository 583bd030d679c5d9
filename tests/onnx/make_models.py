#!/usr/bin/env python3
"""Generate the ONNX test models for Tessera's importer, with reference outputs.

Usage: python3 tests/onnx/make_models.py OUTDIR [--bench]

Every model is built with onnx.helper (no torch, no downloads) in exactly the node
patterns that `torch.onnx.export` (eval mode, do_constant_folding=True) writes for the
torchvision model, at full size, with numpy-seeded random weights (a fixed seed per
model, He/Kaiming scaling so activations stay O(1)). Each one is checked with
onnx.checker and run through onnxruntime (CPU EP, 2 intra-op threads) on a seeded
random input. OUTDIR gets, per model:

    <name>.onnx, <name>.input.npy (float32), <name>.expected.npy (float32, first output)

and manifest.json, a list of
    {"name", "model", "input_name", "input", "expected", "opset", "ops"}.

The default set is resnet18, mobilenet_v2, squeezenet1_1, inception_block and
tiny_external (saved with external data in tiny_external.data). --bench adds
resnet50_v2 (model zoo resnet50-v2-7 style, ~100 MB), which is not in the default set.

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

PRODUCER = "tessera tests/onnx/make_models.py"


class Builder:
    """Accumulates nodes and initializers, naming them the way torch.onnx.export does."""

    def __init__(self, seed, weight_counter=200):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.init_names = set()
        self.counter = weight_counter
        self.node_names = set()

    # ---- plumbing -------------------------------------------------------------------
    def init(self, name, arr):
        assert name not in self.init_names, name
        self.init_names.add(name)
        self.inits.append(numpy_helper.from_array(np.require(arr, requirements='C'), name))
        return name

    def anon(self, op):
        """torch names folded constants `onnx::<Op>_<N>`."""
        self.counter += 1
        return f"onnx::{op}_{self.counter}"

    def node(self, op, inputs, scope, outputs=None, **attrs):
        name = f"{scope}/{op}"
        base, k = name, 0
        while name in self.node_names:  # torch appends _1, _2 ... to repeated names
            k += 1
            name = f"{base}_{k}"
        self.node_names.add(name)
        if outputs is None:
            outputs = [f"{name}_output_0"]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, scope, arr):
        """A Constant node (torch keeps these for shape arithmetic)."""
        return self.node("Constant", [], scope, value=numpy_helper.from_array(np.asarray(arr)))

    # ---- random parameters ----------------------------------------------------------
    def normal(self, shape, std):
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def uniform(self, shape, lo, hi):
        return self.rng.uniform(lo, hi, size=shape).astype(np.float32)

    def conv_weight(self, cin, cout, k, group, gain):
        fan_in = (cin // group) * k * k
        return self.normal((cout, cin // group, k, k), gain / np.sqrt(fan_in))

    def bias(self, n, std=0.05):
        return self.normal((n,), std)

    # ---- layers ---------------------------------------------------------------------
    def conv(self, x, scope, cin, cout, k, stride=1, pad=0, group=1, bias=True, gain=np.sqrt(2.0),
             wname=None, bname=None):
        w = self.init(wname or self.anon("Conv"), self.conv_weight(cin, cout, k, group, gain))
        inputs = [x, w]
        if bias:
            inputs.append(self.init(bname or self.anon("Conv"), self.bias(cout)))
        return self.node(
            "Conv", inputs, scope,
            dilations=[1, 1], group=group, kernel_shape=[k, k],
            pads=[pad, pad, pad, pad], strides=[stride, stride],
        )

    def bn(self, x, scope, c, eps=1e-5, momentum=0.9, prefix=None, affine=True):
        p = prefix or scope.strip("/").replace("/", ".")
        gamma = self.uniform((c,), 0.8, 1.2) if affine else np.ones(c, np.float32)
        beta = self.normal((c,), 0.05) if affine else np.zeros(c, np.float32)
        mean = self.normal((c,), 0.05)
        var = self.uniform((c,), 0.5, 1.5)
        ins = [
            x,
            self.init(f"{p}.weight", gamma),
            self.init(f"{p}.bias", beta),
            self.init(f"{p}.running_mean", mean),
            self.init(f"{p}.running_var", var),
        ]
        return self.node("BatchNormalization", ins, scope, epsilon=eps, momentum=momentum)

    def relu(self, x, scope):
        return self.node("Relu", [x], scope)

    def gemm(self, x, scope, cin, cout, wname, bname, gain=1.0):
        w = self.init(wname, self.normal((cout, cin), gain / np.sqrt(cin)))
        b = self.init(bname, self.bias(cout, 0.01))
        return self.node("Gemm", [x, w, b], scope, alpha=1.0, beta=1.0, transB=1)

    def model(self, name, opset, input_name, input_shape, output_name, output_shape, outputs):
        """Wrap up: rename the last output, make the ModelProto."""
        last = self.nodes[-1]
        assert outputs == last.output[0]
        last.output[0] = output_name
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, input_shape)],
            [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, output_shape)],
            initializer=self.inits,
        )
        opsets = [helper.make_opsetid("", opset)]
        m = helper.make_model(
            graph, opset_imports=opsets, producer_name=PRODUCER, producer_version="1",
            ir_version=helper.find_min_ir_version_for(opsets),
        )
        return m


# ---------------------------------------------------------------------------------------
# 1. resnet18 (opset 13): BN folded into Conv bias by the exporter.
# ---------------------------------------------------------------------------------------
def resnet18():
    b = Builder(seed=18, weight_counter=192)
    x = "input.1"
    x = b.conv(x, "/conv1", 3, 64, 7, stride=2, pad=3)
    x = b.relu(x, "/relu")
    x = b.node("MaxPool", [x], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[2, 2])
    cin = 64
    for li, (c, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], start=1):
        for bi in range(2):
            s = f"/layer{li}/layer{li}.{bi}"
            st = stride if bi == 0 else 1
            y = b.conv(x, f"{s}/conv1", cin, c, 3, stride=st, pad=1)
            y = b.relu(y, f"{s}/relu")
            # the last conv of the branch is scaled down (as with zero-init-residual) so
            # the residual sums do not grow through the 8 blocks
            y = b.conv(y, f"{s}/conv2", c, c, 3, pad=1, gain=0.5)
            if st != 1 or cin != c:
                x = b.conv(x, f"{s}/downsample/downsample.0", cin, c, 1, stride=st, gain=1.0)
            x = b.node("Add", [y, x], s)
            x = b.relu(x, f"{s}/relu_1")
            cin = c
    x = b.node("GlobalAveragePool", [x], "/avgpool")
    x = b.node("Flatten", [x], "", axis=1)
    x = b.gemm(x, "/fc", 512, 1000, "fc.weight", "fc.bias", gain=2.0)
    return b.model("main_graph", 13, "input.1", [1, 3, 224, 224], "191", [1, 1000], x), "normal"


# ---------------------------------------------------------------------------------------
# 2. mobilenet_v2 (opset 11): Conv(+folded BN bias) + Clip(min 0, max 6 as inputs).
# ---------------------------------------------------------------------------------------
def mobilenet_v2():
    b = Builder(seed=2, weight_counter=540)
    cmin = b.init("onnx::Clip_min", np.array(0.0, np.float32))
    cmax = b.init("onnx::Clip_max", np.array(6.0, np.float32))

    def conv_bn_relu6(x, scope, cin, cout, k, stride=1, group=1):
        y = b.conv(x, f"{scope}/{scope.split('/')[-1]}.0", cin, cout, k, stride=stride,
                   pad=(k - 1) // 2, group=group)
        return b.node("Clip", [y, cmin, cmax], f"{scope}/{scope.split('/')[-1]}.2")

    x = conv_bn_relu6("input", "/features/features.0", 3, 32, 3, stride=2)
    cin = 32
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    idx = 1
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            scope = f"/features/features.{idx}/conv"
            hidden = cin * t
            y, j = x, 0
            if t != 1:
                y = conv_bn_relu6(y, f"{scope}/conv.{j}", cin, hidden, 1)
                j += 1
            y = conv_bn_relu6(y, f"{scope}/conv.{j}", hidden, hidden, 3, stride=stride, group=hidden)
            j += 1
            # linear bottleneck: no activation; residual branches scaled down
            use_res = stride == 1 and cin == c
            y = b.conv(y, f"{scope}/conv.{j}", hidden, c, 1, gain=0.5 if use_res else 1.0)
            if use_res:
                y = b.node("Add", [x, y], f"/features/features.{idx}")
            x, cin, idx = y, c, idx + 1
    x = conv_bn_relu6(x, f"/features/features.{idx}", cin, 1280, 1)
    x = b.node("GlobalAveragePool", [x], "")
    x = b.node("Flatten", [x], "", axis=1)
    x = b.gemm(x, "/classifier/classifier.1", 1280, 1000, "classifier.1.weight", "classifier.1.bias",
               gain=2.0)
    return b.model("main_graph", 11, "input", [1, 3, 224, 224], "output", [1, 1000], x), "normal"


# ---------------------------------------------------------------------------------------
# 3. squeezenet1_1 (opset 12): no BN; Fire modules; ceil-mode max pools; Dropout.
# ---------------------------------------------------------------------------------------
def squeezenet1_1():
    b = Builder(seed=11)

    def conv(x, idx, cin, cout, k, stride=1, pad=0, scope=None, gain=np.sqrt(2.0)):
        p = scope.strip("/").replace("/", ".") if scope else f"features.{idx}"
        return b.conv(x, scope or f"/features/features.{idx}", cin, cout, k, stride=stride,
                      pad=pad, wname=f"{p}.weight", bname=f"{p}.bias", gain=gain)

    def maxpool(x, idx):
        return b.node("MaxPool", [x], f"/features/features.{idx}", ceil_mode=1,
                      kernel_shape=[3, 3], pads=[0, 0, 0, 0], strides=[2, 2])

    def fire(x, idx, cin, sq, e1, e3):
        s = f"/features/features.{idx}"
        y = b.relu(conv(x, None, cin, sq, 1, scope=f"{s}/squeeze"), f"{s}/squeeze_activation")
        a = b.relu(conv(y, None, sq, e1, 1, scope=f"{s}/expand1x1"), f"{s}/expand1x1_activation")
        c = b.relu(conv(y, None, sq, e3, 3, pad=1, scope=f"{s}/expand3x3"),
                   f"{s}/expand3x3_activation")
        return b.node("Concat", [a, c], s, axis=1)

    x = conv("input", 0, 3, 64, 3, stride=2)
    x = b.relu(x, "/features/features.1")
    x = maxpool(x, 2)
    x = fire(x, 3, 64, 16, 64, 64)
    x = fire(x, 4, 128, 16, 64, 64)
    x = maxpool(x, 5)
    x = fire(x, 6, 128, 32, 128, 128)
    x = fire(x, 7, 256, 32, 128, 128)
    x = maxpool(x, 8)
    x = fire(x, 9, 256, 48, 192, 192)
    x = fire(x, 10, 384, 48, 192, 192)
    x = fire(x, 11, 384, 64, 256, 256)
    x = fire(x, 12, 512, 64, 256, 256)
    ratio = b.init("onnx::Dropout_ratio", np.array(0.5, np.float32))
    x = b.node("Dropout", [x, ratio], "/classifier/classifier.0")
    x = conv(x, None, 512, 1000, 1, scope="/classifier/classifier.1")
    x = b.relu(x, "/classifier/classifier.2")
    x = b.node("GlobalAveragePool", [x], "/classifier/classifier.3")
    x = b.node("Flatten", [x], "", axis=1)
    return b.model("main_graph", 12, "input", [1, 3, 224, 224], "output", [1, 1000], x), "normal"


# ---------------------------------------------------------------------------------------
# 4. inception_block (opset 18): unfolded BN, explicit Pad, dynamic Reshape, MatMul+Add...
# ---------------------------------------------------------------------------------------
def inception_block():
    b = Builder(seed=3)
    classes = 100

    def basic_conv(x, scope, cin, cout, k, stride=1, pad=0):
        # torchvision BasicConv2d: conv (no bias) + BatchNorm(eps=1e-3) + relu
        p = scope.strip("/").replace("/", ".")
        y = b.conv(x, f"{scope}/conv", cin, cout, k, stride=stride, pad=pad, bias=False,
                   wname=f"{p}.conv.weight")
        y = b.bn(y, f"{scope}/bn", cout, eps=1e-3)
        return b.relu(y, scope)

    def inception_a(x, scope, cin, pool_features):
        b1 = basic_conv(x, f"{scope}/branch1x1", cin, 64, 1)
        b5 = basic_conv(x, f"{scope}/branch5x5_1", cin, 48, 1)
        b5 = basic_conv(b5, f"{scope}/branch5x5_2", 48, 64, 5, pad=2)
        b3 = basic_conv(x, f"{scope}/branch3x3dbl_1", cin, 64, 1)
        b3 = basic_conv(b3, f"{scope}/branch3x3dbl_2", 64, 96, 3, pad=1)
        b3 = basic_conv(b3, f"{scope}/branch3x3dbl_3", 96, 96, 3, pad=1)
        bp = b.node("AveragePool", [x], scope, ceil_mode=0, count_include_pad=0,
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
        bp = basic_conv(bp, f"{scope}/branch_pool", cin, pool_features, 1)
        return b.node("Concat", [b1, b5, b3, bp], scope, axis=1), 64 + 64 + 96 + pool_features

    x = basic_conv("input", "/Conv2d_1a_3x3", 3, 32, 3, stride=2)           # 37x37
    x = b.node("MaxPool", [x], "/maxpool1", ceil_mode=0, dilations=[1, 1],
               kernel_shape=[3, 3], pads=[0, 0, 0, 0], strides=[2, 2])     # 18x18
    # explicit Pad (opset-18 form: pads and constant_value as inputs) before a conv
    # with no padding of its own
    pads = b.init("onnx::Pad_pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    cval = b.init("onnx::Pad_value", np.array(0.0, np.float32))
    x = b.node("Pad", [x, pads, cval], "/Conv2d_2b_3x3/pad", mode="constant")
    x = basic_conv(x, "/Conv2d_2b_3x3", 32, 64, 3)                         # 18x18
    x, c = inception_a(x, "/Mixed_5b", 64, 32)                              # 192
    x, c = inception_a(x, "/Mixed_5c", c, 64)                               # 288
    # a real layout permutation: NCHW -> NHWC, a per-channel bias added in NHWC
    # (broadcast over the last axis), NHWC -> NCHW
    x = b.node("Transpose", [x], "/to_nhwc", perm=[0, 2, 3, 1])
    x = b.node("Add", [x, b.init("nhwc_bias", b.bias(c, 0.1))], "/nhwc_bias")
    x = b.node("Transpose", [x], "/to_nchw", perm=[0, 3, 1, 2])
    x = b.node("GlobalAveragePool", [x], "/avgpool")
    # x.view(x.size(0), -1): Shape -> Gather(0) -> Unsqueeze -> Concat([n, -1]) -> Reshape
    shp = b.node("Shape", [x], "")
    n = b.node("Gather", [shp, b.const("/Constant", np.array(0, np.int64))], "", axis=0)
    n = b.node("Unsqueeze", [n, b.const("/Constant_1", np.array([0], np.int64))], "")
    shape = b.node("Concat", [n, b.const("/Constant_2", np.array([-1], np.int64))], "", axis=0)
    x = b.node("Reshape", [x, shape], "")
    # Linear as MatMul (weight stored K x N) + Add
    w = b.init("onnx::MatMul_fc", b.normal((c, classes), 1.0 / np.sqrt(c)))
    x = b.node("MatMul", [x, w], "/fc")
    x = b.node("Add", [x, b.init("fc.bias", b.bias(classes, 0.01))], "/fc")
    x = b.node("Mul", [x, b.const("/Constant_3", np.array(2.0, np.float32))], "")
    x = b.node("Identity", [x], "")
    x = b.node("Dropout", [x], "/dropout")
    x = b.node("Softmax", [x], "", axis=-1)
    return b.model("main_graph", 18, "input", [1, 3, 75, 75], "output", [1, classes], x), "uniform"


# ---------------------------------------------------------------------------------------
# 5. tiny_external (opset 17): saved with external data.
# ---------------------------------------------------------------------------------------
def tiny_external():
    b = Builder(seed=17)
    x = b.conv("input", "/conv", 3, 8, 3, pad=1, wname="conv.weight", bname="conv.bias")
    x = b.relu(x, "/relu")
    x = b.node("GlobalAveragePool", [x], "/pool")
    x = b.node("Flatten", [x], "", axis=1)
    x = b.gemm(x, "/fc", 8, 10, "fc.weight", "fc.bias", gain=2.0)
    return b.model("main_graph", 17, "input", [1, 3, 16, 16], "output", [1, 10], x), "uniform"


# ---------------------------------------------------------------------------------------
# bench: resnet50_v2 (opset 13), the model zoo's resnet50-v2-7 layout (MXNet gluon
# ResNetV2: pre-activation bottlenecks, unfolded BN + Relu before the convs, no conv bias).
# ---------------------------------------------------------------------------------------
def resnet50_v2():
    b = Builder(seed=50)
    p = "resnetv24"

    def conv(x, name, cin, cout, k, stride=1, pad=0, gain=np.sqrt(2.0)):
        return b.conv(x, f"/{name}", cin, cout, k, stride=stride, pad=pad, bias=False,
                      wname=f"{name}_weight", gain=gain)

    def bn(x, name, c, affine=True):
        return b.bn(x, f"/{name}", c, eps=1e-5, prefix=name, affine=affine)

    x = bn("data", f"{p}_batchnorm0", 3, affine=False)     # data BN (scale=False, center=False)
    x = conv(x, f"{p}_conv0", 3, 64, 7, stride=2, pad=3)
    x = bn(x, f"{p}_batchnorm1", 64)
    x = b.relu(x, f"/{p}_relu0")
    x = b.node("MaxPool", [x], f"/{p}_pool0", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               strides=[2, 2])
    cin = 64
    for si, (n, c, stride) in enumerate([(3, 256, 1), (4, 512, 2), (6, 1024, 2), (3, 2048, 2)],
                                        start=1):
        s = f"{p}_stage{si}"
        k = 0  # gluon numbers a stage's convs in creation order: conv1-3, then downsample
        for bi in range(n):
            st = stride if bi == 0 else 1
            y = bn(x, f"{s}_batchnorm{3 * bi}", cin)
            y = b.relu(y, f"/{s}_activation{3 * bi}")
            if bi == 0:  # downsample of the pre-activated input
                res = conv(y, f"{s}_conv{k + 3}", cin, c, 1, stride=st, gain=1.0)
            else:
                res = x
            y = conv(y, f"{s}_conv{k}", cin, c // 4, 1)
            y = bn(y, f"{s}_batchnorm{3 * bi + 1}", c // 4)
            y = b.relu(y, f"/{s}_activation{3 * bi + 1}")
            y = conv(y, f"{s}_conv{k + 1}", c // 4, c // 4, 3, stride=st, pad=1)
            y = bn(y, f"{s}_batchnorm{3 * bi + 2}", c // 4)
            y = b.relu(y, f"/{s}_activation{3 * bi + 2}")
            # last conv of the branch scaled down so the 16 residual sums stay O(1)
            y = conv(y, f"{s}_conv{k + 2}", c // 4, c, 1, gain=0.4)
            k += 4 if bi == 0 else 3
            x = b.node("Add", [y, res], f"/{s}__plus{bi}")
            cin = c
    x = bn(x, f"{p}_batchnorm2", 2048)
    x = b.relu(x, f"/{p}_relu1")
    x = b.node("GlobalAveragePool", [x], f"/{p}_pool1")
    # gluon's nn.Flatten is x.reshape((0, -1)): a Reshape with a constant shape, where
    # 0 copies the input dimension
    shape = b.init(f"{p}_flatten0_reshape0_shape", np.array([0, -1], np.int64))
    x = b.node("Reshape", [x, shape], f"/{p}_flatten0_reshape0")
    x = b.gemm(x, f"/{p}_dense0", 2048, 1000, f"{p}_dense0_weight", f"{p}_dense0_bias", gain=2.0)
    return (b.model("resnetv24", 13, "data", [1, 3, 224, 224], f"{p}_dense0_fwd", [1, 1000], x),
            "normal")


DEFAULT = [resnet18, mobilenet_v2, squeezenet1_1, inception_block, tiny_external]
BENCH = [resnet50_v2]
EXTERNAL = {"tiny_external"}


def make_input(name, shape, dist):
    rng = np.random.default_rng(abs(hash_name(name)))
    if dist == "uniform":
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    return rng.standard_normal(shape, dtype=np.float32)


def hash_name(name):
    """A stable seed from the name (Python's hash() is salted per process)."""
    h = 0
    for ch in name.encode():
        h = (h * 131 + ch) % (2**31 - 1)
    return h + 1000


def run_ort(path, input_name, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {input_name: x})[0]


def build(fn, outdir):
    t0 = time.time()
    name = fn.__name__
    model, dist = fn()
    graph = model.graph
    input_name = graph.input[0].name
    shape = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    opset = model.opset_import[0].version
    ops = sorted({n.op_type for n in graph.node})
    onnx.checker.check_model(model, full_check=True)

    path = os.path.join(outdir, f"{name}.onnx")
    written = [path]
    if name in EXTERNAL:
        data = f"{name}.data"
        if os.path.exists(os.path.join(outdir, data)):
            os.remove(os.path.join(outdir, data))  # external data is appended to, not replaced
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data, size_threshold=0)
        onnx.checker.check_model(path, full_check=True)
        written.append(os.path.join(outdir, data))
    else:
        onnx.save_model(model, path)

    x = make_input(name, shape, dist)
    y = run_ort(path, input_name, x).astype(np.float32)
    if not np.all(np.isfinite(y)):
        raise SystemExit(f"{name}: non-finite output")
    np.save(os.path.join(outdir, f"{name}.input.npy"), x)
    np.save(os.path.join(outdir, f"{name}.expected.npy"), y)
    written += [os.path.join(outdir, f"{name}.input.npy"), os.path.join(outdir, f"{name}.expected.npy")]

    stats = f"out {list(y.shape)} min {y.min():.4g} max {y.max():.4g} std {y.std():.4g}"
    if "Softmax" in ops:
        stats += f" sum {y.sum():.5f} max-prob {y.max():.4f} (uniform {1.0 / y.size:.4f})"
    sizes = ", ".join(f"{os.path.basename(p)} {os.path.getsize(p)} B" for p in written)
    print(f"{name}: opset {opset}, {len(graph.node)} nodes, ops {ops}")
    print(f"    {stats}; {time.time() - t0:.2f} s")
    print(f"    wrote {sizes}")
    return {
        "name": name,
        "model": f"{name}.onnx",
        "input_name": input_name,
        "input": f"{name}.input.npy",
        "expected": f"{name}.expected.npy",
        "opset": opset,
        "ops": ops,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--bench", action="store_true", help="also write resnet50_v2 (large)")
    args = ap.parse_args()
    t0 = time.time()
    os.makedirs(args.outdir, exist_ok=True)
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    fns = DEFAULT + (BENCH if args.bench else [])
    manifest = [build(fn, args.outdir) for fn in fns]
    mpath = os.path.join(args.outdir, "manifest.json")
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"wrote {mpath} ({len(manifest)} models) in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
