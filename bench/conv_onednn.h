/*
 * conv_onednn.h — oneDNN's convolutions for bench_conv --onednn (built only where libdnnl is
 * found: bench/setup installs it). Nothing in the product links oneDNN.
 */
#ifndef DPC_BENCH_CONV_ONEDNN_H
#define DPC_BENCH_CONV_ONEDNN_H

#include <stddef.h>
#include <stdint.h>

enum { ONEDNN_FWD, ONEDNN_BWD_DATA, ONEDNN_BWD_WEIGHTS };

/* A 2-D convolution's geometry, NCHW; dilations as dpc writes them (1 = none). */
typedef struct onednn_conv {
  int64_t n, c, h, w, oc, kh, kw, oh, ow;
  int64_t sh, sw, pt, pl, pb, pr, dh, dw, groups;
} onednn_conv;

/* Best-of-`reps` seconds of one call on one thread: in oneDNN's own layouts (own_s), and fed
 * NCHW with the reorders timed (nchw_s); `impl` names the implementation oneDNN chose. Exits the
 * program on an oneDNN error. */
int onednn_conv_time(const onednn_conv *c, int op, int reps, double *own_s, double *nchw_s,
                     char *impl, size_t impl_n);

#endif
