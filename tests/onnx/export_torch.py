#!/usr/bin/python3
"""Export small PyTorch reference models to ONNX for dpc's ONNX importer tests.

What it makes (under tests/onnx/torch/, next to this script):

  <name>/model.onnx                  the exported graph (opset 13, eval mode)
  <name>/test_data_set_N/input_0.pb  ONNX TensorProto inputs (float32), named
  <name>/test_data_set_N/output_0.pb after the graph input/output they bind to;
                                     outputs were computed by PyTorch on the
                                     same inputs (ONNX backend-test layout)

  for name in: mlp, lenet, resnet_block, resnet_block_folded,
               transformer_layer, dynamic_batch (two data sets: batch 3 and 7),
               lstm

  mlp_train/model.onnx   Linear(20,32)-ReLU-Linear(32,5), initial weights,
                         dynamic batch, input 'input', output 'logits'
  mlp_train/x.npy        float32 [320,20] standard normal
  mlp_train/y.npy        int64 [320], labels 0..4
  mlp_train/losses.txt   PyTorch's loss for each of 10 SGD steps ('%.9g' each)

  The C test trains the same model and compares its losses with losses.txt:

    dpc train tests/onnx/mlp_train/model.onnx \\
        --loss softmax_cross_entropy \\
        --data tests/onnx/mlp_train/x.npy,tests/onnx/mlp_train/y.npy \\
        --batch 32 --no-shuffle --steps 10 --optimizer sgd --lr 0.1 --momentum 0

How to run (from the repository root):

    apt-get install -y python3-torch python3-onnx
    /usr/bin/python3 tests/onnx/export_torch.py

It needs Debian's python3-torch (made with 1.13) and python3-onnx (1.12); use
/usr/bin/python3, not a virtualenv/pyenv python without torch.  The output is
deterministic: every model is built under its own torch.manual_seed, data come
from seeded generators, and torch runs single-threaded.
"""

import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

OPSET = 13
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "torch")

# The op set the dpc importer is meant to cover; anything else is reported.
SUPPORTED_OPS = set("""
Add Sub Mul Div Pow Sqrt Exp Log Erf Neg Abs Relu LeakyRelu Sigmoid Tanh Clip
Softmax LogSoftmax Gemm MatMul Conv MaxPool AveragePool GlobalAveragePool
BatchNormalization LayerNormalization Flatten Reshape Transpose Concat Split
Slice Squeeze Unsqueeze Gather Shape Constant Identity Cast ReduceMean ReduceSum
ReduceMax Dropout Expand Where Equal Less Greater Not LSTM ConstantOfShape Range
Min Max
""".split())


def size_str(path):
    return "%8d  %s" % (os.path.getsize(path), os.path.relpath(path, HERE))


def write_pb(path, arr, name):
    tensor = onnx.numpy_helper.from_array(np.ascontiguousarray(arr), name=name)
    with open(path, "wb") as f:
        f.write(tensor.SerializeToString())


def report(model_path):
    """Print op types, I/O names and shapes, and out-of-list ops of a model."""
    m = onnx.load(model_path)
    ops = sorted({n.op_type for n in m.graph.node})
    print("  opset:", [(o.domain or "ai.onnx", o.version) for o in m.opset_import])
    print("  ops:", " ".join(ops))
    extra = [o for o in ops if o not in SUPPORTED_OPS]
    if extra:
        print("  ops OUTSIDE the supported list:", " ".join(extra))
    inits = {i.name for i in m.graph.initializer}

    def dims(vi):
        return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]

    for vi in m.graph.input:
        if vi.name not in inits:
            print("  input  %-10s %s" % (vi.name, dims(vi)))
    for vi in m.graph.output:
        print("  output %-10s %s" % (vi.name, dims(vi)))
    print("  nodes: %d, initializers: %d" % (len(m.graph.node), len(inits)))
    return m


def export(name, model, inputs_per_set, **kwargs):
    """Export `model` (eval mode) and write one test_data_set per input list.

    inputs_per_set: list of tuples of float32 tensors; the first tuple is the
    example used for tracing.
    """
    model.eval()
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, inputs_per_set[0], path, opset_version=OPSET,
                      **kwargs)
    print("== %s" % name)
    m = report(path)
    inits = {i.name for i in m.graph.initializer}
    in_names = [vi.name for vi in m.graph.input if vi.name not in inits]
    out_names = [vi.name for vi in m.graph.output]
    files = [path]
    for k, inputs in enumerate(inputs_per_set):
        with torch.no_grad():
            outs = model(*inputs)
        if isinstance(outs, torch.Tensor):
            outs = (outs,)
        assert len(inputs) == len(in_names) and len(outs) == len(out_names)
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        for i, (t, n) in enumerate(zip(inputs, in_names)):
            files.append(os.path.join(sd, "input_%d.pb" % i))
            write_pb(files[-1], t.detach().numpy().astype(np.float32), n)
        for i, (t, n) in enumerate(zip(outs, out_names)):
            files.append(os.path.join(sd, "output_%d.pb" % i))
            write_pb(files[-1], t.detach().numpy().astype(np.float32), n)
        print("  data set %d: in %s -> out %s" % (
            k, [list(t.shape) for t in inputs], [list(t.shape) for t in outs]))
    for f in files:
        print(size_str(f))


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def mlp(i, h1, h2, o):
    return nn.Sequential(nn.Linear(i, h1), nn.ReLU(), nn.Linear(h1, h2),
                         nn.ReLU(), nn.Linear(h2, o))


class BasicBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + x)


def resnet_block():
    torch.manual_seed(3)
    block = BasicBlock(16)
    # Non-trivial running statistics and affine parameters, so the eval-mode
    # BatchNormalization (or its folded form) really changes the numbers.
    with torch.no_grad():
        for bn in (block.bn1, block.bn2):
            bn.running_mean.copy_(torch.randn(16) * 0.5)
            bn.running_var.copy_(torch.rand(16) * 1.5 + 0.5)
            bn.weight.copy_(torch.rand(16) + 0.5)
            bn.bias.copy_(torch.randn(16) * 0.2)
    return block


class LSTMOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=8, hidden_size=16, batch_first=False)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


def export_mlp_train():
    """Training oracle: initial model, data, and PyTorch's per-step losses."""
    name = "mlp_train"
    d = os.path.join(HERE, name)  # beside torch/: it is not a backend test directory
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(10)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    model.eval()  # no dropout/BN here, so eval and train forwards are equal
    path = os.path.join(d, "model.onnx")
    # Exported BEFORE training: this is the starting point for dpc train.
    torch.onnx.export(model, (randn(32, 20),), path, opset_version=OPSET,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"},
                                    "logits": {0: "batch"}})
    print("== %s" % name)
    report(path)

    rng = np.random.default_rng(1234)
    x = rng.standard_normal((320, 20)).astype(np.float32)
    y = rng.integers(0, 5, size=320).astype(np.int64)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), y)

    # Plain float32 SGD, batches of 32 in file order, loss before each update.
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    losses = []
    for k in range(10):
        xb, yb = xt[32 * k:32 * k + 32], yt[32 * k:32 * k + 32]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(os.path.join(d, "losses.txt"), "w") as f:
        for v in losses:
            f.write("%.9g\n" % v)
    print("  losses: first %.9g last %.9g" % (losses[0], losses[-1]))
    for f in ("model.onnx", "x.npy", "y.npy", "losses.txt"):
        print(size_str(os.path.join(d, f)))


def main():
    torch.set_num_threads(1)
    print("torch %s, onnx %s, opset %d" % (torch.__version__, onnx.__version__,
                                           OPSET))

    # mlp: the simplest case, Gemm + Relu with weight initializers.
    torch.manual_seed(1)
    export("mlp", mlp(784, 128, 64, 10), [(randn(4, 784),)])

    # lenet: Conv (with and without padding), MaxPool, Flatten into Gemm.
    torch.manual_seed(2)
    lenet = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))
    export("lenet", lenet, [(randn(2, 1, 28, 28),)])

    # resnet_block: eval-mode BatchNormalization kept as a node, plus a
    # residual Add.  With the default training=TrainingMode.EVAL, torch 1.13
    # fuses Conv+BatchNorm in an eval peephole pass whether or not constant
    # folding is on, so this variant is exported with TrainingMode.PRESERVE
    # (the module is in eval mode, so BN still uses its running statistics)
    # and do_constant_folding=False.  The "_folded" variant is the same block
    # with the defaults (EVAL, folding on): BN is merged into the Conv
    # weights and biases and no BatchNormalization node is left.
    block = resnet_block()
    torch.manual_seed(30)
    x = randn(2, 16, 8, 8)
    export("resnet_block", block, [(x,)], do_constant_folding=False,
           training=torch.onnx.TrainingMode.PRESERVE)
    export("resnet_block_folded", block, [(x,)])

    # transformer_layer: attention (MatMul/Softmax/Transpose/Reshape chains),
    # LayerNorm and the feed-forward block, as torch 1.13 decomposes them.
    torch.manual_seed(4)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                       dropout=0.0, batch_first=True)
    # By default in_proj_bias/out_proj.bias are zero and the LayerNorms are
    # ones/zeros; randomize them so biases and norm affines are really tested
    # (with the defaults torch also dedups the equal tensors into Identity
    # nodes).
    with torch.no_grad():
        for p in (layer.self_attn.in_proj_bias, layer.self_attn.out_proj.bias,
                  layer.norm1.bias, layer.norm2.bias):
            p.copy_(torch.randn(p.shape) * 0.1)
        for p in (layer.norm1.weight, layer.norm2.weight):
            p.copy_(torch.rand(p.shape) + 0.5)
    layer.eval()
    x = randn(2, 5, 32)
    # In eval mode under no_grad, torch 1.13 takes the fused fast path
    # (torch._transformer_encoder_layer_fwd), which cannot be exported.  The
    # export traces with grad enabled and parameters that require grad, so
    # the plain path is traced.  The reference output below comes from the
    # fast path (export() runs under no_grad); check it against the plain
    # path, which is what the ONNX graph encodes.
    with torch.no_grad():
        fast = layer(x)
    plain = layer(x).detach()
    diff = (fast - plain).abs().max().item()
    print("transformer fast path vs plain path: max |diff| = %.3g" % diff)
    assert diff < 1e-5
    export("transformer_layer", layer, [(x,)])

    # dynamic_batch: the batch dimension is symbolic ('batch'); the two data
    # sets use batch sizes different from each other and from the trace.
    torch.manual_seed(5)
    export("dynamic_batch", mlp(784, 128, 64, 10),
           [(randn(3, 784),), (randn(7, 784),)],
           input_names=["input"], output_names=["output"],
           dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})

    # lstm: a single-layer unidirectional LSTM over [seq, batch, feature].
    torch.manual_seed(6)
    export("lstm", LSTMOut(), [(randn(5, 2, 8),)])

    export_mlp_train()

    total = 0
    for root, _, files in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("total size of %s: %d bytes" % (os.path.relpath(OUT, HERE), total))


if __name__ == "__main__":
    sys.exit(main())
