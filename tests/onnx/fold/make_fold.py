#!/usr/bin/python3
"""Make the ONNX models of tests/onnx/fold (small; committed), which test_frontend.c imports to
check that the importer's constant folding gives what running the same op gives.

max_min_nan: Max and Min of two constants holding NaNs (folded while importing) next to the same
  ops with one operand a graph input fed the same values (run by the kernels); outputs
  folded_max, run_max, folded_min, run_min must agree, NaN for NaN.
div_int_zero: an integer Div of two constants whose divisor holds a 0, added to an input: not
  folded into a value, so the run fails as the Div kernel fails on it.

Needs python3-onnx: `/usr/bin/python3 tests/onnx/fold/make_fold.py`.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
NAN = float("nan")


def const(name, values, dtype):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(values, dtype)))


def save(name, nodes, inputs, outputs):
    g = helper.make_graph(nodes, name, inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))


def main():
    a, b = [NAN, 1.0, 2.0, NAN], [0.0, NAN, 3.0, NAN]
    vi = lambda n, t, s: helper.make_tensor_value_info(n, t, s)
    f4 = lambda n: vi(n, TensorProto.FLOAT, [4])
    save("max_min_nan",
         [const("a", a, np.float32), const("b", b, np.float32),
          helper.make_node("Max", ["a", "b"], ["folded_max"]),
          helper.make_node("Max", ["a_in", "b"], ["run_max"]),
          helper.make_node("Min", ["a", "b"], ["folded_min"]),
          helper.make_node("Min", ["a_in", "b"], ["run_min"])],
         [f4("a_in")], [f4("folded_max"), f4("run_max"), f4("folded_min"), f4("run_min")])
    save("div_int_zero",
         [const("n", [6, 7, 8], np.int64), const("d", [2, 0, 1], np.int64),
          helper.make_node("Div", ["n", "d"], ["q"]), helper.make_node("Add", ["x", "q"], ["y"])],
         [vi("x", TensorProto.INT64, [3])], [vi("y", TensorProto.INT64, [3])])


if __name__ == "__main__":
    main()
