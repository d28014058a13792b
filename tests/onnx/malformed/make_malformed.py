#!/usr/bin/python3
"""Make the malformed ONNX models of tests/onnx/malformed (small; committed).

Each NAME.onnx is a model dpc must refuse with a clear message (never crash); NAME.expect holds
a piece of that message. Needs python3-onnx: `/usr/bin/python3 tests/onnx/malformed/make_malformed.py`.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def save(name, m, expect, raw=None):
    data = raw if raw is not None else m.SerializeToString()
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(data)
    with open(os.path.join(HERE, name + ".expect"), "w") as f:
        f.write(expect + "\n")


def main():
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    ok = model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 4])],
               [vi("y", [2, 3])], [w])
    full = ok.SerializeToString()
    # cut in the middle of the initializer's bytes
    save("truncated", ok, "not an ONNX model", raw=full[: len(full) // 2])
    save("empty_file", ok, "the model has no graph", raw=b"")
    # a node reading an initializer that is not there
    save("missing_initializer",
         model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 4])],
               [vi("y", [2, 3])]),
         "input 'w' is not defined before this node")
    # two nodes reading each other's outputs
    save("cycle",
         model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
               [vi("x", [2])], [vi("a", [2])]),
         "input 'b' is not defined before this node")
    # an initializer whose byte count does not match its shape
    bad = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    bad.dims[:] = [4, 4]
    save("wrong_size",
         model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 4])],
               [vi("y", [2, 4])], [bad]),
         "has 12 values of f32, its shape needs 16")
    # absurd dimensions: a graph input of 2^50 elements per row, an initializer of 2^80
    save("absurd_input_dim",
         model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 1 << 50])],
               [vi("y", [2, 1 << 50])]),
         "has dimension 1125899906842624")
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40, 1 << 40])
    save("absurd_initializer",
         model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [2])], [vi("y", [2])],
               [huge]),
         "negative or absurd dimension")
    # a type that does not fit the op: Not on floats
    save("wrong_type",
         model([helper.make_node("Not", ["x"], ["y"])], [vi("x", [3])], [vi("y", [3])]),
         "node 0 (Not)")
    # an attribute of the wrong kind: Flatten's axis as a string
    save("attr_kind",
         model([helper.make_node("Flatten", ["x"], ["y"], axis="one")], [vi("x", [2, 3])],
               [vi("y", [2, 3])]),
         "node 0 (Flatten)")
    # a Reshape to a shape of the wrong size
    shape = numpy_helper.from_array(np.array([5, 5], np.int64), "s")
    save("reshape_size",
         model([helper.make_node("Reshape", ["x", "s"], ["y"])], [vi("x", [2, 3])],
               [vi("y", [5, 5])], [shape]),
         "cannot reshape")
    # ops dpc does not import: all named at once
    save("unsupported_ops",
         model([helper.make_node("Einsum", ["x"], ["a"], equation="ij->ij"), helper.make_node("Relu", ["a"], ["b"]),
                helper.make_node("CumProd", ["b", "b"], ["y"])], [vi("x", [2, 3])],
               [vi("y", [2, 3])]),
         "2 nodes use an op dpc does not import")
    save("opset_too_new",
         model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [3])], [vi("y", [3])],
               opset=18),
         "opset 18 is newer than dpc knows")
    save("output_never_computed",
         model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [3])], [vi("z", [3])]),
         "graph output 'z' is never computed")
    save("duplicate_output",
         model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])],
               [vi("x", [3])], [vi("y", [3])]),
         "output 'y' is defined twice")


if __name__ == "__main__":
    main()
