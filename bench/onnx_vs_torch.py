#!/usr/bin/python3
"""PyTorch's side of docs/benchmarks.md "ONNX models: inference": the models of
tests/onnx/export_torch.py, eval mode, no_grad, at the batch their export fixed (128 for the
dynamic-batch MLP), median time of one forward pass over 300 runs after 50 warm-up runs.
dpc's side: `dpc bench tests/onnx/torch/NAME/model.onnx --inference --batch B`.

Run with Debian's python: `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3
bench/onnx_vs_torch.py THREADS` (the machines force OpenBLAS onto its AVX2 kernel otherwise;
see shared/anchors). THREADS: PyTorch's intra-op threads (OpenBLAS gets as many).
"""
import importlib.util
import os
import sys
import time

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
os.environ["OMP_NUM_THREADS"] = str(threads)

import torch  # noqa: E402

torch.set_num_threads(threads)
HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "export_torch", os.path.join(HERE, "..", "tests", "onnx", "export_torch.py"))


def median_ms(model, x, runs=300):
    with torch.no_grad():
        for _ in range(50):
            model(x)
        ts = []
        for _ in range(runs):
            t = time.perf_counter()
            model(x)
            ts.append(time.perf_counter() - t)
    ts.sort()
    return 1000 * ts[len(ts) // 2]


def main():
    nn = torch.nn
    torch.manual_seed(0)
    models = {
        "dynamic_batch": (nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64),
                                        nn.ReLU(), nn.Linear(64, 10)), (128, 784)),
        "lenet": (nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                nn.Linear(84, 10)), (2, 1, 28, 28)),
        "transformer_layer": (nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                         batch_first=True), (2, 5, 32)),
        "lstm": (nn.LSTM(8, 16), (5, 2, 8)),
    }
    for name, (m, shape) in models.items():
        m.eval()
        ms = median_ms(m, torch.randn(*shape))
        print("%-18s batch %3d  %.3f ms  %.0f samples/s" % (name, shape[0] if name != "lstm"
                                                             else shape[1], ms,
                                                             (shape[0] if name != "lstm"
                                                              else shape[1]) / ms * 1000))


if __name__ == "__main__":
    main()
