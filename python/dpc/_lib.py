"""The C libraries and their structs, as ctypes sees them (include/dpc/*.h).

Each Structure below mirrors a public struct field for field; every option struct starts with
its size, so the library reads only the fields this module knows.
"""
import ctypes
import ctypes.util
import os

c = ctypes
_P = c.c_void_p
_S = c.c_char_p

MAX_RANK = 8

# dpc_elem -> numpy dtype name (include/dpc/dpc.h)
ELEMS = ["float32", "float16", None, "float64", "int32", "int64", "bool"]


def _candidates(name):
    """Where libNAME.so may be: $DPC_LIB_DIR, a build folder beside this package, the system."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    out = []
    for d in os.environ.get("DPC_LIB_DIR", "").split(os.pathsep):
        if d:
            out.append(os.path.join(d, "lib%s.so" % name))
    sub = {"dpc": "driver", "dpcrt": "runtime"}[name]
    out.append(os.path.join(root, "build", sub, "lib%s.so" % name))
    # installed: PREFIX/lib/python3/dist-packages/dpc or PREFIX/lib/pythonX/site-packages/dpc
    for up in (2, 3, 4):
        base = here
        for _ in range(up):
            base = os.path.dirname(base)
        out.append(os.path.join(base, "lib%s.so" % name))
    found = ctypes.util.find_library(name)
    if found:
        out.append(found)
    return out


def _open(name):
    tried = []
    for path in _candidates(name):
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return c.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise OSError("dpc: cannot find lib%s.so; set DPC_LIB_DIR to the folder that has it "
                  "(tried: %s)" % (name, ", ".join(tried)))


class Array(c.Structure):
    _fields_ = [("name", _S), ("elem", c.c_int), ("rank", c.c_uint),
                ("dims", c.c_int64 * MAX_RANK), ("data", _P), ("bytes", c.c_size_t)]


LLVM_FN = c.CFUNCTYPE(None, _P, _S, _S)
DUMP_FN = c.CFUNCTYPE(None, _P, _S, _S)


class BuildOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("backend", _S), ("on_llvm", LLVM_FN),
                ("verify_each", c.c_bool), ("print_after", _S), ("on_dump", DUMP_FN),
                ("user", _P), ("cache_dir", _S), ("cuda_arch", _S), ("precision", _S)]


class LoadOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("batched", c.c_bool), ("loss", _S),
                ("known", c.POINTER(Array)), ("n_known", c.c_uint)]


class CompileOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("build", BuildOpts), ("batch", c.c_uint32),
                ("batch_sizes", c.POINTER(c.c_uint32)), ("n_batch_sizes", c.c_uint),
                ("dims", c.POINTER(_S)), ("n_dims", c.c_uint), ("devices", _S),
                ("train", c.c_bool), ("total_steps", c.c_uint64), ("cpu", _S),
                ("features", _S), ("cancel", c.POINTER(c.c_int))]


FILL_FN = c.CFUNCTYPE(c.c_int, _P, c.POINTER(c.c_uint64), c.c_uint32, c.POINTER(c.c_float),
                      c.POINTER(c.c_int64), c.c_char_p, c.c_size_t)


class DataSource(c.Structure):
    _fields_ = [("size", c.c_size_t), ("name", _S), ("samples", c.c_uint64),
                ("rank", c.c_uint), ("dims", c.c_int64 * MAX_RANK), ("classes", c.c_int64),
                ("fill", FILL_FN), ("user", _P)]


class TrainStep(c.Structure):
    _fields_ = [("step", c.c_uint64), ("epoch", c.c_uint64), ("batch", c.c_uint64),
                ("batches", c.c_uint64), ("loss", c.c_double), ("lr", c.c_double),
                ("samples_per_s", c.c_double), ("batch_size", c.c_uint32)]


class TrainEpoch(c.Structure):
    _fields_ = [("epoch", c.c_uint64), ("step", c.c_uint64), ("train_loss", c.c_double),
                ("seconds", c.c_double), ("samples_per_s", c.c_double),
                ("evaluated", c.c_bool), ("test_loss", c.c_double),
                ("test_accuracy", c.c_double), ("test_samples", c.c_uint64),
                ("max_staleness", c.c_uint64)]


class TrainStop(c.Structure):
    _fields_ = [("step", c.c_uint64), ("epoch", c.c_uint64), ("batch", c.c_uint64),
                ("batches", c.c_uint64), ("checkpoint", _S)]


NOTE_FN = c.CFUNCTYPE(None, _P, _S)
STEP_FN = c.CFUNCTYPE(None, _P, c.POINTER(TrainStep))
EPOCH_FN = c.CFUNCTYPE(None, _P, c.POINTER(TrainEpoch))
STOP_FN = c.CFUNCTYPE(None, _P, c.POINTER(TrainStop))


class TrainerOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("artifact", _S), ("data", _S), ("test_data", _S),
                ("train_source", c.POINTER(DataSource)), ("test_source", c.POINTER(DataSource)),
                ("epochs", c.c_uint64), ("steps", c.c_uint64), ("batch", c.c_uint32),
                ("seed", c.c_uint64), ("seed_given", c.c_bool), ("shuffle", c.c_bool),
                ("optimizer", _S), ("lr", c.c_double), ("momentum", c.c_double),
                ("weight_decay", c.c_double), ("lr_schedule", _S), ("init_path", _S),
                ("save_path", _S), ("checkpoint_path", _S), ("checkpoint_every", c.c_uint64),
                ("resume_path", _S), ("log_path", _S), ("trace_path", _S),
                ("build", BuildOpts), ("threads", c.c_uint32), ("devices", _S),
                ("strategy", _S), ("typed_strategy", _P), ("shares", _S),
                ("device_memory", c.c_uint64), ("timeout_s", c.c_double),
                ("cancel", c.POINTER(c.c_int)), ("stop_checkpoint_path", _S),
                ("on_start", NOTE_FN), ("on_note", NOTE_FN), ("on_step", STEP_FN),
                ("on_epoch", EPOCH_FN), ("on_stop", STOP_FN), ("user", _P),
                ("pretend_hosts", c.c_uint32), ("mpi_comm", _P)]


class StrategyArgs(c.Structure):
    _fields_ = [("text", _S), ("mp", c.c_int64), ("stages", c.c_int64),
                ("microbatches", c.c_int64), ("dp", c.c_int64), ("accumulate", c.c_int64),
                ("staleness", c.c_int64), ("period", c.c_int64), ("schedule", c.c_int),
                ("placement", _S), ("async_", c.c_bool), ("shares", _S),
                ("memory_limit", c.c_uint64), ("devices", c.c_uint32), ("batch", c.c_uint64),
                ("kinds", c.c_uint32)]


class PlanOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("batch", c.c_uint32), ("devices", _S),
                ("strategy", _P), ("memory_limit", c.c_uint64), ("profile", c.c_bool),
                ("measure", c.c_bool), ("dot_path", _S), ("dot_full", c.c_bool),
                ("json_path", _S)]


class AutoOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("batch", c.c_uint32), ("devices", _S),
                ("memory_limit", c.c_uint64), ("measure_top", c.c_uint32),
                ("measure_steps", c.c_uint32), ("profile", c.c_bool)]


class AutoCandidate(c.Structure):
    _fields_ = [("strategy", c.c_char * 96), ("kind", c.c_int), ("planned", c.c_bool),
                ("fits", c.c_bool), ("step_ms", c.c_double), ("samples_per_s", c.c_double),
                ("max_memory_bytes", c.c_uint64), ("max_memory_device", c.c_char * 32),
                ("comm_bytes", c.c_double), ("bubble_pct", c.c_double),
                ("busiest_device", c.c_char * 32), ("busiest_compute_ms", c.c_double),
                ("busiest_comm_ms", c.c_double), ("reason", c.c_char * 320),
                ("measured", c.c_bool), ("measured_ms", c.c_double), ("error_pct", c.c_double),
                ("measure_note", c.c_char * 200)]


class AutoReport(c.Structure):
    _fields_ = [("candidates", c.POINTER(AutoCandidate)), ("n_candidates", c.c_uint32),
                ("best", c.c_uint32), ("devices", c.c_uint32), ("batch", c.c_uint32),
                ("seconds", c.c_double), ("n_measured", c.c_uint32),
                ("by_measurement", c.c_bool)]


class RunnerOpts(c.Structure):
    _fields_ = [("size", c.c_size_t), ("mode", c.c_int), ("share", _P), ("threads", c.c_uint),
                ("devices", _S), ("log", _P), ("log_user", _P), ("cancel", c.POINTER(c.c_int)),
                ("step", c.c_uint64), ("rows", c.c_uint64)]


class TensorInfo(c.Structure):
    _fields_ = [("size", c.c_size_t), ("name", _S), ("elem", c.c_int), ("rank", c.c_uint),
                ("dims", c.c_int64 * MAX_RANK), ("bytes", c.c_size_t)]


def _sig(lib, name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)


def compiler():
    """libdpc with its functions' signatures."""
    lib = _open("dpc")
    i, pp = c.c_int, c.POINTER
    _sig(lib, "dpc_compiler_version", _S)
    _sig(lib, "dpc_message_new", _P)
    _sig(lib, "dpc_message_free", None, _P)
    _sig(lib, "dpc_message_text", _S, _P)
    _sig(lib, "dpc_message_status", i, _P)
    _sig(lib, "dpc_arrays_free", None, pp(Array), c.c_uint)
    _sig(lib, "dpc_net_load", i, _S, pp(LoadOpts), pp(_P), _P)
    _sig(lib, "dpc_net_free", None, _P)
    _sig(lib, "dpc_net_name", _S, _P)
    _sig(lib, "dpc_net_infer", i, _P, pp(BuildOpts), pp(Array), c.c_uint, c.c_bool,
         pp(pp(Array)), pp(c.c_uint), _P)
    _sig(lib, "dpc_net_compile", i, _P, pp(CompileOpts), _S, _P)
    _sig(lib, "dpc_trainer_defaults", None, pp(TrainerOpts))
    _sig(lib, "dpc_strategy_args_init", None, pp(StrategyArgs))
    _sig(lib, "dpc_strategy_parse", i, pp(StrategyArgs), _P, _P, _P)
    _sig(lib, "dpc_devices_count", i, _S, pp(c.c_uint32), _P)
    _sig(lib, "dpc_net_plan", i, _P, pp(PlanOpts), pp(_P), _P)
    _sig(lib, "dpc_plan_report_free", None, _P)
    _sig(lib, "dpc_net_plan_auto", i, _P, pp(AutoOpts), pp(pp(AutoReport)), _P)
    _sig(lib, "dpc_auto_report_free", None, pp(AutoReport))
    _sig(lib, "dpc_trainer_run", i, _P, pp(TrainerOpts), _P)
    return lib


def runtime():
    """libdpcrt with its functions' signatures."""
    lib = _open("dpcrt")
    i, pp = c.c_int, c.POINTER
    _sig(lib, "dpc_model_load", i, _S, pp(_P), c.c_char_p, c.c_size_t)
    _sig(lib, "dpc_model_free", None, _P)
    _sig(lib, "dpc_runner_open", i, _P, pp(RunnerOpts), pp(_P), c.c_char_p, c.c_size_t)
    _sig(lib, "dpc_runner_free", None, _P)
    _sig(lib, "dpc_runner_error", _S, _P)
    _sig(lib, "dpc_runner_count", c.c_uint, _P, i)
    _sig(lib, "dpc_runner_info", i, _P, i, c.c_uint, pp(TensorInfo))
    _sig(lib, "dpc_runner_bind", i, _P, _S, _P, c.c_size_t)
    _sig(lib, "dpc_runner_run", i, _P)
    _sig(lib, "dpc_runner_read", i, _P, _S, _P, c.c_size_t)
    return lib
