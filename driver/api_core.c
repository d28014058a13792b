/*
 * api_core.c — libdpc's version, messages, arrays and models (include/dpc/compiler.h).
 */
#include "driver/api_internal.h"
#include "codegen/cuda/cuda.h"
#include "ir/path.h"
#include "runtime/cuda_driver.h"
#include "runtime/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DPC_COMPILER_API const char *dpc_compiler_version(void) {
  return DPC_VERSION_STRING;
}

DPC_COMPILER_API bool dpc_has_mpi(void) {
#ifdef DPC_HAVE_MPI
  return true;
#else
  return false;
#endif
}

DPC_COMPILER_API bool dpc_has_cuda_codegen(void) {
  return dpc_cuda_have_nvrtc();
}

DPC_COMPILER_API int dpc_cuda_gpus(char *note, size_t n) {
  dpc_cuda_probe p;
  dpc_cuda_driver_probe(&p);
  dpc_cuda_driver_probe_cublas(&p);
  if (note && n) snprintf(note, n, "%s", p.note);
  return p.gpus;
}

/* ---- messages ---------------------------------------------------------------------------- */

DPC_COMPILER_API dpc_message *dpc_message_new(void) {
  return calloc(1, sizeof(dpc_diag));
}

DPC_COMPILER_API void dpc_message_free(dpc_message *m) {
  if (!m) return;
  dpc_diag_free(m);
  free(m);
}

DPC_COMPILER_API void dpc_message_clear(dpc_message *m) {
  dpc_diag_clear(m);
}

DPC_COMPILER_API dpc_status dpc_message_status(const dpc_message *m) {
  return m ? m->status : DPC_OK;
}

DPC_COMPILER_API const char *dpc_message_text(dpc_message *m) {
  if (!m || !m->status) return "";
  /* rendered again each time: dpc_diag_prefix may have changed the message since */
  free(m->rendered);
  m->rendered = dpc_diag_render(m);
  if (!m->rendered) return m->msg ? m->msg : "out of memory";
  size_t n = strlen(m->rendered);
  if (n && m->rendered[n - 1] == '\n') m->rendered[n - 1] = 0;
  return m->rendered;
}

DPC_COMPILER_API const char *dpc_message_file(const dpc_message *m) {
  return m && m->status ? m->file : NULL;
}

DPC_COMPILER_API const char *dpc_message_brief(const dpc_message *m) {
  return m && m->msg ? m->msg : "";
}

/* ---- arrays ------------------------------------------------------------------------------ */

DPC_COMPILER_API void dpc_arrays_free(dpc_array *v, unsigned n) {
  if (!v) return;
  for (unsigned i = 0; i < n; i++) {
    free((char *)v[i].name);
    free(v[i].data);
  }
  free(v);
}

static void to_array(dpc_named *src, dpc_array *a) {
  memset(a, 0, sizeof *a);
  a->name = src->name;
  a->elem = (dpc_elem)src->t.dtype;
  a->rank = src->t.shape.rank;
  for (unsigned k = 0; k < a->rank && k < DPC_TENSOR_MAX_RANK; k++) a->dims[k] = src->t.shape.d[k];
  a->data = src->t.data;
  a->bytes = dpc_tensor_bytes(&src->t);
  src->name = NULL;
  src->t.data = NULL;
}

static dpc_status from_array(const dpc_array *a, dpc_named *out, dpc_diag *d) {
  if ((unsigned)a->elem > DPC_ELEM_BOOL)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "'%s': element type %d is not one dpc knows",
                         a->name ? a->name : "(unnamed)", (int)a->elem);
  if (a->rank > DPC_MAX_RANK || a->rank > DPC_TENSOR_MAX_RANK)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "'%s': rank %u is more than the %d dpc takes",
                         a->name ? a->name : "(unnamed)", a->rank, DPC_MAX_RANK);
  out->name = (char *)a->name;
  out->t.data = a->data;
  out->t.dtype = (dpc_dtype)a->elem;
  out->t.shape.rank = a->rank;
  for (unsigned k = 0; k < a->rank; k++) {
    if (a->dims[k] < 0)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "'%s': dimension %u is negative (%lld)",
                           a->name ? a->name : "(unnamed)", k, (long long)a->dims[k]);
    out->t.shape.d[k] = a->dims[k];
  }
  size_t want = dpc_tensor_bytes(&out->t);
  if (a->bytes != want)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "'%s': %zu bytes given for a tensor of %zu",
                         a->name ? a->name : "(unnamed)", a->bytes, want);
  return DPC_OK;
}

dpc_status dpc_api_named(const dpc_array *a, unsigned n, dpc_named **out, dpc_diag *d) {
  *out = calloc(n ? n : 1, sizeof **out);
  if (!*out) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  for (unsigned i = 0; i < n; i++) {
    dpc_status st = from_array(&a[i], &(*out)[i], d);
    if (st) {
      free(*out);
      *out = NULL;
      return st;
    }
  }
  return DPC_OK;
}

dpc_status dpc_api_arrays(dpc_named *v, uint32_t n, dpc_array **out, dpc_diag *d) {
  *out = calloc(n ? n : 1, sizeof **out);
  if (!*out) {
    dpc_named_free(v, n);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < n; i++) to_array(&v[i], &(*out)[i]);
  dpc_named_free(v, n);
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_npy_load(const char *path, dpc_array *out, dpc_message *m) {
  memset(out, 0, sizeof *out);
  dpc_named v = {0};
  dpc_status st = dpc_npy_read(path, &v.t, m);
  if (st) return st;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t len = strlen(base);
  if (len > 4 && !strcmp(base + len - 4, ".npy")) len -= 4;
  v.name = malloc(len + 1);
  if (!v.name) {
    free(v.t.data);
    return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  }
  memcpy(v.name, base, len);
  v.name[len] = 0;
  to_array(&v, out);
  return DPC_OK;
}

DPC_COMPILER_API dpc_status dpc_npy_save(const char *path, const dpc_array *a, dpc_message *m) {
  dpc_named v;
  dpc_status st = from_array(a, &v, m);
  return st ? st : dpc_npy_write(path, &v.t, m);
}

/* ---- build options ----------------------------------------------------------------------- */

DPC_COMPILER_API bool dpc_backend_exists(const char *name) {
  const dpc_codegen_backend *be;
  return name && !dpc_codegen_backend_find(name, &be, NULL);
}

/* The cuda backend's options: refused by the others (they would be ignored), and checked by
 * opening the backend, which parses them (it compiles nothing). */
static dpc_status check_cuda_opts(const dpc_exec_opts *x, dpc_diag *d) {
  const dpc_codegen_options *o = &x->cpu;
  bool arch = o->cuda_arch && *o->cuda_arch;
  bool prec = o->precision && *o->precision && strcmp(o->precision, "fp32");
  if (!arch && !prec) return DPC_OK;
  if (x->backend->kind != DPC_KERNEL_CUDA)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s applies to the cuda backend (GPU kernels, matmuls on cuBLAS), and "
                         "the %s backend is asked for",
                         arch ? "a CUDA architecture list" : "a precision other than fp32",
                         x->backend->name);
  dpc_codegen *cg = NULL;
  dpc_status st = dpc_codegen_new(x->backend, o, &cg, d);
  dpc_codegen_free(cg);
  return st;
}

dpc_status dpc_api_build(const dpc_build_opts *b, dpc_exec_opts *x, dpc_pass_opts *po,
                         dpc_diag *d) {
  memset(x, 0, sizeof *x);
  const char *name = DPC_API_HAS(b, backend) && b->backend ? b->backend : "llvm";
  dpc_status st = dpc_codegen_backend_find(name, &x->backend, d);
  if (st) return st;
  if (DPC_API_HAS(b, on_llvm)) x->cpu.dump = b->on_llvm, x->cpu.user = b->user;
  if (DPC_API_HAS(b, cache_dir)) x->cpu.cache_dir = b->cache_dir;
  if (DPC_API_HAS(b, cuda_arch)) x->cpu.cuda_arch = b->cuda_arch;
  if (DPC_API_HAS(b, precision)) x->cpu.precision = b->precision;
  if ((st = check_cuda_opts(x, d))) return st;
  if (po) {
    memset(po, 0, sizeof *po);
    po->fuse = dpc_codegen_fusion(x->backend);
    if (DPC_API_HAS(b, verify_each)) po->verify_each = b->verify_each;
    if (DPC_API_HAS(b, on_dump) && b->print_after) {
      if ((st = dpc_passes_check_names(b->print_after, d))) return st;
      po->print_after = b->print_after, po->dump = b->on_dump, po->user = b->user;
    }
  }
  return DPC_OK;
}

/* ---- models ------------------------------------------------------------------------------ */

DPC_COMPILER_API dpc_status dpc_net_load(const char *path, const dpc_load_opts *o, dpc_net **out,
                                         dpc_message *m) {
  *out = NULL;
  if (!path) return dpc_diag_fail(m, DPC_ERR_INVALID, "no model path given");
  dpc_net *n = calloc(1, sizeof *n);
  if (!n || !(n->path = dpc_strdup(path))) {
    free(n);
    return dpc_diag_fail(m, DPC_ERR_NOMEM, "out of memory");
  }
  dpc_status st;
  const dpc_array *known = DPC_API_HAS(o, known) ? o->known : NULL;
  unsigned n_known = known && DPC_API_HAS(o, n_known) ? o->n_known : 0;
  if (n_known) {
    dpc_named *k = NULL;
    st = dpc_api_named(known, n_known, &k, m);
    if (!st) st = dpc_driver_load_known(path, k, n_known, &n->g, m);
    free(k);
  } else if (DPC_API_HAS(o, batched) && o->batched) {
    st = dpc_driver_load_batched(path, &n->g, &n->fixed, m);
  } else {
    st = dpc_driver_load(path, &n->g, m);
  }
  if (!st && DPC_API_HAS(o, loss) && o->loss) st = dpc_driver_attach_loss(n->g, o->loss, m);
  if (st) {
    dpc_net_free(n);
    return st;
  }
  *out = n;
  return DPC_OK;
}

DPC_COMPILER_API void dpc_net_free(dpc_net *n) {
  if (!n) return;
  dpc_graph_free(n->g);
  free(n->path);
  free(n->fixed);
  free(n);
}

DPC_COMPILER_API const char *dpc_net_name(const dpc_net *n) {
  return n->g->name != DPC_NONE ? dpc_graph_str(n->g, n->g->name) : n->path;
}

DPC_COMPILER_API const char *dpc_net_fixed_batch(const dpc_net *n) {
  return n->fixed;
}

DPC_COMPILER_API bool dpc_net_trainable(const dpc_net *n) {
  return n->g->obj.loss != DPC_NONE;
}

DPC_COMPILER_API void dpc_path_folder(const char *path, char *buf, size_t cap) {
  dpc_path_dir(path, buf, cap);
}

DPC_COMPILER_API bool dpc_path_is_artifact(const char *path) {
  return dpc_driver_is_artifact(path);
}

DPC_COMPILER_API dpc_status dpc_artifact_describe(const char *path, char *out, size_t n,
                                                  dpc_message *m) {
  return dpc_driver_describe_artifact(path, out, n, m);
}

/* ---- devices ----------------------------------------------------------------------------- */

DPC_COMPILER_API dpc_status dpc_gpus_count(const char *spec, uint32_t *n, dpc_message *m) {
  if (!spec || strncmp(spec, "cuda", 4))
    return dpc_diag_fail(m, DPC_ERR_INVALID, "%s: expected GPUs, as cuda:0,cuda:1,...",
                         spec ? spec : "(none)");
  return dpc_driver_count_devices(spec, n, m);
}

DPC_COMPILER_API const char *dpc_devices_gpus(const char *spec, bool *with_cpu) {
  return dpc_driver_gpus(spec, with_cpu);
}

DPC_COMPILER_API dpc_status dpc_devices_count(const char *spec, uint32_t *n, dpc_message *m) {
  return dpc_driver_count_cpu_devices(spec ? spec : "cpu", n, m);
}

DPC_COMPILER_API bool dpc_parse_size(const char *text, uint64_t *out) {
  return text && dpc_driver_parse_size(text, out);
}
