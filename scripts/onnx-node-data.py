#!/usr/bin/env python3
"""onnx-node-data.py: writes the ONNX node test cases of the installed onnx wheel as test data
(DIR/node/<case>/model.onnx and test_data_set_N/{input,output}_K.pb), the layout of onnx's own
backend/test/data/node and of Debian's libonnx-testdata, for tests/onnx/runner.c. The wheel
carries the cases' definitions (onnx.backend.test.case.node) but not their data; this runs
each case's expect() as onnx's generator does. Usage: onnx-node-data.py DIR"""
import os
import shutil
import sys

import numpy as np
import onnx.backend.test.case.node as node_test
from onnx import numpy_helper


def write_value(path, value, vtype, name):
    if vtype.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif vtype.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif vtype.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    elif hasattr(value, "SerializeToString"):
        proto = value
    else:
        proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: onnx-node-data.py DIR")
    top = os.path.join(sys.argv[1], "node")
    if os.path.exists(top):
        shutil.rmtree(top)
    # the cases draw their inputs from numpy's global generator while they are collected: seeded,
    # every run writes the same data (a baseline of passing cases needs that)
    np.random.seed(0)
    n = 0
    for case in node_test.collect_testcases(None):
        out = os.path.join(top, case.name)
        os.makedirs(out)
        with open(os.path.join(out, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        g = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            d = os.path.join(out, f"test_data_set_{i}")
            os.makedirs(d)
            for j, v in enumerate(inputs):
                write_value(os.path.join(d, f"input_{j}.pb"), v, g.input[j].type, g.input[j].name)
            for j, v in enumerate(outputs):
                write_value(os.path.join(d, f"output_{j}.pb"), v, g.output[j].type, g.output[j].name)
        n += 1
    print(f"onnx-node-data: {n} node cases of onnx {__import__('onnx').__version__} in {top}")


if __name__ == "__main__":
    main()
