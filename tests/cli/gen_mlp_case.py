#!/usr/bin/env python3
"""Expected output of `dpc run examples/fashion_mlp.graph` on a small batch, computed with NumPy.

dpc initialises the MLP's parameters from their initializers (he_normal(seed=1), ...), using its
counter-based generator (runtime/rng.h) and PyTorch's fan conventions (runtime/init.c). This script
re-implements both in NumPy, independently of dpc's C code, builds a batch of 8 inputs, runs the
forward pass in float64 and writes:

  tests/cli/mlp/x.npy              the batch (f32 [8, 784])
  tests/cli/mlp/expect_logits.npy  the logits (f32 [8, 10])

Run with Debian's python3-numpy:  /usr/bin/python3 tests/cli/gen_mlp_case.py
"""
import os

import numpy as np

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(x):
    """SplitMix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & M64
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & M64
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & M64
        return x ^ (x >> np.uint64(31))


def uniform(seed, idx):
    bits = mix64(mix64(np.uint64(seed)) ^ idx.astype(np.uint64))
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def normal(seed, n):
    i = np.arange(n, dtype=np.uint64)
    u1 = 1.0 - uniform(seed, 2 * i)
    u2 = uniform(seed, 2 * i + np.uint64(1))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


def he_normal(seed, fan_in, fan_out):
    std = np.sqrt(2.0) / np.sqrt(fan_in)
    return (std * normal(seed, fan_in * fan_out)).reshape(fan_in, fan_out).astype(np.float32)


def xavier_uniform(seed, fan_in, fan_out):
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    u = uniform(seed, np.arange(fan_in * fan_out, dtype=np.uint64))
    return (-bound + 2 * bound * u).reshape(fan_in, fan_out).astype(np.float32)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp")
    os.makedirs(here, exist_ok=True)
    rng = np.random.default_rng(2026)
    x = rng.random((8, 784), dtype=np.float64).astype(np.float32)  # pixels in [0, 1)
    w1, w2, w3 = he_normal(1, 784, 512), he_normal(2, 512, 512), xavier_uniform(3, 512, 10)
    # biases are zeros
    h1 = np.maximum(x.astype(np.float64) @ w1.astype(np.float64), 0)
    h2 = np.maximum(h1 @ w2.astype(np.float64), 0)
    logits = h2 @ w3.astype(np.float64)
    np.save(os.path.join(here, "x.npy"), x)
    np.save(os.path.join(here, "expect_logits.npy"), logits.astype(np.float32))
    print("wrote", here, "logits[0] =", logits[0])


if __name__ == "__main__":
    main()
