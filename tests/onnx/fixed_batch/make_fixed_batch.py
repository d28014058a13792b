#!/usr/bin/python3
"""Make tests/onnx/fixed_batch: a model as torch.onnx.export writes it without dynamic_axes
(every input and every Reshape shape fixed at the batch of the example input, 32), the same
model with a dynamic batch, a model whose Reshape folds the batch into another dimension, and
data to train them on (small; committed).

These models are written with the onnx package, op for op and name for name as torch 1.13
exports this module (opset 13), so the malformed variants can be made too; export_torch.py
beside this script makes real torch exports (torch_fixed.onnx, torch_dynamic.onnx) of a module
of the same shape:

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3)
            self.fc1 = nn.Linear(144, 16)
            self.fc2 = nn.Linear(16, 10)
        def forward(self, x):                       # x: [32, 1, 8, 8]
            h = torch.relu(self.conv(x)).view(32, -1)
            h = torch.relu(self.fc1(h)).reshape(32, 4, 4)
            return self.fc2(torch.flatten(h, 1))    # a Linear on a 2-D input: MatMul + Add

model.onnx       that export: input f32[32, 1, 8, 8]; Conv, Relu, Reshape to the Constant
                 [32, -1], Gemm, Relu, Reshape to the initializer [32, 4, 4], Flatten, MatMul,
                 Add; output f32[32, 10]
batch1.onnx      the same export from an example of one sample (torch.randn(1, 1, 8, 8)):
                 input f32[1, 1, 8, 8], Reshape shapes [1, -1] and [1, 4, 4]
dynamic.onnx     the same weights exported with dynamic_axes={'input': {0: 'batch'}}: the
                 first Reshape's shape computed by Shape -> Gather -> Unsqueeze -> Concat,
                 the second [-1, 4, 4]
mixed_batch.onnx f32[32, 144] reshaped to [16, 288]: the batch folded into another dimension
moved_batch.onnx f32[32, 64] reshaped to [2, 32, 32]: 32 is not where the batch was, so it
                 cannot be told from a dimension that happens to be 32
x.npy, y.npy     256 samples f32[256, 1, 8, 8] and their classes i64[256] (from a fixed
                 random linear teacher, so the loss falls)
test_data_set_0  one batch of 32 through model.onnx, the output computed by NumPy

Run with Debian's python: `/usr/bin/python3 tests/onnx/fixed_batch/make_fixed_batch.py`. The
output is deterministic (fixed seed).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
B = 32


def weights(rng):
    def uniform(shape, fan_in):
        k = 1 / np.sqrt(fan_in)
        return rng.uniform(-k, k, shape).astype(np.float32)

    return {
        "conv.weight": uniform((4, 1, 3, 3), 9),
        "conv.bias": uniform((4,), 9),
        "fc1.weight": uniform((16, 144), 144),
        "fc1.bias": uniform((16,), 144),
        # torch stores a MatMul's weight transposed, under a generated name
        "onnx::MatMul_21": uniform((16, 10), 16),
        "fc2.bias": uniform((10,), 16),
    }


def i64(v):
    return numpy_helper.from_array(np.array(v, np.int64))


def net(w, dynamic, b=B):
    batch = "batch" if dynamic else b
    inits = [numpy_helper.from_array(a, n) for n, a in w.items()]
    nodes = [
        helper.make_node("Conv", ["input", "conv.weight", "conv.bias"], ["/conv/Conv_output_0"],
                         name="/conv/Conv", dilations=[1, 1], group=1, kernel_shape=[3, 3],
                         pads=[0, 0, 0, 0], strides=[1, 1]),
        helper.make_node("Relu", ["/conv/Conv_output_0"], ["/Relu_output_0"], name="/Relu"),
    ]
    if dynamic:
        nodes += [
            helper.make_node("Shape", ["/Relu_output_0"], ["/Shape_output_0"], name="/Shape"),
            helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant",
                             value=i64(0)),
            helper.make_node("Gather", ["/Shape_output_0", "/Constant_output_0"],
                             ["/Gather_output_0"], name="/Gather", axis=0),
            helper.make_node("Constant", [], ["/Constant_1_output_0"], name="/Constant_1",
                             value=i64([0])),
            helper.make_node("Unsqueeze", ["/Gather_output_0", "/Constant_1_output_0"],
                             ["/Unsqueeze_output_0"], name="/Unsqueeze"),
            helper.make_node("Constant", [], ["/Constant_2_output_0"], name="/Constant_2",
                             value=i64([-1])),
            helper.make_node("Concat", ["/Unsqueeze_output_0", "/Constant_2_output_0"],
                             ["/Concat_output_0"], name="/Concat", axis=0),
        ]
        shape1 = "/Concat_output_0"
        inits.append(numpy_helper.from_array(np.array([-1, 4, 4], np.int64), "onnx::Reshape_20"))
    else:
        nodes.append(helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant",
                                      value=i64([b, -1])))
        shape1 = "/Constant_output_0"
        inits.append(numpy_helper.from_array(np.array([b, 4, 4], np.int64), "onnx::Reshape_20"))
    nodes += [
        helper.make_node("Reshape", ["/Relu_output_0", shape1], ["/Reshape_output_0"],
                         name="/Reshape"),
        helper.make_node("Gemm", ["/Reshape_output_0", "fc1.weight", "fc1.bias"],
                         ["/fc1/Gemm_output_0"], name="/fc1/Gemm", alpha=1.0, beta=1.0,
                         transB=1),
        helper.make_node("Relu", ["/fc1/Gemm_output_0"], ["/Relu_1_output_0"], name="/Relu_1"),
        helper.make_node("Reshape", ["/Relu_1_output_0", "onnx::Reshape_20"],
                         ["/Reshape_1_output_0"], name="/Reshape_1"),
        helper.make_node("Flatten", ["/Reshape_1_output_0"], ["/Flatten_output_0"],
                         name="/Flatten", axis=1),
        helper.make_node("MatMul", ["/Flatten_output_0", "onnx::MatMul_21"],
                         ["/fc2/MatMul_output_0"], name="/fc2/MatMul"),
        helper.make_node("Add", ["fc2.bias", "/fc2/MatMul_output_0"], ["output"],
                         name="/fc2/Add"),
    ]
    g = helper.make_graph(
        nodes, "torch_jit",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 1, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 10])],
        initializer=inits)
    return model(g)


def model(g):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="pytorch", producer_version="1.13.0")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def reshaped(cols, target):
    """f32[B, cols] reshaped to a constant target that does not keep the batch in front."""
    nodes = [helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant",
                              value=i64(target)),
             helper.make_node("Reshape", ["input", "/Constant_output_0"], ["/Reshape_output_0"],
                              name="/Reshape"),
             helper.make_node("Relu", ["/Reshape_output_0"], ["output"], name="/Relu")]
    g = helper.make_graph(
        nodes, "torch_jit",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [B, cols])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, target)])
    return model(g)


def forward(w, x):
    n = x.shape[0]
    k = w["conv.weight"]
    conv = np.zeros((n, 4, 6, 6), np.float64)
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", x[:, :, i:i + 6, j:j + 6], k[:, :, i, j])
    conv += w["conv.bias"][None, :, None, None]
    h = np.maximum(conv, 0).reshape(n, -1)
    h = np.maximum(h @ w["fc1.weight"].T + w["fc1.bias"], 0)
    return (h @ w["onnx::MatMul_21"] + w["fc2.bias"]).astype(np.float32)


def main():
    rng = np.random.default_rng(16)
    w = weights(rng)
    onnx.save(net(w, False), os.path.join(HERE, "model.onnx"))
    onnx.save(net(w, True), os.path.join(HERE, "dynamic.onnx"))
    onnx.save(net(w, False, 1), os.path.join(HERE, "batch1.onnx"))
    onnx.save(reshaped(144, [B // 2, 288]), os.path.join(HERE, "mixed_batch.onnx"))
    onnx.save(reshaped(64, [2, B, B]), os.path.join(HERE, "moved_batch.onnx"))
    x = rng.standard_normal((256, 1, 8, 8)).astype(np.float32)
    teacher = rng.standard_normal((64, 10))
    y = np.argmax(x.reshape(256, 64) @ teacher, axis=1).astype(np.int64)
    np.save(os.path.join(HERE, "x.npy"), x)
    np.save(os.path.join(HERE, "y.npy"), y)
    sd = os.path.join(HERE, "test_data_set_0")
    os.makedirs(sd, exist_ok=True)
    onnx.save_tensor(numpy_helper.from_array(x[:B], "input"), os.path.join(sd, "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(forward(w, x[:B]), "output"),
                     os.path.join(sd, "output_0.pb"))
    for f in sorted(os.listdir(HERE)):
        p = os.path.join(HERE, f)
        if os.path.isfile(p):
            print("%-20s %7d bytes" % (f, os.path.getsize(p)))


if __name__ == "__main__":
    main()
