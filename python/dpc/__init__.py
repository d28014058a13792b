"""dpc from Python: compile, run and train models with NumPy arrays in and out.

    import numpy as np, dpc
    net = dpc.load("examples/fashion_mlp.graph")
    out = net.run({"x": np.zeros((8, 784), np.float32)})      # {"logits": array (8, 10)}
    plan = net.plan(devices="cpu:2", strategy="data")        # predicted figures per device
    best = net.choose(devices="cpu:4")[0]["strategy"]       # what --strategy auto picks
    losses = net.train(steps=20, batch=64, devices="cpu:2")  # [(step, loss), ...]
    net.compile("mlp.dpx", batch=32)
    with dpc.Artifact("mlp.dpx") as a:
        out = a.run({"x": np.zeros((32, 784), np.float32)})

A thin layer of ctypes over the C libraries (libdpc: include/dpc/compiler.h and train.h;
libdpcrt: include/dpc/dpc.h); no compiled extension. The libraries are found in $DPC_LIB_DIR, in
a build/ folder beside this package's source tree, or where the system keeps libraries. Errors
raise dpc.Error with the library's message.
"""
import ctypes as c
import json
import math
import os
import tempfile

import numpy as np

from . import _lib

__all__ = ["Error", "load", "Net", "Artifact", "version"]

_c = None
_rt = None


def _compiler():
    global _c
    if _c is None:
        _c = _lib.compiler()
    return _c


def _runtime():
    global _rt
    if _rt is None:
        _rt = _lib.runtime()
    return _rt


class Error(Exception):
    """A failure reported by dpc: `status` is the dpc_status code, the text its message."""

    def __init__(self, text, status=0):
        super().__init__(text)
        self.status = status


class _Message:
    def __init__(self):
        self.lib = _compiler()
        self.ptr = self.lib.dpc_message_new()
        if not self.ptr:
            raise MemoryError("dpc: out of memory")

    def fail(self, status):
        text = self.lib.dpc_message_text(self.ptr).decode("utf-8", "replace")
        raise Error(text or "dpc error %d" % status, status)

    def __del__(self):
        if getattr(self, "ptr", None):
            self.lib.dpc_message_free(self.ptr)
            self.ptr = None


def version():
    """The version of the libdpc in use, e.g. "0.4.0"."""
    return _compiler().dpc_compiler_version().decode()


def _b(s):
    return None if s is None else str(s).encode()


def _elem_of(dtype):
    name = np.dtype(dtype).name
    if name not in _lib.ELEMS:
        raise Error("dpc: arrays of %s are not supported (float32, float16, float64, int32, "
                    "int64, bool)" % name)
    return _lib.ELEMS.index(name)


def _arrays(feeds):
    """A dict of name -> array as a C array of dpc_array, and what keeps its memory alive."""
    keep = []
    arr = (_lib.Array * max(len(feeds), 1))()
    for i, (name, value) in enumerate(feeds.items()):
        a = np.ascontiguousarray(value)
        if a.ndim > _lib.MAX_RANK:
            raise Error("dpc: '%s' has %d dimensions, more than %d" % (name, a.ndim,
                                                                       _lib.MAX_RANK))
        keep.append(a)
        nb = _b(name)
        keep.append(nb)
        arr[i].name = nb
        arr[i].elem = _elem_of(a.dtype)
        arr[i].rank = a.ndim
        for k, d in enumerate(a.shape):
            arr[i].dims[k] = d
        arr[i].data = a.ctypes.data
        arr[i].bytes = a.nbytes
    return arr, keep


def _to_numpy(a):
    dtype = np.dtype(_lib.ELEMS[a.elem] or "uint16")
    shape = tuple(a.dims[k] for k in range(a.rank))
    buf = c.string_at(a.data, a.bytes) if a.bytes else b""
    return np.frombuffer(buf, dtype=dtype).reshape(shape).copy()


def _build(backend=None):
    b = _lib.BuildOpts()
    b.size = c.sizeof(b)
    b.backend = _b(backend)
    return b


def load(path, loss=None, batched=False):
    """Load a model (.graph or .onnx). `loss` gives a model without one (ONNX) an objective on
    its first output ("softmax_cross_entropy" or "mse"); `batched` makes an ONNX model exported
    at a fixed batch take any batch."""
    return Net(path, loss=loss, batched=batched)


class Net:
    """A model loaded for compiling, running and training."""

    def __init__(self, path, loss=None, batched=False):
        self._lib = _compiler()
        o = _lib.LoadOpts()
        o.size = c.sizeof(o)
        o.batched = bool(batched)
        o.loss = _b(loss)
        m = _Message()
        ptr = c.c_void_p()
        st = self._lib.dpc_net_load(_b(path), c.byref(o), c.byref(ptr), m.ptr)
        if st:
            m.fail(st)
        self._ptr = ptr
        self.path = path

    @property
    def name(self):
        return self._lib.dpc_net_name(self._ptr).decode()

    def close(self):
        if getattr(self, "_ptr", None):
            self._lib.dpc_net_free(self._ptr)
            self._ptr = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, inputs, backend="llvm", training=False):
        """One forward pass on a dict of input arrays (params may be given too, to override
        them); returns a dict of output arrays. backend "ref" runs the reference kernels."""
        arr, keep = _arrays(inputs)
        outs = c.POINTER(_lib.Array)()
        n = c.c_uint()
        b = _build(backend)
        m = _Message()
        st = self._lib.dpc_net_infer(self._ptr, c.byref(b), arr, len(inputs), bool(training),
                                     c.byref(outs), c.byref(n), m.ptr)
        del keep
        if st:
            m.fail(st)
        try:
            return {outs[i].name.decode(): _to_numpy(outs[i]) for i in range(n.value)}
        finally:
            self._lib.dpc_arrays_free(outs, n.value)

    def compile(self, path, batch=0, train=False, devices=None, batch_sizes=(), backend=None):
        """Compile to an artifact at `path` (see `dpc compile`): the inference plan for `batch`
        (default 1, or 64 with train), more for batch_sizes, the training step with train."""
        o = _lib.CompileOpts()
        o.size = c.sizeof(o)
        o.build = _build(backend)
        o.batch = int(batch)
        sizes = (c.c_uint32 * max(len(batch_sizes), 1))(*batch_sizes)
        o.batch_sizes = sizes
        o.n_batch_sizes = len(batch_sizes)
        o.devices = _b(devices)
        o.train = bool(train)
        m = _Message()
        st = self._lib.dpc_net_compile(self._ptr, c.byref(o), _b(path), m.ptr)
        if st:
            m.fail(st)

    def plan(self, devices="cpu", strategy=None, batch=64, memory_limit=0, dot=None):
        """The plan of a training step over the devices, as `dpc plan` makes it, with the cost
        model's predictions: {"devices": [{"name", "kernels", "collectives", "compute_ms",
        "comm_ms", "memory_bytes", "comm_bytes"}, ...], "predicted_step_ms",
        "comm_bytes_per_step"}. strategy: the text form ("model", "hybrid:mp=2",
        "pipeline:stages=2,microbatches=4"); dot: also write the placement as Graphviz there."""
        lib = self._lib
        m = _Message()
        n = c.c_uint32()
        st = lib.dpc_devices_count(_b(devices), c.byref(n), m.ptr)
        if st:
            m.fail(st)
        a = _lib.StrategyArgs()
        lib.dpc_strategy_args_init(c.byref(a))
        a.text = _b(strategy)
        a.devices = n.value
        a.batch = int(batch)
        a.memory_limit = int(memory_limit)
        parsed = c.create_string_buffer(512)  # a dpc_strategy, which is smaller
        err = c.create_string_buffer(512)  # a dpc_strategy_error, likewise
        st = lib.dpc_strategy_parse(c.byref(a), parsed, err, m.ptr)
        if st:
            m.fail(st)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.json")
            o = _lib.PlanOpts()
            o.size = c.sizeof(o)
            o.batch = int(batch)
            o.devices = _b(devices)
            o.strategy = c.cast(parsed, c.c_void_p)
            o.memory_limit = int(memory_limit)
            o.dot_path = _b(dot)
            o.json_path = _b(path)
            rep = c.c_void_p()
            st = lib.dpc_net_plan(self._ptr, c.byref(o), c.byref(rep), m.ptr)
            if rep:
                lib.dpc_plan_report_free(rep)
            if st:
                m.fail(st)
            with open(path) as f:
                return json.load(f)

    def choose(self, devices="cpu", batch=64, memory_limit=0, measure=0, profile=False):
        """The strategies `--strategy auto` tries on these devices, fastest predicted first:
        [{"strategy", "step_ms", "fits", "planned", "max_memory_bytes", "comm_bytes",
        "bubble_pct", "reason", "measured_ms"}, ...]; the first is the choice when its "fits" is
        true. Its "strategy" is the text form train(strategy=...) and plan(strategy=...) take.
        measure=N runs the N fastest predicted and chooses the fastest measured (moved first;
        "measured_ms" is None for those not run). profile=True first times the model's kernels
        at the batches the candidates run and predicts with the cost model corrected by them
        (seconds more, closer predictions)."""
        lib = self._lib
        o = _lib.AutoOpts()
        o.size = c.sizeof(o)
        o.batch = int(batch)
        o.devices = _b(devices)
        o.memory_limit = int(memory_limit)
        o.measure_top = int(measure)
        o.profile = bool(profile)
        rep = c.POINTER(_lib.AutoReport)()
        m = _Message()
        st = lib.dpc_net_plan_auto(self._ptr, c.byref(o), c.byref(rep), m.ptr)
        try:
            out = []
            if rep:
                r = rep.contents
                for i in range(r.n_candidates):
                    k = r.candidates[i]
                    out.append({"strategy": k.strategy.decode(), "step_ms": k.step_ms,
                                "planned": k.planned, "fits": k.fits,
                                "max_memory_bytes": k.max_memory_bytes,
                                "comm_bytes": k.comm_bytes, "bubble_pct": k.bubble_pct,
                                "reason": k.reason.decode(),
                                "measured_ms": k.measured_ms if k.measured else None})
                if r.best < r.n_candidates and r.best:
                    out.insert(0, out.pop(r.best))
        finally:
            if rep:
                lib.dpc_auto_report_free(rep)
        if st:
            m.fail(st)
        return out

    def train(self, steps=0, epochs=1, batch=64, devices=None, strategy=None, data=None,
              test_data=None, seed=0, shuffle=True, backend=None, threads=0,
              checkpoint=None, checkpoint_every=0, resume=None, save=None, log=None,
              lr=None, optimizer=None, on_step=None, on_epoch=None):
        """Train as `dpc train` does and return the per-step losses, [(step, loss), ...].

        data: "fashion-mnist" (default), a folder of IDX files, "X.npy,Y.npy", or a pair of
        arrays (inputs [n, ...] float, labels [n] int) that the trainer reads through a data
        source. strategy: the text form, e.g. "pipeline:stages=2,microbatches=4" (devices must
        hold its devices). on_step(step, loss) and on_epoch(dict) are called as it goes."""
        lib = self._lib
        o = _lib.TrainerOpts()
        lib.dpc_trainer_defaults(c.byref(o))
        keep = []
        sources = []
        if isinstance(data, tuple):
            o.train_source = c.pointer(self._source(data, "train", keep))
            sources.append(o.train_source)
            if isinstance(test_data, tuple):
                o.test_source = c.pointer(self._source(test_data, "test", keep))
        else:
            o.data = _b(data)
            o.test_data = _b(test_data)
        o.epochs = int(epochs)
        o.steps = int(steps)
        o.batch = int(batch)
        o.seed = int(seed)
        o.seed_given = True
        o.shuffle = bool(shuffle)
        o.build = _build(backend)
        o.threads = int(threads)
        o.devices = _b(devices)
        o.strategy = _b(strategy)
        o.checkpoint_path = _b(checkpoint)
        o.checkpoint_every = int(checkpoint_every)
        o.resume_path = _b(resume)
        o.save_path = _b(save)
        o.log_path = _b(log)
        o.optimizer = _b(optimizer)
        o.lr = math.nan if lr is None else float(lr)
        losses = []

        def step_cb(user, s):
            losses.append((s.contents.step, s.contents.loss))
            if on_step:
                on_step(s.contents.step, s.contents.loss)

        def epoch_cb(user, e):
            if on_epoch:
                v = e.contents
                on_epoch({f: getattr(v, f) for f, _ in _lib.TrainEpoch._fields_})

        o.on_step = _lib.STEP_FN(step_cb)
        o.on_epoch = _lib.EPOCH_FN(epoch_cb)
        m = _Message()
        st = lib.dpc_trainer_run(self._ptr, c.byref(o), m.ptr)
        del keep, sources
        if st:
            m.fail(st)
        return losses

    @staticmethod
    def _source(pair, name, keep):
        x, y = pair
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.ascontiguousarray(y, dtype=np.int64)
        if len(x) != len(y):
            raise Error("dpc: %d inputs but %d labels" % (len(x), len(y)))
        per = int(np.prod(x.shape[1:])) if x.ndim > 1 else 1
        flat = x.reshape(len(x), per)

        def fill(user, idx, n, xp, yp, err, err_len):
            try:
                ids = np.ctypeslib.as_array(idx, shape=(n,))
                np.ctypeslib.as_array(xp, shape=(n, per))[:] = flat[ids]
                np.ctypeslib.as_array(yp, shape=(n,))[:] = y[ids]
                return 0
            except Exception as e:  # reported by the trainer, naming the source
                c.memmove(err, str(e).encode()[: max(err_len - 1, 0)] + b"\0",
                          min(len(str(e).encode()) + 1, err_len))
                return 1

        s = _lib.DataSource()
        s.size = c.sizeof(s)
        nb = _b("%s arrays" % name)
        s.name = nb
        s.samples = len(x)
        s.rank = max(x.ndim - 1, 1)
        for k, d in enumerate(x.shape[1:] or (1,)):
            s.dims[k] = d
        s.classes = int(y.max()) + 1 if len(y) else 0
        fn = _lib.FILL_FN(fill)
        s.fill = fn
        keep.extend([x, y, flat, nb, fn, s])
        return s


class Artifact:
    """A compiled artifact (.dpx) run through libdpcrt, without LLVM: one runner of its plans."""

    def __init__(self, path, mode="infer", devices=None, threads=0, rows=0):
        self._lib = _runtime()
        err = c.create_string_buffer(1024)
        self._model = c.c_void_p()
        st = self._lib.dpc_model_load(_b(path), c.byref(self._model), err, len(err))
        if st:
            raise Error(err.value.decode("utf-8", "replace"), st)
        o = _lib.RunnerOpts()
        o.size = c.sizeof(o)
        o.mode = {"infer": 0, "train": 1, "eval": 2}[mode]
        o.threads = int(threads)
        o.devices = _b(devices)
        o.rows = int(rows)
        self._devices = o.devices
        self._runner = c.c_void_p()
        st = self._lib.dpc_runner_open(self._model, c.byref(o), c.byref(self._runner), err,
                                       len(err))
        if st:
            self._lib.dpc_model_free(self._model)
            self._model = None
            raise Error(err.value.decode("utf-8", "replace"), st)

    def _infos(self, role):
        out = []
        for i in range(self._lib.dpc_runner_count(self._runner, role)):
            t = _lib.TensorInfo()
            t.size = c.sizeof(t)
            if self._lib.dpc_runner_info(self._runner, role, i, c.byref(t)) == 0:
                shape = tuple(t.dims[k] for k in range(t.rank))
                out.append((t.name.decode(), np.dtype(_lib.ELEMS[t.elem] or "uint16"), shape))
        return out

    def run(self, inputs):
        """Run the plan once on a dict of input arrays; returns a dict of output arrays."""
        lib = self._lib
        keep = []
        for name, dtype, shape in self._infos(0):
            if name not in inputs:
                raise Error("dpc: input '%s' %s %s not given" % (name, dtype, shape))
            a = np.ascontiguousarray(inputs[name], dtype=dtype)
            if a.shape != shape:
                raise Error("dpc: input '%s' is %s, the plan takes %s" % (name, a.shape, shape))
            keep.append(a)
            if lib.dpc_runner_bind(self._runner, _b(name), a.ctypes.data, a.nbytes):
                raise Error(lib.dpc_runner_error(self._runner).decode())
        outs = {}
        for name, dtype, shape in self._infos(1):
            outs[name] = np.empty(shape, dtype)
            if lib.dpc_runner_bind(self._runner, _b(name), outs[name].ctypes.data,
                                   outs[name].nbytes):
                raise Error(lib.dpc_runner_error(self._runner).decode())
        st = lib.dpc_runner_run(self._runner)
        for name in list(outs) + [n for n, _, _ in self._infos(0)]:
            lib.dpc_runner_bind(self._runner, _b(name), None, 0)
        if st:
            raise Error(lib.dpc_runner_error(self._runner).decode(), st)
        return outs

    def close(self):
        if getattr(self, "_runner", None):
            self._lib.dpc_runner_free(self._runner)
            self._runner = None
        if getattr(self, "_model", None):
            self._lib.dpc_model_free(self._model)
            self._model = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
