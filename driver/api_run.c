/*
 * api_run.c — running a model or an artifact once, and the values it takes and gives: element
 * names, values read as doubles, ONNX test data (include/dpc/compiler.h).
 */
#include "driver/api_internal.h"
#include "frontend/onnx.h"

#include <stdlib.h>
#include <string.h>

DPC_COMPILER_API dpc_status dpc_net_infer(const dpc_net *n, const dpc_build_opts *b,
                                          const dpc_array *feeds, unsigned n_feeds, bool training,
                                          dpc_array **outs, unsigned *n_outs, dpc_message *m) {
  *outs = NULL;
  *n_outs = 0;
  dpc_exec_opts x;
  dpc_pass_opts po;
  dpc_status st = dpc_api_build(b, &x, &po, m);
  if (st) return st;
  dpc_named *f = NULL, *o = NULL;
  uint32_t no = 0;
  if ((st = dpc_api_named(feeds, n_feeds, &f, m))) return st;
  st = dpc_driver_infer(n->g, &po, &x, f, n_feeds, training, &o, &no, m);
  free(f);
  if (st) return st;
  if ((st = dpc_api_arrays(o, no, outs, m))) return st;
  *n_outs = no;
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_artifact_infer(const char *path, const dpc_array *feeds,
                                               unsigned n_feeds, bool training, dpc_array **outs,
                                               unsigned *n_outs, dpc_message *m) {
  *outs = NULL;
  *n_outs = 0;
  dpc_named *f = NULL, *o = NULL;
  uint32_t no = 0;
  dpc_status st = dpc_api_named(feeds, n_feeds, &f, m);
  if (st) return st;
  st = dpc_driver_infer_artifact(path, f, n_feeds, training, &o, &no, m);
  free(f);
  if (st) return st;
  if ((st = dpc_api_arrays(o, no, outs, m))) return st;
  *n_outs = no;
  return DPC_OK;
}

DPC_COMPILER_API const char *dpc_elem_name(dpc_elem e) {
  return dpc_dtype_name((dpc_dtype)e);
}

DPC_COMPILER_API double dpc_array_value(const dpc_array *v, size_t i) {
  dpc_tensor t = {.data = v->data, .dtype = (dpc_dtype)v->elem};
  return dpc_tload(&t, (int64_t)i);
}

/* ---- ONNX test data ---------------------------------------------------------------------- */

DPC_COMPILER_API dpc_status dpc_onnx_inputs_load(const char *dir, dpc_array **out, unsigned *n,
                                                 dpc_message *m) {
  *out = NULL;
  *n = 0;
  dpc_named *v = NULL;
  uint32_t nv = 0;
  dpc_status st = dpc_driver_onnx_inputs(dir, &v, &nv, m);
  if (st) {
    dpc_named_free(v, nv);
    return st;
  }
  if (!v) return DPC_OK; /* no input files */
  if ((st = dpc_api_arrays(v, nv, out, m))) return st;
  *n = nv;
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_net_name_inputs(const dpc_net *n, dpc_array *v, unsigned count,
                                                dpc_message *m) {
  /* the driver renames named tensors: lend it the arrays' names, take the new ones back */
  dpc_named *t = calloc(count ? count : 1, sizeof *t);
  if (!t) return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  for (unsigned k = 0; k < count; k++) t[k].name = (char *)v[k].name;
  dpc_status st = dpc_driver_onnx_name_feeds(n->g, t, count, m);
  for (unsigned k = 0; k < count; k++) v[k].name = t[k].name;
  free(t);
  return st;
}

DPC_COMPILER_API dpc_status dpc_onnx_tensor_save(const char *path, const dpc_array *v,
                                                 dpc_message *m) {
  dpc_named *t = NULL;
  dpc_status st = dpc_api_named(v, 1, &t, m);
  if (st) return st;
  st = dpc_onnx_tensor_write(path, v->name, &t->t, m);
  free(t);
  return st;
}
