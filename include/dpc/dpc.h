/*
 * dpc.h — the public C API of dpc: run and train compiled models from an application.
 *
 * A model is compiled ahead of time with `dpc compile model.graph -o model.dpx --batch 32
 * [--train]`; the runtime library libdpcrt loads the artifact (no LLVM needed on the machine),
 * and a runner executes one of its plans on caller-owned buffers:
 *
 *   #include <dpc/dpc.h>
 *   char err[256];
 *   dpc_model *m;
 *   if (dpc_model_load("model.dpx", &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); ... }
 *   dpc_runner *r;
 *   if (dpc_runner_new(m, DPC_MODE_INFER, NULL, 0, &r, err, sizeof err)) { ... }
 *   float x[32 * 784], logits[32 * 10];
 *   dpc_runner_bind(r, "x", x, sizeof x);            // inputs are read at each run
 *   dpc_runner_bind(r, "logits", logits, sizeof logits); // outputs are written at each run
 *   if (dpc_runner_run(r)) fprintf(stderr, "%s\n", dpc_runner_error(r));
 *   dpc_runner_free(r);
 *   dpc_model_free(m);
 *
 * A DPC_MODE_TRAIN runner does one optimizer step per run (bind the data and the labels; read
 * "loss" with dpc_runner_read). Runners made with `share` use the other runner's params and
 * state, so an inference runner sees what a training runner learnt. Functions return a
 * dpc_status (0 is success); the message is in the `err` buffer given at creation, or
 * dpc_runner_error. Nothing here is global: any number of models and runners may coexist, and
 * different runners may run on different threads.
 */
#ifndef DPC_DPC_H
#define DPC_DPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DPC_BUILDING_RUNTIME) && (defined(__GNUC__) || defined(__clang__))
#define DPC_API __attribute__((visibility("default")))
#else
#define DPC_API
#endif

#define DPC_VERSION_MAJOR  0
#define DPC_VERSION_MINOR  1
#define DPC_VERSION_PATCH  0
#define DPC_VERSION_STRING "0.1.0"

/* Every dpc function that can fail returns one of these. DPC_OK is zero so `if (st)` reads as
 * "if it failed". */
typedef enum dpc_status {
  DPC_OK = 0,
  DPC_ERR_SYNTAX,      /* malformed input (a model, a file header) */
  DPC_ERR_SHAPE,       /* shapes or dtypes that do not fit */
  DPC_ERR_INVALID,     /* a bad argument, name or graph */
  DPC_ERR_IO,          /* a file could not be read or written */
  DPC_ERR_NOMEM,       /* an allocation failed */
  DPC_ERR_UNSUPPORTED, /* valid, but not something dpc does (yet) */
  DPC_ERR_RUNTIME,     /* a failure while running (a label out of range, ...) */
  DPC_ERR_INTERNAL,    /* a broken invariant inside dpc: a bug, please report it */
  DPC_STATUS_COUNT
} dpc_status;

/* A short lower-case name for a status ("syntax error", "shape error", ...). Never NULL. */
DPC_API const char *dpc_status_name(dpc_status st);

/* The library's own version, which may differ from the header's if linked against another. */
DPC_API int dpc_version_major(void);
DPC_API int dpc_version_minor(void);
DPC_API int dpc_version_patch(void);

/* ---- models and runners ------------------------------------------------------------------ */

typedef struct dpc_model dpc_model;   /* a loaded artifact */
typedef struct dpc_runner dpc_runner; /* one of its plans, ready to run */

typedef enum dpc_mode {
  DPC_MODE_INFER, /* the forward pass */
  DPC_MODE_TRAIN  /* one optimizer step per run (artifacts compiled with --train) */
} dpc_mode;

/* Element types, as the .graph language names them. */
typedef enum dpc_elem {
  DPC_ELEM_F32,
  DPC_ELEM_F16,
  DPC_ELEM_BF16,
  DPC_ELEM_F64,
  DPC_ELEM_I32,
  DPC_ELEM_I64,
  DPC_ELEM_BOOL
} dpc_elem;

typedef enum dpc_role {
  DPC_ROLE_INPUT,  /* data the caller gives each run */
  DPC_ROLE_OUTPUT, /* results the caller reads each run */
  DPC_ROLE_PARAM   /* params and state: persist across runs */
} dpc_role;

/* The most dimensions a tensor has: a model with more is refused where it is read (the .graph
 * parser, the ONNX importer, dpc_model_load), with a message that names the limit. */
#define DPC_TENSOR_MAX_RANK 8

typedef struct dpc_tensor_info {
  const char *name; /* valid while the runner lives */
  dpc_elem elem;
  unsigned rank;                     /* at most DPC_TENSOR_MAX_RANK */
  int64_t dims[DPC_TENSOR_MAX_RANK]; /* dims[0 .. rank) */
  size_t bytes;
} dpc_tensor_info;

/* Load an artifact made by `dpc compile`. On failure *out is NULL and err holds the message. */
DPC_API dpc_status dpc_model_load(const char *path, dpc_model **out, char *err, size_t err_len);
/* Free a model; its runners must be freed first. */
DPC_API void dpc_model_free(dpc_model *m);
DPC_API const char *dpc_model_name(const dpc_model *m);
/* Whether the artifact holds a training step (compiled with --train). */
DPC_API int dpc_model_can_train(const dpc_model *m);

/* A runner for one of the model's plans. share: NULL, or a runner of the same model whose params
 * and state this one uses (it must outlive this one). threads: 0 for one per core. */
DPC_API dpc_status dpc_runner_new(dpc_model *m, dpc_mode mode, const dpc_runner *share,
                                  unsigned threads, dpc_runner **out, char *err, size_t err_len);
DPC_API void dpc_runner_free(dpc_runner *r);
/* The message of the runner's last failure ("" if none). */
DPC_API const char *dpc_runner_error(const dpc_runner *r);

/* The tensors of a role, by index. */
DPC_API unsigned dpc_runner_count(const dpc_runner *r, dpc_role role);
DPC_API dpc_status dpc_runner_info(const dpc_runner *r, dpc_role role, unsigned i,
                                   dpc_tensor_info *info);

/* Bind a caller-owned buffer (exactly the tensor's bytes) to an input or an output. Inputs are
 * read at every run and outputs written at every run until unbound (data NULL). */
DPC_API dpc_status dpc_runner_bind(dpc_runner *r, const char *name, void *data, size_t bytes);
/* Run the plan once: an inference, or one training step. Every input must be bound. */
DPC_API dpc_status dpc_runner_run(dpc_runner *r);
/* Copy any named value (a param, state, an output, the loss) out, or a param or state in. */
DPC_API dpc_status dpc_runner_read(dpc_runner *r, const char *name, void *data, size_t bytes);
DPC_API dpc_status dpc_runner_write(dpc_runner *r, const char *name, const void *data,
                                    size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
