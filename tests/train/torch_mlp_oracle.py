#!/usr/bin/env python3
"""PyTorch oracle for dpc's training: per-step losses of examples/fashion_mlp.graph.

What it computes
  The MLP of examples/fashion_mlp.graph (784 -> 512 -> 512 -> 10, ReLU, mean softmax
  cross-entropy), written with explicit tensors the way dpc computes it: x @ w + b with w of
  shape [in, out] (not nn.Linear's [out, in]). The initial parameters are dpc's initializers
  (he_normal(seed=1) w1, he_normal(seed=2) w2, xavier_uniform(seed=3) w3, zero biases), taken
  from the NumPy mirror in tests/cli/gen_mlp_case.py, imported by path so there is one mirror
  of dpc's generator.
  Data: the first 320 images of Fashion-MNIST's training set in file order (Debian package
  dataset-fashion-mnist, IDX files under /usr/share/datasets/fashion-mnist), pixels / 255 as
  f32 [784], labels as class indices. Batch size 32, no shuffling: step k uses images
  [32k, 32k+32), 10 steps.
  Two runs from the same initial parameters, with torch.optim.SGD semantics:
    sgd       lr 0.1, momentum 0
    momentum  lr 0.1, momentum 0.9, dampening 0, no Nesterov, no weight decay
  The loss recorded for step k is batch k's loss from step k's forward pass, before that
  step's update.
  Computed in float32, single-threaded; the same runs in float64 are printed to stderr with
  the largest relative difference between the f32 and f64 loss sequences.

How to run (regenerates tests/train/torch_mlp_losses.txt)
  apt-get install -y python3-torch python3-numpy dataset-fashion-mnist
  /usr/bin/python3 tests/train/torch_mlp_oracle.py          # Debian's python, not pyenv's

  With Debian's python3-torch 1.13.1+dfsg-4 the matmuls go to libblas.so.3, which on these
  machines is the netlib reference BLAS (libblas3), not OpenBLAS, so OPENBLAS_NUM_THREADS /
  OPENBLAS_CORETYPE have no effect; they are set anyway. The kernel choice does not matter
  for correctness: the C test compares with a relative tolerance.

The test that compares dpc against these numbers reads only the committed text file; it needs
no Python.
"""
import gzip
import importlib.util
import os
import struct
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = "/usr/share/datasets/fashion-mnist"
OUT = os.path.join(HERE, "torch_mlp_losses.txt")

N_IMAGES, BATCH, LR = 320, 32, 0.1
RUNS = (("sgd", 0.0), ("momentum", 0.9))


def load_gen():
    path = os.path.join(ROOT, "tests", "cli", "gen_mlp_case.py")
    spec = importlib.util.spec_from_file_location("gen_mlp_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_idx(path, magic, n):
    with gzip.open(path, "rb") as f:
        got = struct.unpack(">I", f.read(4))[0]
        if got != magic:
            sys.exit(f"{path}: magic {got}, expected {magic}")
        ndim = magic & 0xFF
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        if dims[0] < n:
            sys.exit(f"{path}: {dims[0]} items, need {n}")
        per = int(np.prod(dims[1:])) if ndim > 1 else 1
        buf = f.read(n * per)
    return np.frombuffer(buf, dtype=np.uint8).reshape((n,) + tuple(dims[1:]))


def load_data():
    imgs = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"), 2051, N_IMAGES)
    labels = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"), 2049, N_IMAGES)
    x = (imgs.reshape(N_IMAGES, 784).astype(np.float32) / np.float32(255.0)).astype(np.float32)
    return x, labels.astype(np.int64)


def init_params(gen):
    return [
        gen.he_normal(1, 784, 512), np.zeros(512, np.float32),
        gen.he_normal(2, 512, 512), np.zeros(512, np.float32),
        gen.xavier_uniform(3, 512, 10), np.zeros(10, np.float32),
    ]


def train(params0, x, y, momentum, dtype):
    ps = [torch.tensor(p, dtype=dtype, requires_grad=True) for p in params0]
    w1, b1, w2, b2, w3, b3 = ps
    opt = torch.optim.SGD(ps, lr=LR, momentum=momentum, dampening=0, nesterov=False,
                          weight_decay=0)
    xt = torch.tensor(x, dtype=dtype)  # x is f32 already; f64 run widens it exactly
    yt = torch.tensor(y)
    losses = []
    for k in range(N_IMAGES // BATCH):
        xb, yb = xt[k * BATCH:(k + 1) * BATCH], yt[k * BATCH:(k + 1) * BATCH]
        h1 = torch.relu(xb @ w1 + b1)
        h2 = torch.relu(h1 @ w2 + b2)
        logits = h2 @ w3 + b3
        loss = torch.nn.functional.cross_entropy(logits, yb, reduction="mean")
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses


def main():
    torch.set_num_threads(1)
    gen = load_gen()
    params0 = init_params(gen)
    x, y = load_data()

    res = {}
    for name, mom in RUNS:
        res[name, "f32"] = train(params0, x, y, mom, torch.float32)
        res[name, "f64"] = train(params0, x, y, mom, torch.float64)

    worst = 0.0
    for name, _ in RUNS:
        for k, (a, b) in enumerate(zip(res[name, "f32"], res[name, "f64"])):
            rel = abs(a - b) / abs(b)
            worst = max(worst, rel)
            print(f"{name} {k} f32 {a:.9g} f64 {b:.17g} rel {rel:.3g}", file=sys.stderr)
    print(f"max relative difference f32 vs f64: {worst:.3g}", file=sys.stderr)

    with open(OUT, "w") as f:
        f.write("# Per-step training losses of examples/fashion_mlp.graph computed by PyTorch (float32).\n")
        f.write(f"# torch {torch.__version__} (Debian python3-torch), numpy {np.__version__}, 1 thread.\n")
        f.write("# Initial params: dpc's initializers (NumPy mirror tests/cli/gen_mlp_case.py).\n")
        f.write("# Data: first 320 Fashion-MNIST training images in file order, /255, batch 32, no shuffle.\n")
        f.write("# Runs: sgd = SGD lr 0.1; momentum = SGD lr 0.1 momentum 0.9 (torch.optim.SGD semantics).\n")
        f.write("# Loss of step k = mean cross-entropy of batch k before step k's update.\n")
        f.write(f"# f32 vs f64 max relative difference of these losses: {worst:.3g}\n")
        f.write("# Generated by: /usr/bin/python3 tests/train/torch_mlp_oracle.py\n")
        for name, _ in RUNS:
            for k, loss in enumerate(res[name, "f32"]):
                f.write(f"{name} {k} {loss:.9g}\n")
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
