#!/usr/bin/env python3
"""The detection fixtures (issue 61), kept in tests/onnx/exports/detector/ because CI has
no torch:

- `post.onnx`: a small detector with torchvision-style post-processing in its graph,
  exported with PyTorch's default (dynamo) exporter — a conv head over a 16×16 map gives
  boxes and two classes' scores; the scores above 0.5 are kept (`NonZero`), the best
  `min(40, kept)` of them (`TopK` with a computed k), class-offset boxes through
  `torchvision.ops.nms` (`NonMaxSuppression`), the first 15 (a slice of a count), and
  the kept boxes, scores and labels gathered. (`torchvision.ops.batched_nms` itself does
  not export with the dynamo exporter: it branches on the number of boxes.)
- `nms0.onnx`: a NonMaxSuppression with a score threshold of 0.9 whose kept boxes are
  gathered and scaled: inputs whose scores are all below it keep none.

Inputs `post_x{i}.npy`, `nms0_{boxes,scores}{i}.npy`, and onnxruntime's outputs
`post_out{i}.npz`, `nms0_out{i}.npz` (`arr_0`, … in output order).

Usage: python tests/onnx/export_detector.py [OUT_DIR]   (default: tests/onnx/exports)
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from onnx import TensorProto as T
from onnx import helper as h

here = os.path.dirname(os.path.abspath(__file__))


class Detector(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.box = torch.nn.Conv2d(8, 4, 1)
        self.cls = torch.nn.Conv2d(8, 2, 1)

    def forward(self, x):
        f = torch.relu(self.conv(x))
        b = self.box(f).flatten(2).transpose(1, 2)[0]
        b = torch.cat([b[:, :2] * 10, b[:, :2] * 10 + b[:, 2:].exp() * 5], 1)
        s = torch.sigmoid(self.cls(f)).flatten(2)[0].transpose(0, 1).flatten()
        labels = torch.arange(2).repeat(b.shape[0])
        boxes = b.repeat_interleave(2, 0)
        keep = torch.where(s > 0.5)[0]
        s, boxes, labels = s[keep], boxes[keep], labels[keep]
        s, order = s.topk(min(40, s.shape[0]))
        boxes, labels = boxes[order], labels[order]
        offset = labels.to(boxes.dtype) * 1000.0
        kept = torchvision.ops.nms(boxes + offset[:, None], s, 0.5)[:15]
        return boxes[kept], s[kept], labels[kept]


def nms0(path):
    nodes = [
        h.make_node("NonMaxSuppression", ["boxes", "scores", "most", "iou", "least"], ["sel"]),
        h.make_node("Slice", ["sel", "two", "three", "one"], ["col"]),
        h.make_node("Squeeze", ["col", "one"], ["idx"]),
        h.make_node("Squeeze", ["boxes", "zero"], ["all"]),
        h.make_node("Gather", ["all", "idx"], ["kept"], axis=0),
        h.make_node("Mul", ["kept", "scale"], ["out"]),
    ]
    inits = [
        h.make_tensor("most", T.INT64, [1], [10]),
        h.make_tensor("iou", T.FLOAT, [1], [0.5]),
        h.make_tensor("least", T.FLOAT, [1], [0.9]),
        h.make_tensor("two", T.INT64, [1], [2]),
        h.make_tensor("three", T.INT64, [1], [3]),
        h.make_tensor("one", T.INT64, [1], [1]),
        h.make_tensor("zero", T.INT64, [1], [0]),
        h.make_tensor("scale", T.FLOAT, [], [2.0]),
    ]
    g = h.make_graph(
        nodes, "nms0",
        [h.make_tensor_value_info("boxes", T.FLOAT, [1, 8, 4]),
         h.make_tensor_value_info("scores", T.FLOAT, [1, 1, 8])],
        [h.make_tensor_value_info("out", T.FLOAT, None)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "exports"),
                       "detector")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    det = Detector().eval()
    x = torch.randn(1, 3, 16, 16)
    torch.onnx.export(det, (x,), os.path.join(out, "post.onnx"), dynamo=True,
                      external_data=False)
    sess = ort.InferenceSession(os.path.join(out, "post.onnx"), providers=["CPUExecutionProvider"])
    rs = np.random.RandomState(0)
    xs = [x.numpy(), (rs.randn(1, 3, 16, 16) * 0.3).astype(np.float32),
          (rs.randn(1, 3, 16, 16) * 3).astype(np.float32), np.full((1, 3, 16, 16), -5, np.float32)]
    for i, xi in enumerate(xs):
        np.save(os.path.join(out, f"post_x{i}.npy"), xi)
        outs = sess.run(None, {"x": xi})
        np.savez(os.path.join(out, f"post_out{i}.npz"), *outs)
        print("post", i, [o.shape for o in outs])
    nms0(os.path.join(out, "nms0.onnx"))
    sess = ort.InferenceSession(os.path.join(out, "nms0.onnx"), providers=["CPUExecutionProvider"])
    for i, top in enumerate([1.0, 0.5]):
        b = rs.rand(1, 8, 4).astype(np.float32)
        b[..., 2:] += b[..., :2]
        s = (rs.rand(1, 1, 8) * top).astype(np.float32)
        np.save(os.path.join(out, f"nms0_boxes{i}.npy"), b)
        np.save(os.path.join(out, f"nms0_scores{i}.npy"), s)
        outs = sess.run(None, {"boxes": b, "scores": s})
        np.savez(os.path.join(out, f"nms0_out{i}.npz"), *outs)
        print("nms0", i, [o.shape for o in outs])


if __name__ == "__main__":
    main()
