/*
 * conv_onednn.c — oneDNN's convolution (Debian libdnnl 2.6, the library behind PyTorch's CPU
 * convolutions), forward and both gradients, timed for bench_conv --onednn on one thread.
 *
 * Two figures per case:
 *  - "own layouts": every memory descriptor is format_tag_any, so oneDNN picks its blocked
 *    layouts (nChw16c and friends) and the reorders into them are done once, before timing.
 *    This is oneDNN at its best: a framework that keeps tensors in those layouts between layers.
 *  - "from NCHW": the same primitive fed plain NCHW/OIHW buffers, with the reorders into and
 *    out of its layouts timed as part of each call: what a caller holding NCHW tensors pays
 *    (PyTorch's eager convolutions do this).
 * The best of `reps` calls is kept, as bench_conv does for dpc.
 */
#include "bench/conv_onednn.h"

#include <dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CK(x)                                                                                      \
  do {                                                                                             \
    dnnl_status_t s_ = (x);                                                                        \
    if (s_ != dnnl_success) {                                                                      \
      fprintf(stderr, "bench_conv: oneDNN: %s failed (status %d)\n", #x, (int)s_);                 \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* A buffer in the primitive's layout `md`, and the plain one it is reordered from or to. */
typedef struct slot {
  dnnl_memory_t plain, own;
  dnnl_primitive_t to_own, to_plain; /* NULL when the layouts are the same */
} slot;

static void slot_init(slot *s, dnnl_engine_t eng, const dnnl_memory_desc_t *plain_md,
                      const dnnl_memory_desc_t *own_md, void *data) {
  memset(s, 0, sizeof *s);
  CK(dnnl_memory_create(&s->plain, plain_md, eng, data));
  if (dnnl_memory_desc_equal(plain_md, own_md)) {
    s->own = s->plain;
    return;
  }
  CK(dnnl_memory_create(&s->own, own_md, eng, DNNL_MEMORY_ALLOCATE));
  dnnl_primitive_desc_t pd;
  CK(dnnl_reorder_primitive_desc_create(&pd, plain_md, eng, own_md, eng, NULL));
  CK(dnnl_primitive_create(&s->to_own, pd));
  dnnl_primitive_desc_destroy(pd);
  CK(dnnl_reorder_primitive_desc_create(&pd, own_md, eng, plain_md, eng, NULL));
  CK(dnnl_primitive_create(&s->to_plain, pd));
  dnnl_primitive_desc_destroy(pd);
}

static void reorder(dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to, dnnl_stream_t st) {
  if (!r) return;
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  CK(dnnl_primitive_execute(r, st, 2, a));
}

static void slot_free(slot *s) {
  if (s->own != s->plain) dnnl_memory_destroy(s->own);
  dnnl_memory_destroy(s->plain);
  if (s->to_own) dnnl_primitive_destroy(s->to_own);
  if (s->to_plain) dnnl_primitive_destroy(s->to_plain);
}

int onednn_conv_time(const onednn_conv *c, int op, int reps, double *own_s, double *nchw_s,
                     char *impl, size_t impl_n) {
  omp_set_num_threads(1);
  dnnl_engine_t eng;
  dnnl_stream_t st;
  CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  dnnl_dims_t xd = {c->n, c->c, c->h, c->w}, yd = {c->n, c->oc, c->oh, c->ow};
  dnnl_dims_t wd = {c->groups, c->oc / c->groups, c->c / c->groups, c->kh, c->kw};
  dnnl_dims_t strides = {c->sh, c->sw}, dil = {c->dh - 1, c->dw - 1};
  dnnl_dims_t pl = {c->pt, c->pl}, pr = {c->pb, c->pr};
  bool grouped = c->groups > 1;
  if (!grouped) memmove(wd, wd + 1, 4 * sizeof wd[0]);
  int wrank = grouped ? 5 : 4;
  dnnl_memory_desc_t x_plain, y_plain, w_plain, x_any, y_any, w_any;
  CK(dnnl_memory_desc_init_by_tag(&x_plain, 4, xd, dnnl_f32, dnnl_nchw));
  CK(dnnl_memory_desc_init_by_tag(&y_plain, 4, yd, dnnl_f32, dnnl_nchw));
  CK(dnnl_memory_desc_init_by_tag(&w_plain, wrank, wd, dnnl_f32, grouped ? dnnl_goihw : dnnl_oihw));
  CK(dnnl_memory_desc_init_by_tag(&x_any, 4, xd, dnnl_f32, dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&y_any, 4, yd, dnnl_f32, dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&w_any, wrank, wd, dnnl_f32, dnnl_format_tag_any));
  /* the forward descriptor: the primitive itself, or the hint the backward ones need */
  dnnl_convolution_desc_t fd, bd;
  CK(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                                &x_any, &w_any, NULL, &y_any, strides, dil, pl,
                                                pr));
  dnnl_primitive_desc_t fpd, pd;
  CK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
  if (op == ONEDNN_FWD) {
    pd = fpd;
  } else {
    if (op == ONEDNN_BWD_DATA)
      CK(dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x_any,
                                                          &w_any, &y_any, strides, dil, pl, pr));
    else
      CK(dnnl_dilated_convolution_backward_weights_desc_init(
          &bd, dnnl_convolution_direct, &x_any, &w_any, NULL, &y_any, strides, dil, pl, pr));
    CK(dnnl_primitive_desc_create(&pd, &bd, NULL, eng, fpd));
  }
  const char *name = NULL;
  CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name));
  snprintf(impl, impl_n, "%s", name ? name : "?");
  /* which tensors the primitive reads and which one it writes */
  int args_in[2], arg_out;
  dnnl_query_t q_in[2], q_out;
  const dnnl_memory_desc_t *plain_in[2], *plain_out;
  if (op == ONEDNN_FWD) {
    args_in[0] = DNNL_ARG_SRC, args_in[1] = DNNL_ARG_WEIGHTS, arg_out = DNNL_ARG_DST;
    q_in[0] = dnnl_query_src_md, q_in[1] = dnnl_query_weights_md, q_out = dnnl_query_dst_md;
    plain_in[0] = &x_plain, plain_in[1] = &w_plain, plain_out = &y_plain;
  } else if (op == ONEDNN_BWD_DATA) {
    args_in[0] = DNNL_ARG_DIFF_DST, args_in[1] = DNNL_ARG_WEIGHTS, arg_out = DNNL_ARG_DIFF_SRC;
    q_in[0] = dnnl_query_diff_dst_md, q_in[1] = dnnl_query_weights_md,
    q_out = dnnl_query_diff_src_md;
    plain_in[0] = &y_plain, plain_in[1] = &w_plain, plain_out = &x_plain;
  } else {
    args_in[0] = DNNL_ARG_DIFF_DST, args_in[1] = DNNL_ARG_SRC, arg_out = DNNL_ARG_DIFF_WEIGHTS;
    q_in[0] = dnnl_query_diff_dst_md, q_in[1] = dnnl_query_src_md,
    q_out = dnnl_query_diff_weights_md;
    plain_in[0] = &y_plain, plain_in[1] = &x_plain, plain_out = &w_plain;
  }
  slot in[2], out;
  float *bufs[3];
  for (int i = 0; i < 3; i++) {
    const dnnl_memory_desc_t *md = i < 2 ? plain_in[i] : plain_out;
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
    bufs[i] = malloc(n * sizeof(float));
    if (!bufs[i]) exit(1);
    for (size_t j = 0; j < n; j++) bufs[i][j] = (float)((j * 2654435761u) % 1000) / 500.0f - 1.0f;
  }
  for (int i = 0; i < 2; i++)
    slot_init(&in[i], eng, plain_in[i], dnnl_primitive_desc_query_md(pd, q_in[i], 0), bufs[i]);
  slot_init(&out, eng, plain_out, dnnl_primitive_desc_query_md(pd, q_out, 0), bufs[2]);
  /* scratchpad: the library's own, allocated by the primitive (the default mode) */
  dnnl_primitive_t prim;
  CK(dnnl_primitive_create(&prim, pd));
  dnnl_exec_arg_t a[3] = {{args_in[0], in[0].own}, {args_in[1], in[1].own}, {arg_out, out.own}};
  for (int i = 0; i < 2; i++) reorder(in[i].to_own, in[i].plain, in[i].own, st);
  CK(dnnl_stream_wait(st));
  double best_own = 1e30, best_nchw = 1e30;
  for (int r = 0; r < reps + 1; r++) { /* the first call warms up */
    double t0 = now_s();
    CK(dnnl_primitive_execute(prim, st, 3, a));
    CK(dnnl_stream_wait(st));
    double t = now_s() - t0;
    if (r && t < best_own) best_own = t;
  }
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now_s();
    for (int i = 0; i < 2; i++) reorder(in[i].to_own, in[i].plain, in[i].own, st);
    CK(dnnl_primitive_execute(prim, st, 3, a));
    reorder(out.to_plain, out.own, out.plain, st);
    CK(dnnl_stream_wait(st));
    double t = now_s() - t0;
    if (r && t < best_nchw) best_nchw = t;
  }
  *own_s = best_own;
  *nchw_s = best_nchw;
  dnnl_primitive_destroy(prim);
  for (int i = 0; i < 2; i++) slot_free(&in[i]);
  slot_free(&out);
  for (int i = 0; i < 3; i++) free(bufs[i]);
  if (pd != fpd) dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_desc_destroy(fpd);
  dnnl_stream_destroy(st);
  dnnl_engine_destroy(eng);
  return 0;
}
