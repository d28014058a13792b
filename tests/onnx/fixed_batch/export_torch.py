#!/usr/bin/python3
"""Export one small network with torch.onnx.export twice, as people export it: once without
dynamic_axes (torch_fixed.onnx: the batch of the example input, 32, baked into the input and
into every shape the tracer saw) and once with dynamic_axes={'input': {0: 'batch'}}
(torch_dynamic.onnx), both from the same module with the same weights. The cli.fixedbatch test
trains the fixed export at other batches, on one device and data parallel, against the dynamic
one's losses.

The network uses the idioms that bake the batch in: x.view(x.size(0), -1) and a reshape with
the batch spelled out through x.shape[0].

Needs Debian's python3-torch (1.13) and python3-onnx; run from anywhere:
    /usr/bin/python3 tests/onnx/fixed_batch/export_torch.py
The output is deterministic (a fixed seed, one thread).
"""
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
B = 32


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc1 = nn.Linear(144, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):  # x: [N, 1, 8, 8]
        h = torch.relu(self.conv(x))
        h = h.view(h.size(0), -1)
        h = torch.relu(self.fc1(h)).reshape(x.shape[0], 4, 4)
        return self.fc2(torch.flatten(h, 1))


def main():
    torch.manual_seed(7)
    torch.set_num_threads(1)
    net = Net().eval()
    example = torch.randn(B, 1, 8, 8)
    common = dict(opset_version=13, input_names=["input"], output_names=["logits"],
                  do_constant_folding=True)
    torch.onnx.export(net, example, os.path.join(HERE, "torch_fixed.onnx"), **common)
    torch.onnx.export(net, example, os.path.join(HERE, "torch_dynamic.onnx"),
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **common)


if __name__ == "__main__":
    main()
