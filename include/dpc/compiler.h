/*
 * compiler.h — the public C API of libdpc, dpc's compiler library: load a model (.graph or
 * .onnx), run it, plan it over devices, compile it to an artifact, measure it and train it. The
 * `dpc` command, the Python module (python/dpc) and applications that compile models all call
 * this; libdpcrt (dpc.h) runs what it compiles without it.
 *
 *   #include <dpc/compiler.h>
 *   dpc_message *msg = dpc_message_new();
 *   dpc_net *net;
 *   if (dpc_net_load("model.graph", NULL, &net, msg)) {
 *     fprintf(stderr, "%s\n", dpc_message_text(msg));  // FILE:LINE:COL: error: ... and a caret
 *     ...
 *   }
 *   dpc_compile_opts co = {sizeof co, .batch = 32};
 *   if (dpc_net_compile(net, &co, "model.dpx", msg)) ...
 *   dpc_net_free(net);
 *   dpc_message_free(msg);
 *
 * The other public headers of libdpc: dpc/plan.h (devices, calibration, plans, benchmarks) and
 * dpc/train.h (the trainer). All include this one.
 *
 * Conventions (the same as dpc.h's): functions that can fail return a dpc_status (0 is success)
 * and fill the dpc_message given (NULL discards the message). The library never prints and never
 * exits. Messages describe values by meaning ("the batch size 0 must be at least 1"), never by a
 * command-line flag. Option structs begin with `size` (set it to sizeof the struct, zero the
 * rest: `dpc_compile_opts o = {sizeof o}`); a field that is zero means its default, and new
 * fields are only added at the end, so a caller compiled against an older header keeps working.
 * Nothing is global: any number of nets and messages may live at once, on any threads (one
 * object used by one thread at a time).
 */
#ifndef DPC_COMPILER_H
#define DPC_COMPILER_H

#include <dpc/dpc.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DPC_BUILDING_COMPILER) && (defined(__GNUC__) || defined(__clang__))
#define DPC_COMPILER_API __attribute__((visibility("default")))
#else
#define DPC_COMPILER_API
#endif

/* The most devices one plan spans and a device spec makes: whatever is asked beyond it is an
 * error that names it. Planning for this many takes seconds. */
#define DPC_MAX_DEVICES 256u

/* The library's version ("0.4.0"), which may differ from the header's DPC_VERSION_STRING when
 * linked against another build. */
DPC_COMPILER_API const char *dpc_compiler_version(void);
/* Whether this build has the MPI transport (runtime/transport_mpi.c, docs/distributed.md): the
 * build found MPI and DPC_MPI was on. */
DPC_COMPILER_API bool dpc_has_mpi(void);
/* Whether this build generates GPU code: the CUDA toolkit (NVRTC) was found when dpc was built,
 * so CUDA kernels are generated and compiled to PTX and CUBIN (docs/codegen.md). */
DPC_COMPILER_API bool dpc_has_cuda_codegen(void);
/* How many GPUs the CUDA driver sees, looked up at run time (the driver is never linked): 0
 * without a driver. `note` (may be NULL) gets a sentence: "no CUDA driver found (...)" or
 * "CUDA driver 13.0, 2 GPUs". */
DPC_COMPILER_API int dpc_cuda_gpus(char *note, size_t n);

/* ---- messages ---------------------------------------------------------------------------- */

/* What went wrong, kept for the caller: a status, a message, and where it applies (a file, line
 * and column with the source line for text input). Opaque; one per thread. */
typedef struct dpc_diag dpc_message;

/* GPU cuda:N measured for planning (it is opened: a fraction of a second): its name and memory,
 * the GFLOP/s of an f32 GEMM on cuBLAS (0 where cuBLAS does not load: note says why), the GB/s
 * of a copy within its memory and, for N > 0, of a copy into it from cuda:0. */
typedef struct dpc_gpu_figures {
  char name[64];
  uint64_t memory;
  double gemm_gflops, copy_gbs, peer_gbs;
  uint32_t gemm_n; /* the square GEMM timed */
  char note[256];
} dpc_gpu_figures;
DPC_COMPILER_API dpc_status dpc_gpu_measure(uint32_t gpu, dpc_gpu_figures *out, dpc_message *m);

DPC_COMPILER_API dpc_message *dpc_message_new(void);
DPC_COMPILER_API void dpc_message_free(dpc_message *m);
/* Forget the message, keeping the object. */
DPC_COMPILER_API void dpc_message_clear(dpc_message *m);
DPC_COMPILER_API dpc_status dpc_message_status(const dpc_message *m);
/* The message for a person: `FILE:LINE:COL: error: TEXT` (the parts that are known), then the
 * source line and a caret line when there is one. "" when there is no message. Valid until the
 * message changes or is freed. */
DPC_COMPILER_API const char *dpc_message_text(dpc_message *m);
/* The file the message is about, or NULL when it names none. */
DPC_COMPILER_API const char *dpc_message_file(const dpc_message *m);
/* The message alone, without the place ("" when none). */
DPC_COMPILER_API const char *dpc_message_brief(const dpc_message *m);

/* ---- values ------------------------------------------------------------------------------ */

/* A named tensor in host memory, row-major. In arrays the library returns, name and data are
 * owned by the array (dpc_arrays_free); in arrays a caller passes, they stay the caller's. */
typedef struct dpc_array {
  const char *name;
  dpc_elem elem;
  unsigned rank;
  int64_t dims[DPC_TENSOR_MAX_RANK];
  void *data;
  size_t bytes;
} dpc_array;

DPC_COMPILER_API void dpc_arrays_free(dpc_array *v, unsigned n);
/* A NumPy .npy file into a value (its name: the file's base name without .npy), and back. */
DPC_COMPILER_API dpc_status dpc_npy_load(const char *path, dpc_array *out, dpc_message *m);
DPC_COMPILER_API dpc_status dpc_npy_save(const char *path, const dpc_array *v, dpc_message *m);

/* ---- how models are compiled ----------------------------------------------------------- */

/* A pipeline's micro-batch order. */
typedef enum dpc_pipeline_schedule {
  DPC_SCHEDULE_NONE,  /* the graph's order: micro-batch after micro-batch */
  DPC_SCHEDULE_GPIPE, /* every forward, then every backward */
  DPC_SCHEDULE_1F1B   /* warm-up forwards, then one forward and one backward in turn */
} dpc_pipeline_schedule;

/* Settings every compiling call shares. */
typedef struct dpc_build_opts {
  size_t size;
  const char *backend; /* the codegen backend by name: "llvm" (compiled for this CPU), "ref"
                          (the reference kernels, nothing compiled) or "cuda" (kernels compiled
                          by NVRTC, run on the GPU cuda:0); NULL: "llvm" */
  /* NULL, or called with each generated LLVM module's text, before and after optimisation */
  void (*on_llvm)(void *user, const char *what, const char *text);
  bool verify_each;        /* the verifier after every pass */
  const char *print_after; /* pass names, comma-separated, or "all": each graph after that pass
                              goes to on_dump */
  void (*on_dump)(void *user, const char *pass, const char *text);
  void *user;            /* given to on_llvm and on_dump */
  const char *cache_dir; /* compiled kernels kept between runs: NULL for $DPC_CACHE_DIR or
                            ~/.cache/dpc, "off" for none */
  /* The cuda backend only (others refuse them): the GPU architectures compiled to CUBIN,
   * "sm_80,sm_90" for NULL (PTX of the lowest goes along for the driver to compile for any
   * other GPU); and how cuBLAS may round a matmul's inputs, "fp32" for NULL (results as the
   * CPU's), "tf32" or "bf16" (tensor cores; sums stay f32). */
  const char *cuda_arch;
  const char *precision;
} dpc_build_opts;

/* Whether a backend of that name exists in this build. */
DPC_COMPILER_API bool dpc_backend_exists(const char *name);

/* ---- models ------------------------------------------------------------------------------ */

typedef struct dpc_net dpc_net; /* a model loaded for compiling: a verified graph */

typedef struct dpc_load_opts {
  size_t size;
  /* An ONNX model exported at a fixed batch gets its inputs' leading dimension as the symbol
   * `batch`, so the batch is the caller's, not the export's (where a node cannot take a symbolic
   * batch, the model loads as exported and dpc_net_fixed_batch says why). */
  bool batched;
  /* A model without an objective (ONNX) gets one: "softmax_cross_entropy" or "mse" on its first
   * output against a new input "labels". NULL: none. */
  const char *loss;
  /* ONNX: the k-th input's value, known when importing (shapes fold through it); NULL: none. */
  const dpc_array *known;
  unsigned n_known;
} dpc_load_opts;

DPC_COMPILER_API dpc_status dpc_net_load(const char *path, const dpc_load_opts *o, dpc_net **out,
                                         dpc_message *m);
DPC_COMPILER_API void dpc_net_free(dpc_net *n);
/* The model's own name, or the path it was loaded from. */
DPC_COMPILER_API const char *dpc_net_name(const dpc_net *n);
/* NULL, or why the model kept the fixed batch it was exported with (dpc_load_opts.batched). */
DPC_COMPILER_API const char *dpc_net_fixed_batch(const dpc_net *n);
/* Whether the model has something to minimize (a loss), so it can be trained and planned. */
DPC_COMPILER_API bool dpc_net_trainable(const dpc_net *n);

/* The folder holding a path into buf: "." for a bare name, "/" for a name at the root. */
DPC_COMPILER_API void dpc_path_folder(const char *path, char *buf, size_t cap);
/* Whether a path names a compiled artifact rather than a model (.dpx, or an ELF file that does
 * not end in .graph or .onnx). */
DPC_COMPILER_API bool dpc_path_is_artifact(const char *path);
/* Check an artifact (its checksum, its plans) and describe it in out: "compiled artifact for
 * TARGET, plans: infer train eval". */
DPC_COMPILER_API dpc_status dpc_artifact_describe(const char *path, char *out, size_t n,
                                                  dpc_message *m);

/* ---- running ----------------------------------------------------------------------------- */

/* Run a model once on the inputs given (its params and state may be given too, to override
 * them), after the inference passes (`training`: dropout and batch_norm in training mode), and
 * return every output, named (dpc_arrays_free). Symbols such as the batch are bound from the
 * inputs' shapes; data for inputs only the loss needs (labels) may be left out. b may be NULL:
 * the defaults of dpc_build_opts (the "llvm" backend). */
DPC_COMPILER_API dpc_status dpc_net_infer(const dpc_net *n, const dpc_build_opts *b,
                                          const dpc_array *feeds, unsigned n_feeds, bool training,
                                          dpc_array **outs, unsigned *n_outs, dpc_message *m);
/* The same through a compiled artifact's inference plan (its batch is fixed: the data must
 * match it). */
DPC_COMPILER_API dpc_status dpc_artifact_infer(const char *path, const dpc_array *feeds,
                                               unsigned n_feeds, bool training, dpc_array **outs,
                                               unsigned *n_outs, dpc_message *m);

/* An element type's name as dpc writes it in shapes and messages: "f32", "i64", "bool", ... */
DPC_COMPILER_API const char *dpc_elem_name(dpc_elem e);
/* Element i (row-major, below the array's element count) of an array as a double, whatever its
 * element type. */
DPC_COMPILER_API double dpc_array_value(const dpc_array *v, size_t i);

/* ONNX test data (the layout of ONNX's backend tests: a folder of input_0.pb, input_1.pb, ...,
 * each an ONNX TensorProto). The tensors of DIR/input_N.pb, in order from 0 until a number is
 * missing, each named as its file says (dpc_arrays_free; *n 0 when there are none). Give them to
 * dpc_net_load as known values (dpc_load_opts.known), then name them with dpc_net_name_inputs. */
DPC_COMPILER_API dpc_status dpc_onnx_inputs_load(const char *dir, dpc_array **out, unsigned *n,
                                                 dpc_message *m);
/* Name v[k] after the model's k-th input, as positional data (ONNX test data) is matched. v must
 * be arrays the library returned (each name is freed and replaced). An error when there are more
 * arrays than the model has inputs. */
DPC_COMPILER_API dpc_status dpc_net_name_inputs(const dpc_net *n, dpc_array *v, unsigned count,
                                                dpc_message *m);
/* Write a value as an ONNX TensorProto file at `path` (the tensor named as v is). */
DPC_COMPILER_API dpc_status dpc_onnx_tensor_save(const char *path, const dpc_array *v,
                                                 dpc_message *m);

/* ---- looking at models: checking, printing, the op table --------------------------------- */

/* What a loaded model holds, as counted by dpc_net_summarize. The caller sets size to sizeof
 * the struct; fields past it are left alone (new fields are only added at the end). */
typedef struct dpc_net_summary {
  size_t size;
  const char *name; /* the model's own name; NULL when it has none. Valid while the net lives */
  uint32_t nodes;   /* nodes of the graph as loaded, sources included */
  uint32_t inputs;  /* input statements */
  uint32_t params;  /* param statements */
  int64_t weights;  /* elements of every param together */
  bool trainable;   /* it has something to minimize (dpc_net_trainable) */
} dpc_net_summary;

DPC_COMPILER_API void dpc_net_summarize(const dpc_net *n, dpc_net_summary *out);

typedef enum dpc_print_form {
  DPC_PRINT_TEXT,    /* the .graph language (parses back to the same graph) */
  DPC_PRINT_BRIEF,   /* the .graph language, large constants and imported weights shortened to
                        their first values (does not parse back) */
  DPC_PRINT_DOT,     /* Graphviz: named values and fused kernels */
  DPC_PRINT_DOT_FULL /* Graphviz: every node, constants and unnamed values too */
} dpc_print_form;

/* The model as text in the form asked for (malloc'd, the caller frees it with free()).
 * When b asks for dumps (print_after) or for verify_each, the passes run first on a copy of the
 * model (the training pipeline when `training`, else the inference one; kernels grouped as b's
 * backend compiles them): with print_after the dumps given to b->on_dump are the output and
 * *text is NULL; with verify_each alone *text is the model after the passes. Otherwise *text is
 * the model as loaded and `training` does nothing. */
DPC_COMPILER_API dpc_status dpc_net_print(const dpc_net *n, dpc_print_form form, bool training,
                                          const dpc_build_opts *b, char **text, dpc_message *m);
/* Run one pipeline on a copy of the model to check it: the inference pipeline, or with
 * `training` the training one (the gradients' construction, the optimizer; a cosine or linear
 * schedule without a length gets a stand-in). Shapes and the verifier; kernels are not grouped
 * (the check is of the model, not of a backend). From b: verify_each, print_after and on_dump
 * (the backend is not used). Training a model with nothing to minimize is an error
 * (DPC_ERR_INVALID). A caller checking a model the way `dpc check` does runs the inference
 * pipeline, then the training one when the model is trainable. */
DPC_COMPILER_API dpc_status dpc_net_check(const dpc_net *n, bool training, const dpc_build_opts *b,
                                          dpc_message *m);

/* The op table of the .graph language: the ops a model's expressions use (the statements input,
 * param and state are not ops here; constant is), in the table's order. */
typedef struct dpc_op_entry {
  size_t size;         /* set by the caller to sizeof the struct */
  const char *name;    /* "matmul" */
  const char *inputs;  /* the operands, comma-separated ("a, b") */
  const char *outputs; /* the results ("y") */
  const char *attrs;   /* attributes as name:kind, =default when optional, ? when optional
                          without a default; "" when it has none */
} dpc_op_entry;

/* How many ops the table has. */
DPC_COMPILER_API unsigned dpc_op_count(void);
/* Op i's name, or NULL past the end. */
DPC_COMPILER_API const char *dpc_op_name_at(unsigned i);
/* Op i into *out (strings static); false past the end. */
DPC_COMPILER_API bool dpc_op_at(unsigned i, dpc_op_entry *out);

/* ---- compiling to an artifact ----------------------------------------------------------- */

/* The most extra batch sizes (dpc_compile_opts.batch_sizes) one artifact takes. */
#define DPC_COMPILE_MAX_BATCH_SIZES 12u
/* The largest batch an artifact is compiled for. */
#define DPC_COMPILE_MAX_BATCH (1u << 24)

/* Which setting a failed compile was refused for (dpc_compile_info.problem), so a front end can
 * name its own spelling of it. */
typedef enum dpc_compile_problem {
  DPC_COMPILE_FINE,       /* the settings were not the problem (or it succeeded) */
  DPC_COMPILE_BAD_BATCH,  /* batch above DPC_COMPILE_MAX_BATCH, or batch_sizes[index] not from 1
                             to below the batch, or more than DPC_COMPILE_MAX_BATCH_SIZES */
  DPC_COMPILE_BAD_DIM,    /* dims[index] is not NAME=VALUE (VALUE >= 0) for a dimension of the
                             model */
  DPC_COMPILE_NO_LOSS,    /* train, and the model has nothing to minimize */
  DPC_COMPILE_NO_HORIZON, /* train, and the model's `schedule` needs total_steps */
  DPC_COMPILE_SPLIT       /* the `replicas` devices do not divide the batch */
} dpc_compile_problem;

/* What dpc_net_compile did, or why it refused (given through dpc_compile_opts.info). The caller
 * sets size; fields past it are left alone. */
typedef struct dpc_compile_info {
  size_t size;
  char target[512];            /* what the code was compiled for (a CPU and its features) */
  uint32_t batch;              /* the batch of the plans (the default applied) */
  uint32_t replicas;           /* the devices the batch is split over (1: one device) */
  uint32_t n_plans;            /* plans in the artifact */
  dpc_compile_problem problem; /* on failure: the setting refused, or DPC_COMPILE_FINE */
  unsigned index;              /* BAD_DIM, BAD_BATCH: which dims / batch_sizes entry */
  char schedule[32];           /* NO_HORIZON: the learning-rate schedule ("cosine") */
  uint32_t split;              /* the devices the model is split over (0: not split) */
  uint64_t device_bytes;       /* the inference plan's most bytes on one device */
} dpc_compile_info;

typedef struct dpc_compile_opts {
  size_t size;
  dpc_build_opts build;        /* build.size 0: the defaults */
  uint32_t batch;              /* 0: 64 with train (as the trainer), else 1 */
  const uint32_t *batch_sizes; /* more inference plans for smaller batches (e.g. {1, 4}) */
  unsigned n_batch_sizes;
  const char *const *dims; /* "NAME=VALUE" sizes of other symbolic dimensions */
  unsigned n_dims;
  const char *devices;  /* data parallel over these devices ("cpu:2"); NULL: one */
  bool train;           /* also the training step and an evaluation plan */
  uint64_t total_steps; /* with train: the horizon of a cosine or linear schedule (0: none) */
  const char *cpu;      /* target CPU; NULL: this machine's */
  const char *features; /* target features ("+avx2,+fma"); NULL: the CPU's */
  /* Checked between phases, and while the linker runs: once *cancel is non-zero the compile
   * stops (a running linker is sent SIGTERM), removes what it wrote and fails with
   * DPC_ERR_RUNTIME, "interrupted: 'PATH' was not written". A signal handler may set it: a
   * signal caught without SA_RESTART also wakes the wait for the linker. NULL: never. */
  const volatile int *cancel;
  dpc_compile_info *info; /* NULL, or told what was compiled or which setting was refused */
  /* Model parallel inference: every inference plan split over `devices` by the partitioner
   * (each device a part of the model, a batch flowing through them), instead of the batch
   * split over them. Inference only (not with train). */
  bool split;
  /* Bytes each device has (0: no limit): the inference plans must fit. When the batch split
   * over `devices` does not fit (every replica holds the whole model), the model is split
   * instead, as with `split`. */
  uint64_t device_memory;
} dpc_compile_opts;

/* Compile the model into an artifact at `path`, written whole or not at all (a temporary file
 * renamed into place): an inference plan at the batch (data parallel over `devices`, or split
 * over them: `split`, `device_memory`), with train
 * a training plan at the same batch and an evaluation plan on one device, and an inference plan
 * on one device (split as the first when split) for each of batch_sizes. Symbols the dims do not
 * give take the batch. Settings that cannot work are DPC_ERR_INVALID and say which in o->info (a
 * problem counting the devices is the device spec's own error). */
DPC_COMPILER_API dpc_status dpc_net_compile(const dpc_net *n, const dpc_compile_opts *o,
                                            const char *path, dpc_message *m);

/* ---- build options checked alone --------------------------------------------------------- */

/* Check build options before any model is loaded, so a front end can refuse a bad option before
 * that work: the backend exists (else DPC_ERR_INVALID, the message naming the known ones),
 * print_after names passes, and cuda_arch and precision are the cuda backend's and well formed. b
 * may be NULL (the defaults, which are fine). */
DPC_COMPILER_API dpc_status dpc_build_opts_check(const dpc_build_opts *b, dpc_message *m);

/* ---- ONNX conformance: ONNX's backend tests run and compared --------------------------- */

/* The ONNX ops dpc imports, comma-separated, for help texts. */
DPC_COMPILER_API const char *dpc_onnx_ops(void);

typedef enum dpc_onnx_verdict {
  DPC_ONNX_PASS, /* every output of every data set within the tolerances */
  DPC_ONNX_FAIL, /* an output differs, or the model or its data is wrong */
  DPC_ONNX_SKIP  /* the model uses something dpc does not support (named in why) */
} dpc_onnx_verdict;

/* One test's result, given to dpc_onnx_test_opts.on_case; valid during the call. */
typedef struct dpc_onnx_case {
  const char *dir;          /* the test's folder: the folder given, or FOLDER/NAME */
  dpc_onnx_verdict verdict; /* with fail_on_skip, a skip is reported as a failure */
  const char *why;          /* "" on a pass, else one line: why it failed or was skipped */
  bool unsupported_op;      /* skipped for an ONNX op dpc does not import (else for an element
                               type or a form of an op it does not support) */
} dpc_onnx_case;

typedef struct dpc_onnx_test_opts {
  size_t size;
  dpc_build_opts build; /* the backend the models run on; build.size 0: the defaults */
  /* Outputs match when |got - expected| <= atol + rtol * |expected| (NaN matches NaN, an
   * infinity only itself). NULL: 1e-3 and 1e-7, as ONNX's backend tests. */
  const double *rtol, *atol;
  bool fail_on_skip; /* count a test that would be skipped as failed (a suite dpc must run whole) */
  void (*on_case)(void *user, const dpc_onnx_case *c); /* NULL, or called after each test */
  void *user;
} dpc_onnx_test_opts;

/* Tests counted, added to by each dpc_onnx_test_run (the caller zeroes it, sets size). */
typedef struct dpc_onnx_totals {
  size_t size;
  unsigned passed, failed, skipped;
  unsigned skipped_op; /* of the skipped: for an ONNX op dpc does not import */
} dpc_onnx_totals;

/* Run ONNX backend tests: `dir` itself when it holds model.onnx, else each folder in it that
 * does, in name order. A test is a model.onnx and test_data_set_N folders of input_N.pb and
 * output_N.pb; each data set's inputs are imported as known values, run, and every output
 * compared. Each test's verdict goes to on_case and is counted in *totals (may be NULL). A dir
 * that is not a folder, or that holds no test, is DPC_ERR_INVALID (before any test runs). */
DPC_COMPILER_API dpc_status dpc_onnx_test_run(const char *dir, const dpc_onnx_test_opts *o,
                                              dpc_onnx_totals *totals, dpc_message *m);

#ifdef __cplusplus
}
#endif
#endif
