#!/usr/bin/python3
"""Export torchvision's ResNet-18 and MobileNetV2, and the MLP of examples/fashion_mlp.graph, to
ONNX for bench/ort_compare.

Random weights from a fixed seed, eval mode (batch norm folded by the exporter's constant
folding where it can), ONNX opset 13, input 1x3x224x224 with the batch dimension dynamic so the
same file runs at batch 1 and 8. The files are made here, never committed: the weights would be
tens of megabytes of noise. Run with Debian's python (python3-torch, python3-torchvision):

  /usr/bin/python3 bench/torchvision_export.py OUT_DIR

writes OUT_DIR/resnet18.onnx, OUT_DIR/mobilenet_v2.onnx, their 10-class versions at 1x3x32x32
(resnet18_c10.onnx, mobilenet_v2_c10.onnx, trained by bench/resnet_train) and
OUT_DIR/fashion_mlp.onnx (784 -> 512 -> 512 -> 10 with ReLUs, input 1x784, batch dynamic), and
skips a file that exists.
"""
import os
import sys

import torch
import torchvision


def export(name, make, out_dir, shape=(1, 3, 224, 224)):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        print(path, "(exists)")
        return
    torch.manual_seed(17)
    model = make().eval()
    x = torch.randn(*shape)
    tmp = path + ".tmp"
    torch.onnx.export(model, x, tmp, opset_version=13, input_names=["input"],
                      output_names=["output"], do_constant_folding=True,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    os.replace(tmp, path)
    print(path)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/bench_models"
    os.makedirs(out_dir, exist_ok=True)
    export("resnet18", lambda: torchvision.models.resnet18(weights=None), out_dir)
    export("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None), out_dir)
    # the training comparison's networks (bench/resnet_train): 10 classes at 3x32x32
    export("resnet18_c10", lambda: torchvision.models.resnet18(weights=None, num_classes=10),
           out_dir, (1, 3, 32, 32))
    export("mobilenet_v2_c10", lambda: torchvision.models.mobilenet_v2(weights=None, num_classes=10),
           out_dir, (1, 3, 32, 32))
    L, R = torch.nn.Linear, torch.nn.ReLU
    export("fashion_mlp", lambda: torch.nn.Sequential(L(784, 512), R(), L(512, 512), R(), L(512, 10)),
           out_dir, (1, 784))


if __name__ == "__main__":
    main()
