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

/* The library's version ("0.3.0"), which may differ from the header's DPC_VERSION_STRING when
 * linked against another build. */
DPC_COMPILER_API const char *dpc_compiler_version(void);

/* ---- messages ---------------------------------------------------------------------------- */

/* What went wrong, kept for the caller: a status, a message, and where it applies (a file, line
 * and column with the source line for text input). Opaque; one per thread. */
typedef struct dpc_diag dpc_message;

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
  const char *backend; /* the codegen backend by name: "llvm" (compiled for this CPU) or "ref"
                          (the reference kernels, nothing compiled); NULL: "llvm" */
  /* NULL, or called with each generated LLVM module's text, before and after optimisation */
  void (*on_llvm)(void *user, const char *what, const char *text);
  bool verify_each;        /* the verifier after every pass */
  const char *print_after; /* pass names, comma-separated, or "all": each graph after that pass
                              goes to on_dump */
  void (*on_dump)(void *user, const char *pass, const char *text);
  void *user;            /* given to on_llvm and on_dump */
  const char *cache_dir; /* compiled kernels kept between runs: NULL for $DPC_CACHE_DIR or
                            ~/.cache/dpc, "off" for none */
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
 * inputs' shapes. b may be NULL (the reference kernels). */
DPC_COMPILER_API dpc_status dpc_net_infer(const dpc_net *n, const dpc_build_opts *b,
                                          const dpc_array *feeds, unsigned n_feeds, bool training,
                                          dpc_array **outs, unsigned *n_outs, dpc_message *m);
/* The same through a compiled artifact's inference plan (its batch is fixed: the data must
 * match it). */
DPC_COMPILER_API dpc_status dpc_artifact_infer(const char *path, const dpc_array *feeds,
                                               unsigned n_feeds, bool training, dpc_array **outs,
                                               unsigned *n_outs, dpc_message *m);

/* ---- passes and printing ------------------------------------------------------------------ */

typedef enum dpc_print_form {
  DPC_PRINT_TEXT,    /* the .graph language (parses back to the same graph) */
  DPC_PRINT_BRIEF,   /* one line per node, shapes only */
  DPC_PRINT_DOT,     /* Graphviz: named values and fused kernels */
  DPC_PRINT_DOT_FULL /* Graphviz: every node, constants and unnamed values too */
} dpc_print_form;

/* The model as text in the form asked for (malloc'd, the caller frees it with free()), after the
 * passes when b asks for dumps or `training` is set (the training pipeline), else as loaded. */
DPC_COMPILER_API dpc_status dpc_net_print(const dpc_net *n, dpc_print_form form, bool training,
                                          const dpc_build_opts *b, char **text, dpc_message *m);
/* Run the pipeline (inference, or training) on a copy of the model to check it: shapes, the
 * gradients' construction, the verifier. */
DPC_COMPILER_API dpc_status dpc_net_check(const dpc_net *n, bool training, const dpc_build_opts *b,
                                          dpc_message *m);

/* The op table: how many ops, and each one's name and a line about it. */
DPC_COMPILER_API unsigned dpc_op_count(void);
DPC_COMPILER_API const char *dpc_op_name_at(unsigned i);
DPC_COMPILER_API const char *dpc_op_summary_at(unsigned i);

/* ---- compiling to an artifact ----------------------------------------------------------- */

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
  /* Checked between phases: once *cancel is non-zero the compile stops, removes what it wrote
   * and fails with "cancelled". NULL: never. */
  const volatile int *cancel;
} dpc_compile_opts;

/* Compile the model into an artifact at `path`, written whole or not at all (a temporary file
 * renamed into place). */
DPC_COMPILER_API dpc_status dpc_net_compile(const dpc_net *n, const dpc_compile_opts *o,
                                            const char *path, dpc_message *m);

/* ---- build options checked alone --------------------------------------------------------- */

/* Check build options before any model is loaded, so a front end can refuse a bad option before
 * that work: the backend exists (else DPC_ERR_INVALID, the message naming the known ones) and
 * print_after names passes. b may be NULL (the defaults, which are fine). */
DPC_COMPILER_API dpc_status dpc_build_opts_check(const dpc_build_opts *b, dpc_message *m);

#ifdef __cplusplus
}
#endif
#endif
