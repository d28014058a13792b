/*
 * api_internal.h — what the files behind the public headers (include/dpc/compiler.h, plan.h,
 * train.h) share: the net object and conversions between public and internal types.
 */
#ifndef DPC_DRIVER_API_INTERNAL_H
#define DPC_DRIVER_API_INTERNAL_H

#include "driver/driver.h"
#include <dpc/plan.h>

struct dpc_net {
  dpc_graph *g;
  char *path;  /* as loaded */
  char *fixed; /* why an ONNX export kept its batch (dpc_load_opts.batched), or NULL */
};

/* A public option struct's field, when the caller's struct (of `size` bytes) reaches it. */
#define DPC_API_HAS(o, field)                                                                      \
  ((o) && (o)->size >= offsetof(__typeof__(*(o)), field) + sizeof((o)->field))

/* The build options as the driver takes them: the backend found by name (an error naming the
 * backends when there is none), pass options for dumps and verification. b may be NULL. */
dpc_status dpc_api_build(const dpc_build_opts *b, dpc_exec_opts *x, dpc_pass_opts *po, dpc_diag *d);

/* Public arrays <-> named tensors. dpc_api_named borrows the arrays' memory (free only the
 * returned array itself); dpc_api_arrays takes the tensors' memory over and frees v. */
dpc_status dpc_api_named(const dpc_array *a, unsigned n, dpc_named **out, dpc_diag *d);
dpc_status dpc_api_arrays(dpc_named *v, uint32_t n, dpc_array **out, dpc_diag *d);

/* Train strategy ps over `spec`'s `devices` devices (one: neither is used) for `steps` timed
 * steps after 5, as dpc bench and dpc train run it (hybrids and pipelines as replicas placed
 * alike): the median step. */
dpc_status dpc_api_measure_strategy(const dpc_net *net, const dpc_strategy *ps, uint32_t devices,
                                    const char *spec, uint32_t batch, uint32_t steps,
                                    double *median_s, dpc_diag *d);

/* dpc_net_plan with the cost model corrected by `timed` (NULL: by a profile of its own when
 * o->profile asks for one) */
struct dpc_cost_profile;
dpc_status dpc_api_plan_profiled(const dpc_net *net, const dpc_plan_opts *o,
                                 const struct dpc_cost_profile *timed, dpc_plan_report **out,
                                 dpc_diag *m);

#endif
