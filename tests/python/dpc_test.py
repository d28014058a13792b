"""The Python module against the command line: fashion_mlp's forward pass equals `dpc run`, 20
training steps equal `dpc train`'s losses, training from NumPy arrays (a data source) equals
training from the same arrays as .npy files, and an artifact compiled from Python runs through
libdpcrt to the same outputs.

    DPC_LIB_DIR=BUILD/driver:BUILD/runtime python3 dpc_test.py SOURCE_DIR BUILD/tools/dpc/dpc WORK
"""
import json
import os
import subprocess
import sys

import numpy as np

src, dpc_bin, work = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(src, "python"))
import dpc  # noqa: E402

os.makedirs(work, exist_ok=True)
graph = os.path.join(src, "examples", "fashion_mlp.graph")
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails += 1


def close(a, b, rel=1e-6):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rel * np.maximum(np.abs(b), 1e-30)))


def dpc_cli(*args):
    r = subprocess.run([dpc_bin] + list(args), capture_output=True, text=True)
    if r.returncode:
        sys.exit("dpc %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def log_losses(path):
    out = []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "step" in rec and "epoch_end" not in rec:
                out.append((rec["step"], rec["loss"]))
    return out


check(dpc.version().startswith("0."), "version %s" % dpc.version())

# forward: the same input through the module and through dpc run
rng = np.random.default_rng(7)
x = rng.random((8, 784), dtype=np.float32)
np.save(os.path.join(work, "x.npy"), x)
outdir = os.path.join(work, "run_out")
dpc_cli("run", graph, "--input", "x=" + os.path.join(work, "x.npy"), "--output-dir", outdir)
net = dpc.load(graph)
got = net.run({"x": x})
check(set(got) == {n[:-4] for n in os.listdir(outdir)}, "outputs named as dpc run's: %s" %
      sorted(got))
for name, value in got.items():
    want = np.load(os.path.join(outdir, name + ".npy"))
    check(close(value, want), "forward '%s' %s equals dpc run's" % (name, value.shape))

# 20 training steps, data parallel over two devices, against dpc train's step log
logp = os.path.join(work, "train.jsonl")
dpc_cli("train", graph, "--steps", "20", "--devices", "cpu:2", "--log", logp, "--quiet")
want = log_losses(logp)
losses = net.train(steps=20, devices="cpu:2")
check(len(losses) == 20 and len(want) == 20, "20 steps each (%d, %d)" % (len(losses), len(want)))
check(all(a[0] == b[0] for a, b in zip(losses, want)), "the same step numbers")
check(close([l for _, l in losses], [l for _, l in want]),
      "20 losses equal dpc train's within 1e-6 (first %.6f, last %.6f)" %
      (losses[0][1], losses[-1][1]))

# a data source: NumPy arrays in memory against the same arrays as .npy files
xs = rng.random((640, 784), dtype=np.float32)
ys = rng.integers(0, 10, 640).astype(np.int64)
np.save(os.path.join(work, "xs.npy"), xs)
np.save(os.path.join(work, "ys.npy"), ys)
logp = os.path.join(work, "npy.jsonl")
dpc_cli("train", graph, "--steps", "8", "--batch", "32", "--log", logp, "--quiet", "--data",
        os.path.join(work, "xs.npy") + "," + os.path.join(work, "ys.npy"))
want = log_losses(logp)
losses = dpc.load(graph).train(steps=8, batch=32, data=(xs, ys))
check(close([l for _, l in losses], [l for _, l in want]),
      "training from arrays equals training from the same .npy files (8 steps)")

# plans: the same figures dpc plan --json writes (data parallel: both devices hold a replica;
# model parallel: wherever METIS puts the nodes, by this machine's calibration, as dpc plan does)
for strategy in ("data", "model"):
    plan = net.plan(devices="cpu:2", strategy=strategy, batch=64)
    jp = os.path.join(work, "plan_%s.json" % strategy)
    dpc_cli("plan", graph, "--devices", "cpu:2", "--strategy", strategy, "--batch", "64", "--json",
            jp)
    with open(jp) as f:
        want = json.load(f)
    if strategy == "data":
        check(len(plan["devices"]) == 2 and all(d["kernels"] > 0 for d in plan["devices"]),
              "data plan: 2 devices with kernels (%s)" % [d["kernels"] for d in plan["devices"]])
    check([(d["name"], d["kernels"], d["memory_bytes"]) for d in plan["devices"]] ==
          [(d["name"], d["kernels"], d["memory_bytes"]) for d in want["devices"]] and
          close(plan["predicted_step_ms"], want["predicted_step_ms"], 1e-9),
          "%s plan equals dpc plan --json (predicted step %.3f ms)" %
          (strategy, plan["predicted_step_ms"]))
try:
    net.plan(devices="cpu:2", strategy="pipeline:stages=3")
    check(False, "a pipeline of 3 stages on 2 devices raises dpc.Error")
except dpc.Error as e:
    check("3" in str(e), "a pipeline of 3 stages on 2 devices raises dpc.Error: %s" % e)

# the automatic choice: the same ranking dpc plan --strategy auto --explain prints
ranked = net.choose(devices="cpu:2")
out = dpc_cli("plan", graph, "--devices", "cpu:2", "--strategy", "auto", "--explain")
# (a strategy's text has commas of its own: the choice runs up to ", predicted")
chosen = out.split("strategy auto: ", 1)[1].split(", predicted", 1)[0] if "strategy auto: " in out else None
check(len(ranked) >= 4 and ranked[0]["fits"] and ranked[0]["strategy"] == chosen,
      "choose: %d candidates, %s first, as dpc plan --strategy auto says (%s)" %
      (len(ranked), ranked[0]["strategy"] if ranked else None, chosen))
steps = [r["step_ms"] for r in ranked if r["planned"] and r["fits"]]
check(steps == sorted(steps), "choose: ranked by predicted step (%s)" %
      ", ".join("%.2f" % x for x in steps))
# with the kernels timed first: a ranking of its own, its figures from the corrected cost model
profiled = net.choose(devices="cpu:2", batch=16, profile=True)
psteps = [r["step_ms"] for r in profiled if r["planned"] and r["fits"]]
check(len(psteps) >= 3 and psteps == sorted(psteps) and all(x > 0 for x in psteps),
      "choose(profile=True): %d ranked by predicted step" % len(psteps))

# compile from Python, run through libdpcrt
dpx = os.path.join(work, "mlp.dpx")
net.compile(dpx, batch=8)
with dpc.Artifact(dpx) as a:
    out = a.run({"x": x})
for name, value in out.items():
    check(close(value, got[name], 1e-5), "artifact '%s' equals the JIT's forward pass" % name)

# errors carry the library's message
try:
    dpc.load(os.path.join(work, "missing.graph"))
    check(False, "a missing model raises dpc.Error")
except dpc.Error as e:
    check("missing.graph" in str(e), "a missing model raises dpc.Error naming it: %s" % e)

print("%d failed" % fails)
sys.exit(1 if fails else 0)
