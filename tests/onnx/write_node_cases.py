#!/usr/bin/env python3
"""Writes the onnx package's one-operator conformance cases (its backend/test/case/node
definitions, which the wheel ships as code, not as data) with their reference outputs,
in the layout of ONNX's backend test data:

    OUTDIR/NAME/model.onnx
    OUTDIR/NAME/test_data_set_0/input_K.pb, output_K.pb

Usage: python3 tests/onnx/write_node_cases.py OUTDIR

Inputs that are sequences, maps or optionals are written in their own protobuf forms
(the importer refuses those cases: Tessera takes tensors). The output is deterministic for
a given onnx version, and a second run into the same OUTDIR with a stamp of the same
version does nothing. Requirements: tests/onnx/requirements.txt.
"""

import os
import shutil
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def write_value(path, value, vi):
    t = vi.type
    if t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, vi.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, vi.name)
    elif t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, vi.name)
    elif isinstance(value, TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(np.asarray(value), vi.name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    stamp = os.path.join(out, "onnx_version")
    if os.path.exists(stamp) and open(stamp).read() == onnx.__version__:
        return
    warnings.simplefilter("ignore")
    import onnx.backend.test.case.node as node_cases

    cases = node_cases.collect_testcases(None)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    written = 0
    for case in cases:
        if case.kind != "node" or case.model is None or not case.data_sets:
            continue
        d = os.path.join(out, case.name)
        ds = os.path.join(d, "test_data_set_0")
        os.makedirs(ds)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        inputs, outputs = case.data_sets[0]
        g = case.model.graph
        for j, v in enumerate(inputs):
            write_value(os.path.join(ds, f"input_{j}.pb"), v, g.input[j])
        for j, v in enumerate(outputs):
            write_value(os.path.join(ds, f"output_{j}.pb"), v, g.output[j])
        written += 1
    with open(stamp, "w") as f:
        f.write(onnx.__version__)
    print(f"wrote {written} node cases of onnx {onnx.__version__} to {out}")


if __name__ == "__main__":
    main()
