/*
 * onnx_lstm.c — ONNX LSTM, unrolled over its (fixed) sequence into matmuls, slices and
 * elementwise ops, so it trains through dpc's ordinary gradients without an op of its own.
 *
 * Per direction, the input projection of every step is one matmul over the whole sequence;
 * each step then adds h_{t-1} R^T and applies the gates in ONNX's order (input, output,
 * forget, cell): c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t). Peepholes (P) add P * c to
 * the input and forget gates (c_{t-1}) and the output gate (c_t).
 */
#include "frontend/onnx_nn.h"

#include <stdlib.h>
#include <string.h>

#define IN(i) onnx_in(c, (i))
#define OOM() onnx_fail(c, DPC_ERR_NOMEM, "out of memory")

/* Row d of a [D, ...] tensor, without its first axis. */
static uint32_t row(onnx_ctx *c, uint32_t x, int64_t d) {
  if (x == DPC_NONE) return DPC_NONE;
  const dpc_shape *s = &c->g->values[x].shape;
  dpc_shape r = {.rank = s->rank - 1};
  memcpy(r.d, s->d + 1, r.rank * sizeof *r.d);
  return onnx_reshape(c, onnx_slice(c, x, 0, d, d + 1, 1), r.d, r.rank);
}

/* What of LSTM dpc does not import: non-default activations, clipping, coupled gates,
 * sequences of varying length. */
static dpc_status check_lstm(onnx_ctx *c, int64_t seq) {
  const Onnx__AttributeProto *a = onnx_attr(c, "activations");
  static const char *const want[] = {"Sigmoid", "Tanh", "Tanh"};
  for (size_t i = 0; a && i < a->n_strings; i++) {
    size_t n = strlen(want[i % 3]);
    if (a->strings[i].len != n || memcmp(a->strings[i].data, want[i % 3], n))
      return onnx_fail(c, DPC_ERR_UNSUPPORTED, "LSTM with activations other than the defaults");
  }
  if (onnx_attr(c, "clip")) return onnx_fail(c, DPC_ERR_UNSUPPORTED, "LSTM with clip");
  if (onnx_attr_i(c, "input_forget", 0))
    return onnx_fail(c, DPC_ERR_UNSUPPORTED, "LSTM with input_forget");
  if (onnx_has_in(c, 4)) {
    const onnx_const *k = onnx_in_known(c, 4);
    for (int64_t i = 0; k && i < dpc_tensor_numel(&k->t); i++)
      if (dpc_tload_i64(&k->t, i) != seq) k = NULL;
    if (!k)
      return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                       "LSTM with sequence_lens other than the whole sequence");
  }
  return DPC_OK;
}

dpc_status dpc_onnx_imp_lstm(onnx_ctx *c) {
  uint32_t x = IN(0), w = IN(1), r = IN(2);
  if (x == DPC_NONE || w == DPC_NONE || r == DPC_NONE) return c->d->status;
  char dir[32];
  onnx_attr_s(c, "direction", "forward", dir, sizeof dir);
  int64_t layout = onnx_attr_i(c, "layout", 0), hid = onnx_attr_i(c, "hidden_size", -1);
  uint32_t ndir = !strcmp(dir, "bidirectional") ? 2 : 1;
  if (strcmp(dir, "forward") && strcmp(dir, "reverse") && ndir == 1)
    return onnx_fail(c, DPC_ERR_INVALID, "unknown direction '%s'", dir);
  if (layout) x = onnx_transpose(c, x, (const int64_t[]){1, 0, 2}, 3);
  if (x == DPC_NONE) return c->d->status;
  const dpc_shape xs = c->g->values[x].shape; /* a copy: adding nodes moves the values */
  if (xs.rank != 3) return onnx_fail(c, DPC_ERR_INVALID, "X must be of rank 3");
  int64_t seq = xs.d[0], batch = xs.d[1];
  if (DPC_DIM_IS_SYM(seq) || seq < 1 || seq > 4096)
    return onnx_fail(c, DPC_ERR_UNSUPPORTED,
                     "LSTM over a sequence of symbolic or zero length, "
                     "or longer than 4096 steps (dpc unrolls it)");
  if (hid < 1 || hid > (1 << 20))
    return onnx_fail(c, DPC_ERR_INVALID, "hidden_size must be between 1 and 2^20");
  dpc_status st = check_lstm(c, seq);
  if (st) return st;
  uint32_t b = onnx_has_in(c, 3) ? IN(3) : DPC_NONE, p = onnx_has_in(c, 7) ? IN(7) : DPC_NONE;
  uint32_t h0 = onnx_has_in(c, 5) ? IN(5) : DPC_NONE, c0 = onnx_has_in(c, 6) ? IN(6) : DPC_NONE;
  if (layout) {
    if (h0 != DPC_NONE) h0 = onnx_transpose(c, h0, (const int64_t[]){1, 0, 2}, 3);
    if (c0 != DPC_NONE) c0 = onnx_transpose(c, c0, (const int64_t[]){1, 0, 2}, 3);
  }
  if (c->d->status) return c->d->status;
  /* Every weight's shape is checked here, before slicing rows out of it. */
  const struct {
    uint32_t v;
    const char *name;
    uint32_t rank;
    int64_t d1, d2;
  } want[] = {{w, "W", 3, 4 * hid, xs.d[2]},    {r, "R", 3, 4 * hid, hid},
              {b, "B", 2, 8 * hid, 0},          {p, "P", 2, 3 * hid, 0},
              {h0, "initial_h", 3, batch, hid}, {c0, "initial_c", 3, batch, hid}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    if (want[i].v == DPC_NONE) continue;
    const dpc_shape *s = &c->g->values[want[i].v].shape;
    if (s->rank != want[i].rank || s->d[0] != ndir || s->d[1] != want[i].d1 ||
        (want[i].rank == 3 && s->d[2] != want[i].d2))
      return onnx_fail(c, DPC_ERR_INVALID, "%s has the wrong shape for hidden_size %lld",
                       want[i].name, (long long)hid);
  }
  uint32_t *hs = malloc((size_t)seq * sizeof *hs), ys[2], yh[2], yc[2];
  if (!hs) return OOM();
  for (uint32_t d = 0; d < ndir; d++) {
    bool rev = !strcmp(dir, "reverse") || d == 1;
    uint32_t wd = row(c, w, d), rd = row(c, r, d);
    uint32_t xw = onnx_matmul(c, x, wd, false, true);
    if (b != DPC_NONE) {
      uint32_t bd = row(c, b, d);
      xw = onnx_bin(c, DPC_OP_ADD, xw,
                    onnx_bin(c, DPC_OP_ADD, onnx_slice(c, bd, 0, 0, 4 * hid, 1),
                             onnx_slice(c, bd, 0, 4 * hid, 8 * hid, 1)));
    }
    uint32_t pi = DPC_NONE, po = DPC_NONE, pf = DPC_NONE;
    if (p != DPC_NONE) {
      uint32_t pd = row(c, p, d);
      pi = onnx_slice(c, pd, 0, 0, hid, 1), po = onnx_slice(c, pd, 0, hid, 2 * hid, 1),
      pf = onnx_slice(c, pd, 0, 2 * hid, 3 * hid, 1);
    }
    uint32_t h = h0 != DPC_NONE ? row(c, h0, d) : DPC_NONE;
    uint32_t cs = c0 != DPC_NONE ? row(c, c0, d) : DPC_NONE;
    int64_t g2[2] = {batch, 4 * hid}, h4[4] = {1, 1, batch, hid};
    for (int64_t k = 0; k < seq && !c->d->status; k++) {
      int64_t t = rev ? seq - 1 - k : k;
      uint32_t g = onnx_reshape(c, onnx_slice(c, xw, 0, t, t + 1, 1), g2, 2);
      if (h != DPC_NONE) g = onnx_bin(c, DPC_OP_ADD, g, onnx_matmul(c, h, rd, false, true));
      uint32_t gi = onnx_slice(c, g, 1, 0, hid, 1), go = onnx_slice(c, g, 1, hid, 2 * hid, 1);
      uint32_t gf = onnx_slice(c, g, 1, 2 * hid, 3 * hid, 1),
               gc = onnx_slice(c, g, 1, 3 * hid, 4 * hid, 1);
      if (pi != DPC_NONE && cs != DPC_NONE) {
        gi = onnx_bin(c, DPC_OP_ADD, gi, onnx_bin(c, DPC_OP_MUL, pi, cs));
        gf = onnx_bin(c, DPC_OP_ADD, gf, onnx_bin(c, DPC_OP_MUL, pf, cs));
      }
      uint32_t i = onnx_un(c, DPC_OP_SIGMOID, gi), f = onnx_un(c, DPC_OP_SIGMOID, gf);
      uint32_t nc = onnx_bin(c, DPC_OP_MUL, i, onnx_un(c, DPC_OP_TANH, gc));
      if (cs != DPC_NONE) nc = onnx_bin(c, DPC_OP_ADD, onnx_bin(c, DPC_OP_MUL, f, cs), nc);
      cs = nc;
      if (po != DPC_NONE) go = onnx_bin(c, DPC_OP_ADD, go, onnx_bin(c, DPC_OP_MUL, po, cs));
      h = onnx_bin(c, DPC_OP_MUL, onnx_un(c, DPC_OP_SIGMOID, go), onnx_un(c, DPC_OP_TANH, cs));
      hs[t] = onnx_reshape(c, h, h4, 4);
    }
    if (c->d->status) break;
    ys[d] = onnx_concat(c, hs, (uint32_t)seq, 0);
    yh[d] = onnx_reshape(c, h, h4 + 1, 3);
    yc[d] = onnx_reshape(c, cs, h4 + 1, 3);
  }
  free(hs);
  if (c->d->status) return c->d->status;
  uint32_t y = onnx_concat(c, ys, ndir, 1), hy = onnx_concat(c, yh, ndir, 0),
           cy = onnx_concat(c, yc, ndir, 0);
  if (layout) {
    y = onnx_transpose(c, y, (const int64_t[]){2, 0, 1, 3}, 4);
    hy = onnx_transpose(c, hy, (const int64_t[]){1, 0, 2}, 3);
    cy = onnx_transpose(c, cy, (const int64_t[]){1, 0, 2}, 3);
  }
  if ((st = onnx_def(c, 0, y))) return st;
  if (onnx_n_out(c) > 1 && (st = onnx_def(c, 1, hy))) return st;
  if (onnx_n_out(c) > 2 && (st = onnx_def(c, 2, cy))) return st;
  return DPC_OK;
}
