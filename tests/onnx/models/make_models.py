#!/usr/bin/python3
"""Make the hand-built ONNX models of tests/onnx/models (small; committed), in the ONNX
backend-test layout, with expected outputs computed by NumPy.

dynamic_reshape: the shape arithmetic exporters emit for a dynamic batch, Shape -> Gather ->
  Unsqueeze -> Concat -> Reshape, plus Shape -> Slice -> Concat and integer Mul/Div on known
  dimensions, so the importer must carry the batch symbol through folding. Two data sets of
  different batch sizes run through one import each.

Needs python3-onnx and python3-numpy: `/usr/bin/python3 tests/onnx/models/make_models.py`.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def write_case(name, model, datasets):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (ins, outs) in enumerate(datasets):
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        for i, (n, a) in enumerate(ins):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(sd, "input_%d.pb" % i))
        for i, (n, a) in enumerate(outs):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(sd, "output_%d.pb" % i))


def dynamic_reshape():
    i64 = lambda v: numpy_helper.from_array(np.array(v, np.int64))
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=i64(0)),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        # a slice of the shape that holds no symbol (folded, then unused)
        helper.make_node("Slice", ["s", "one", "three", "ax0"], ["hw"]),
        # the columns from the last dimension: 6 * 4 / 2 = 12
        helper.make_node("Gather", ["s", "two_idx"], ["w"], axis=0),
        helper.make_node("Constant", [], ["k"], value=i64([4])),
        helper.make_node("Mul", ["w", "k"], ["w4"]),
        helper.make_node("Constant", [], ["two"], value=i64([2])),
        helper.make_node("Div", ["w4", "two"], ["cols"]),
        helper.make_node("Concat", ["n1", "cols"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y0"]),
        helper.make_node("Relu", ["y0"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([3], np.int64), "three"),
             numpy_helper.from_array(np.array([2], np.int64), "two_idx")]
    g = helper.make_graph(nodes, "dynamic_reshape",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    rng = np.random.default_rng(7)
    sets = []
    for n in (3, 5):
        x = rng.standard_normal((n, 2, 6)).astype(np.float32)
        sets.append(([("x", x)], [("y", np.maximum(x.reshape(n, 12), 0))]))
    write_case("dynamic_reshape", m, sets)


if __name__ == "__main__":
    dynamic_reshape()
