#!/usr/bin/env python3
"""PyTorch's side of `dpc bench`: the same model, step and timing on the same cores.

  /usr/bin/python3 bench/torch_train.py --model mlp --batch 128 --threads 1 [--inference]

Models, as in examples/ (and torchvision's `resnet18` and `mobilenet_v2` with 10 classes on
3x32x32 images, in train mode: bench/resnet_train): `mlp` is fashion_mlp.graph (784-512-512-10, ReLU, mean softmax cross
entropy); `cnn` is fashion_cnn.graph (conv 3x3 32, max pool 2, conv 3x3 64, max pool 2, fc 128,
fc 10); `transformer` is transformer_block.graph (one encoder block over 28 rows of 28 pixels,
trained with Adam as the example is). A training step is forward, backward and SGD with momentum 0.9 (what the examples
minimise with); --inference times the forward pass under torch.no_grad(). Data is random and
fixed, as in `dpc bench`: only the arithmetic is timed. Prints the median, fastest and 90th
percentile step and samples/s at the median, in the format of `dpc bench`.

Run it with Debian's python (python3-torch, installed by bench/setup), with the thread count
pinned for PyTorch and for the BLAS beneath it (bench/run does both): PyTorch's "1 thread"
otherwise still runs an OpenBLAS pool of its own beside it (see shared/anchors/README.md).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def mlp(gen):
    def he(shape):
        return torch.randn(shape, generator=gen) * (2.0 / shape[0]) ** 0.5

    ps = [he((784, 512)), torch.zeros(512), he((512, 512)), torch.zeros(512),
          he((512, 10)), torch.zeros(10)]
    ps = [p.requires_grad_() for p in ps]

    def forward(x):
        w1, b1, w2, b2, w3, b3 = ps
        h1 = torch.relu(x @ w1 + b1)
        h2 = torch.relu(h1 @ w2 + b2)
        return h2 @ w3 + b3

    return ps, forward


def cnn(gen):
    def he(shape, fan_in):
        return torch.randn(shape, generator=gen) * (2.0 / fan_in) ** 0.5

    ps = [he((32, 1, 3, 3), 9), torch.zeros(32), he((64, 32, 3, 3), 288), torch.zeros(64),
          he((3136, 128), 3136), torch.zeros(128), he((128, 10), 128), torch.zeros(10)]
    ps = [p.requires_grad_() for p in ps]

    def forward(x):
        c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b = ps
        a = x.reshape(-1, 1, 28, 28)
        a = F.max_pool2d(torch.relu(F.conv2d(a, c1w, c1b, padding=1)), 2)
        a = F.max_pool2d(torch.relu(F.conv2d(a, c2w, c2b, padding=1)), 2)
        h = torch.relu(a.flatten(1) @ f1w + f1b)
        return h @ f2w + f2b

    return ps, forward


def transformer(gen):
    """examples/transformer_block.graph: rows of 28 pixels projected to 64, learned positions,
    4-head self-attention and a GELU MLP (128), each with a residual and post-norm, mean over the
    rows, a linear classifier."""
    def xav(shape):
        bound = (6.0 / (shape[0] + shape[1])) ** 0.5
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound

    ps = [xav((28, 64)), torch.zeros(64), torch.randn((28, 64), generator=gen) * 0.02,
          xav((64, 64)), xav((64, 64)), xav((64, 64)), xav((64, 64)), torch.ones(64),
          torch.zeros(64), xav((64, 128)), torch.zeros(128), xav((128, 64)), torch.zeros(64),
          torch.ones(64), torch.zeros(64), xav((64, 10)), torch.zeros(10)]
    ps = [p.requires_grad_() for p in ps]

    def forward(x):
        (ew, eb, pos, wq, wk, wv, wo, g1, b1, m1, mb1, m2, mb2, g2, b2, hw, hb) = ps
        n = x.shape[0]
        h0 = x.reshape(n, 28, 28) @ ew + eb + pos

        def heads(t):
            return t.reshape(n, 28, 4, 16).transpose(1, 2)

        q, k, v = heads(h0 @ wq), heads(h0 @ wk), heads(h0 @ wv)
        ctx = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v
        merged = ctx.transpose(1, 2).reshape(n, 28, 64)
        h1 = F.layer_norm(h0 + merged @ wo, (64,), g1, b1)
        h2 = F.layer_norm(h1 + F.gelu(h1 @ m1 + mb1) @ m2 + mb2, (64,), g2, b2)
        return h2.mean(dim=1) @ hw + hb

    return ps, forward


def vision(name):
    """torchvision's network with 10 classes on 3x32x32 images, in train mode (batch norm
    computing its batch statistics), as bench/resnet_train trains it; dpc trains the same
    architecture exported in eval mode (bench/torchvision_export.py: batch norm folded)."""
    def make(gen):
        import torchvision
        torch.manual_seed(17)
        net = getattr(torchvision.models, name)(weights=None, num_classes=10).train()
        return list(net.parameters()), net
    return make


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn", "transformer", "resnet18", "mobilenet_v2"],
                    default="mlp")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--inference", action="store_true")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(0)
    ps, forward = {"mlp": mlp, "cnn": cnn, "transformer": transformer,
                   "resnet18": vision("resnet18"),
                   "mobilenet_v2": vision("mobilenet_v2")}[a.model](gen)
    # the optimizer each example minimises with
    opt = (torch.optim.Adam(ps, lr=0.001) if a.model == "transformer"
           else torch.optim.SGD(ps, lr=0.01, momentum=0.9))
    images = a.model in ("resnet18", "mobilenet_v2")
    x = torch.rand((a.batch, 3, 32, 32) if images else (a.batch, 784), generator=gen)
    y = torch.randint(0, 10, (a.batch,), generator=gen)

    def step():
        if a.inference:
            with torch.no_grad():
                forward(x)
            return
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    med = statistics.median(times)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    what = "inference" if a.inference else "training step"
    blas = os.environ.get("OPENBLAS_CORETYPE", "(auto: its best for this CPU)")
    print(f"pytorch {torch.__version__} {a.model} {what}, batch {a.batch}, torch threads "
          f"{a.threads}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}, "
          f"OPENBLAS_CORETYPE={blas}")
    print(f"step: median {med * 1e3:.3f} ms, fastest {times[0] * 1e3:.3f} ms, "
          f"p90 {p90 * 1e3:.3f} ms ({a.steps} steps after {a.warmup} warm-up)")
    print(f"{a.batch / med:.0f} samples/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
