/*
 * driver.h — the steps every command shares: load a model, bind its batch size from the data,
 * plan, run. Used by tools/dpc and by tests, so both exercise the same path.
 */
#ifndef DPC_TOOLS_DRIVER_H
#define DPC_TOOLS_DRIVER_H

#include "codegen/backend.h"
#include "codegen/cpu/cpu.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"

/* How plans run: on the reference kernels, or compiled by a codegen backend (codegen/backend.h,
 * chosen by name: dpc_codegen_backend_find). */
typedef struct dpc_exec_opts {
  const dpc_codegen_backend *backend; /* NULL: the reference kernels, as "ref" */
  dpc_codegen_options cpu;            /* how the backend compiles (target, cache, dumps) */
} dpc_exec_opts;

/* A tensor with a name; data is malloc'd and owned. */
typedef struct dpc_named {
  char *name;
  dpc_tensor t;
} dpc_named;

void dpc_named_free(dpc_named *v, uint32_t n);

/* Give a schedule that needs a horizon (cosine, linear) a stand-in one when the model sets
 * none, so the training pipeline can be checked or printed without a run's length. */
dpc_status dpc_driver_default_horizon(dpc_graph *g, dpc_diag *d);
/* The names plans give devices: cpu:0 ... cpu:(n-1), n at most DPC_MAX_DEVICES (the most a
 * spec makes and a plan has; past it, the names stop there and the plan says the limit). */
typedef struct dpc_device_names {
  char name[DPC_MAX_DEVICES][16];
  const char *ptr[DPC_MAX_DEVICES];
} dpc_device_names;
void dpc_driver_device_names(uint32_t n, dpc_device_names *out);
/* How many devices a --devices spec makes on this machine. */
/* --devices mpi[:LOCAL] (train_mpi.c): whether spec names MPI ranks, and how many devices they
 * make (the world's ranks; an error when MPI is not initialized or not built in). */
bool dpc_driver_is_mpi(const char *spec);
/* The GPUs a spec names: spec itself for "cuda:0,...", the list after the CPU for
 * "cpu,cuda:0,..." (*with_cpu true), NULL when it names none. with_cpu may be NULL. */
const char *dpc_driver_gpus(const char *spec, bool *with_cpu);
dpc_status dpc_driver_mpi_world(const char *spec, uint32_t *n, dpc_diag *d);
/* FNV-1a over n bytes, continued from h (0xcbf29ce484222325 to start): what ranks compare to
 * know they run the same plan or serve the same file. */
uint64_t dpc_driver_fnv(uint64_t h, const void *p, size_t n);
/* The devices a rank of "mpi[:LOCAL]" runs (1 for "mpi" and "mpi:cpu", L for "mpi:cpu:L"), or
 * an error naming the spec; needs no MPI. */
dpc_status dpc_driver_mpi_local(const char *spec, uint32_t *local, dpc_diag *d);
dpc_status dpc_driver_count_devices(const char *spec, uint32_t *n, dpc_diag *d);
/* The same for the devices a plan spreads over: GPU lists refused (dpc_devices_count, planning
 * and compiling; a GPU plan is made for described GPUs by --simulate-devices). */
dpc_status dpc_driver_count_cpu_devices(const char *spec, uint32_t *n, dpc_diag *d);
/* Plan `bound` (a graph bound at the batch of one micro-batch of one replica): with
 * accumulate > 1 (training), each replica runs that many micro-batches and averages their
 * gradients before its step; with replicas > 1, data parallel over replicas x mp devices (each
 * replica split over its mp devices by its placement, the global batch `batch`); otherwise on
 * mp devices by the graph's own placement (mp 1: one device). A schedule other than NONE (with
 * accumulate > 1) runs the micro-batches as a pipeline over the mp devices in GPipe's or
 * 1F1B's order (partitioner/pipeline.c). `local`: the replicas do not average their
 * gradients (each steps on its own; the loss is still averaged for the log). */
typedef struct dpc_driver_strategy {
  uint32_t replicas, mp, accumulate;
  dpc_pipeline_schedule schedule;
  bool local; /* replicas keep their own gradients (local SGD averages params instead) */
  /* each data-parallel replica's samples of the batch, summing to it (NULL: equal shares) */
  const uint32_t *shares;
} dpc_driver_strategy;
dpc_status dpc_driver_plan(const dpc_graph *bound, int64_t batch, const dpc_driver_strategy *s,
                           bool training, dpc_plan **out, dpc_diag *d);

/* Split n samples over R replicas in proportion to weights (NULL: equally), each share a
 * multiple of K and at least K, the rounding's leftovers to the largest remainders (the first
 * replicas on ties). False when n cannot give every replica K samples. */
bool dpc_driver_split_batch(uint32_t n, uint32_t R, const double *weights, uint32_t K,
                            uint32_t *shares);
/* --shares: "even", "auto" or a list "144,112" of R shares summing to batch. *auto_ is set for
 * auto (shares untouched, measured later); an error names what is wrong. */
dpc_status dpc_driver_parse_shares(const char *spec, uint32_t R, uint32_t batch, uint32_t *shares,
                                   bool *even, bool *auto_, dpc_diag *d);

/* Bind g (after its passes, its symbols free) so each micro-batch of each replica's share of
 * `share` samples has share / s->accumulate rows, then dpc_driver_plan. An accumulation that
 * does not divide the share is an error saying so. */
dpc_status dpc_driver_plan_share(dpc_graph *g, int64_t batch, uint32_t share,
                                 const dpc_driver_strategy *s, bool training, dpc_plan **out,
                                 dpc_diag *d);

/* --device-memory: "512M", "2G", "1500000" (K, M, G are powers of 1024). False when malformed. */
bool dpc_driver_parse_size(const char *s, uint64_t *out);
/* Every device of the plan within `limit` bytes (0: no limit), else an error that says how much
 * the plan needs on which device, in all, and how much the devices have. */
dpc_status dpc_driver_check_memory(const dpc_plan *p, uint64_t limit, dpc_diag *d);
/* Whether the device the code of `be` runs on is there (cuda:0 for the cuda backend: the driver
 * loads and sees a GPU, without opening it, which the session does; host code always runs):
 * checked before compiling, so a missing GPU is reported at once, not after every kernel has
 * been compiled for it. */
dpc_status dpc_driver_check_backend_device(const dpc_codegen_backend *be, dpc_diag *d);

/* --devices for the backend's kind. "cuda:0,cuda:1,...": GPUs in order from cuda:0, for the
 * cuda backend only, each of them present; *cpu_spec gets "cpu:N", the spec of N devices' host
 * threads (the session opens cuda:0..N-1 for them, as it opens cuda:K for any device K of a
 * cuda backend's plan). *cpu_spec is "" when spec names no GPU. "cpu,cuda:0,...": the host's
 * CPU as device 0 before the GPUs (*host_devices 1, cpu_spec counting it); refused where
 * host_devices is NULL. */
dpc_status dpc_driver_gpu_spec(const dpc_codegen_backend *be, const char *spec, char *cpu_spec,
                               size_t n, uint32_t *host_devices, dpc_diag *d);

/* How dpc_driver_place places: each device's memory (bytes, 0: no limit), a profile of the
 * kernels' times (NULL: the roofline), for a pipeline its micro-batches and schedule (the
 * candidates are then simulated as the pipeline they make), and the link between the devices
 * when it is not this machine's (GB/s and seconds a message, measured between MPI ranks on
 * different hosts; 0: the calibration's). */
typedef struct dpc_driver_place_opts {
  uint64_t mem_limit;
  const dpc_cost_profile *profile;
  uint32_t microbatches;
  dpc_pipeline_schedule schedule;
  double link_gbs, link_latency_s;
  const uint64_t *mem_limits; /* per device, bytes, none 0 (NULL: mem_limit for each) */
  /* the devices are the GPUs cuda:0.. (spec names as many cpu:N): each is measured
   * (dpc_driver_gpu_speeds) in place of the CPU's calibration, which stays the fallback where a
   * GPU's GEMM rate cannot be measured; `note` (note_len bytes, may be NULL) says which */
  bool gpus;
  uint32_t host_devices; /* with gpus: devices 0 .. host_devices - 1 are the host's CPU */
  char *note;
  size_t note_len;
} dpc_driver_place_opts;

/* The figures of the GPUs cuda:0 .. cuda:n-1 for placement, as dpc plan takes them for this
 * machine's GPUs: the GEMM rate on cuBLAS, the copy bandwidth (read and write), and as the link
 * the slowest copy into a GPU from cuda:0 (10 us a message, not measured). DPC_ERR_UNSUPPORTED,
 * saying why, when a GEMM rate is not measured (no cuBLAS). `what` (may be NULL) gets a line
 * with the figures. *bus (NULL: not measured) gets the GB/s of a copy from host memory into
 * cuda:0's, the best of a few: the bus a mixed CPU and GPU plan's values cross. */
dpc_status dpc_driver_gpu_speeds(uint32_t n, dpc_device_speed *speed, double *bus, char *what,
                                 size_t len, dpc_diag *d);

/* Model parallel: unless the model places its nodes itself (`@ cpu:K`, device blocks), place
 * them on the n devices of `spec` with METIS, weighted by the devices' calibrated GEMM speed
 * (dpc devices), each candidate planned and simulated for a training step at `batch`. With a
 * memory limit the placement is steered under it: placed, planned, and placed again with a
 * smaller budget for each device the plan puts over the limit (a few rounds;
 * dpc_driver_check_memory then has the last word). o may be NULL. *placed_auto says whether it
 * placed; `report` (may be NULL) gets what placement did. */
dpc_status dpc_driver_place(dpc_graph *model, int64_t batch, const char *spec, uint32_t n,
                            const dpc_driver_place_opts *o, bool *placed_auto,
                            dpc_place_report *report, dpc_diag *d);
/* The same on n devices of the given speeds (dpc_driver_place measures them; tests fix them). */
dpc_status dpc_driver_place_on(dpc_graph *model, int64_t batch, uint32_t n,
                               const dpc_device_speed *speed, const dpc_driver_place_opts *o,
                               dpc_place_report *report, dpc_diag *d);

/* Parse and verify a model file. */
dpc_status dpc_driver_load(const char *path, dpc_graph **out, dpc_diag *d);
/* The same for the commands that take --batch: an ONNX model exported at a fixed batch gets
 * its inputs' leading dimension as the symbol `batch` (dpc_onnx_opts.leading_batch), so the
 * batch is the command's, not the export's. Where a node cannot take a symbolic batch, that
 * is an error naming it when `fixed` is NULL; otherwise the model comes as exported, at its
 * fixed shapes, and *fixed gets why (malloc'd; NULL when the batch is symbolic). */
dpc_status dpc_driver_load_batched(const char *path, dpc_graph **out, char **fixed, dpc_diag *d);

/* Run the inference pipeline on a copy of g, bind its symbols from `feeds` (inputs, and params
 * or state to override), run once (on the backend `x` asks for; NULL: reference) and return
 * every output, named. `training` runs dropout and batch_norm in training mode. */
dpc_status dpc_driver_infer(const dpc_graph *g, const dpc_pass_opts *po, const dpc_exec_opts *x,
                            const dpc_named *feeds, uint32_t n_feeds, bool training,
                            dpc_named **outs, uint32_t *n_outs, dpc_diag *d);

/* The same on a compiled artifact's "infer" plan (its batch size is fixed: the data must match). */
dpc_status dpc_driver_infer_artifact(const char *path, const dpc_named *feeds, uint32_t n_feeds,
                                     bool training, dpc_named **outs, uint32_t *n_outs,
                                     dpc_diag *d);

/* The tensors of DIR/input_0.pb, input_1.pb, ... (ONNX TensorProto files, the ONNX
 * backend-test layout) in order, each named as its file says. */
dpc_status dpc_driver_onnx_inputs(const char *dir, dpc_named **out, uint32_t *n, dpc_diag *d);
/* Name feeds[k] after g's k-th input (input files are positional). */
dpc_status dpc_driver_onnx_name_feeds(const dpc_graph *g, dpc_named *feeds, uint32_t n,
                                      dpc_diag *d);
/* dpc_driver_load, but an ONNX model is imported knowing its inputs' values (dpc_onnx_opts):
 * known[k] for its k-th input. */
dpc_status dpc_driver_load_known(const char *path, const dpc_named *known, uint32_t n,
                                 dpc_graph **out, dpc_diag *d);

/* Give a model without an objective (an imported ONNX model) one: `loss` (softmax_cross_entropy
 * or mse) between its first output and a new input, `labels` (i64 [N] class indices, or the
 * output's shape for mse), minimised with SGD at its defaults (train's --optimizer, --lr and
 * friends override them). An error when the model has an objective already. */
dpc_status dpc_driver_attach_loss(dpc_graph *g, const char *loss, dpc_diag *d);

/* DIR/NAME without doubling a slash DIR ends with; false when it does not fit in n bytes. */
bool dpc_driver_join_path(char *buf, size_t n, const char *dir, const char *name);

/* Whether a path names a compiled artifact rather than a model: its name ends in .dpx, or it
 * does not end in .graph or .onnx and the file is ELF (a renamed artifact). */
bool dpc_driver_is_artifact(const char *path);
/* Open an artifact (checked against its checksum, its plans read) and describe it in out:
 * "compiled artifact for TARGET, plans: infer train eval". */
dpc_status dpc_driver_describe_artifact(const char *path, char *out, size_t n, dpc_diag *d);

#endif
