/*
 * npy.c — reading and writing .npy files.
 *
 * The header is a Python dict literal; this reads exactly the subset NumPy writes ('descr',
 * 'fortran_order', 'shape' with strings, booleans and tuples of integers) and rejects the rest.
 */
#include "runtime/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hdr {
  const char *s, *e; /* the header text */
  const char *name;
  dpc_diag *d;
} hdr;

static dpc_status bad(hdr *h, const char *what) {
  return dpc_diag_fail(h->d, DPC_ERR_SYNTAX, "%s: not a valid .npy header: %s", h->name, what);
}

static void ws(hdr *h) {
  while (h->s < h->e && (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r')) h->s++;
}

static bool eat(hdr *h, char c) {
  ws(h);
  if (h->s < h->e && *h->s == c) {
    h->s++;
    return true;
  }
  return false;
}

/* A quoted string into buf (truncating is an error). */
static bool str(hdr *h, char *buf, size_t n) {
  ws(h);
  if (h->s >= h->e || (*h->s != '\'' && *h->s != '"')) return false;
  char q = *h->s++;
  size_t k = 0;
  while (h->s < h->e && *h->s != q) {
    if (k + 1 >= n) return false;
    buf[k++] = *h->s++;
  }
  if (h->s >= h->e) return false;
  h->s++;
  buf[k] = 0;
  return true;
}

static dpc_status parse_header(hdr *h, char *descr, size_t dn, bool *fortran, dpc_shape *shape) {
  bool got_d = false, got_f = false, got_s = false;
  if (!eat(h, '{')) return bad(h, "it does not start with '{'");
  while (!eat(h, '}')) {
    char key[32];
    if (!str(h, key, sizeof key)) return bad(h, "expected a quoted key");
    if (!eat(h, ':')) return bad(h, "expected ':' after a key");
    if (!strcmp(key, "descr")) {
      if (!str(h, descr, dn))
        return bad(h, "'descr' is not a short string (structured dtypes are not supported)");
      got_d = true;
    } else if (!strcmp(key, "fortran_order")) {
      ws(h);
      if (h->e - h->s >= 4 && !memcmp(h->s, "True", 4))
        *fortran = true, h->s += 4;
      else if (h->e - h->s >= 5 && !memcmp(h->s, "False", 5))
        *fortran = false, h->s += 5;
      else
        return bad(h, "'fortran_order' is not True or False");
      got_f = true;
    } else if (!strcmp(key, "shape")) {
      if (!eat(h, '(')) return bad(h, "'shape' is not a tuple");
      shape->rank = 0;
      while (!eat(h, ')')) {
        ws(h);
        if (shape->rank == DPC_MAX_RANK) return bad(h, "more dimensions than dpc supports (8)");
        int64_t v = 0;
        const char *st = h->s;
        while (h->s < h->e && *h->s >= '0' && *h->s <= '9') {
          if (v > (INT64_C(1) << 40)) return bad(h, "a dimension is too large");
          v = v * 10 + (*h->s++ - '0');
        }
        if (h->s == st) return bad(h, "a dimension is not a number");
        if (h->s < h->e && *h->s == 'L') h->s++;
        shape->d[shape->rank++] = v;
        if (!eat(h, ',')) {
          if (!eat(h, ')')) return bad(h, "expected ',' or ')' in the shape");
          break;
        }
      }
      got_s = true;
    } else {
      return bad(h, "unknown key");
    }
    if (!eat(h, ',')) {
      if (!eat(h, '}')) return bad(h, "expected ',' or '}'");
      break;
    }
  }
  if (!got_d || !got_f || !got_s) return bad(h, "'descr', 'fortran_order' or 'shape' is missing");
  return DPC_OK;
}

dpc_status dpc_npy_parse(const void *buf, size_t len, const char *name, dpc_tensor *out,
                         dpc_diag *d) {
  const unsigned char *b = buf;
  memset(out, 0, sizeof *out);
  if (len < 10 || memcmp(b, "\x93NUMPY", 6))
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: not a .npy file (no \\x93NUMPY magic)", name);
  unsigned major = b[6];
  size_t hlen, start;
  if (major == 1) {
    hlen = b[8] | (size_t)b[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: truncated .npy header", name);
    hlen = b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    start = 12;
  } else {
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: .npy format version %u is not supported",
                         name, major);
  }
  if (hlen > len - start)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: truncated .npy header", name);
  hdr h = {(const char *)b + start, (const char *)b + start + hlen, name, d};
  char descr[16];
  bool fortran = false;
  dpc_shape shape = {0};
  dpc_status st = parse_header(&h, descr, sizeof descr, &fortran, &shape);
  if (st) return st;
  if (fortran && shape.rank > 1)
    return dpc_diag_fail(
        d, DPC_ERR_UNSUPPORTED,
        "%s: Fortran-ordered arrays are not supported (save np.ascontiguousarray(a))", name);
  static const struct {
    const char *descr;
    dpc_dtype t;
    size_t size;
  } types[] = {{"f4", DPC_F32, 4}, {"f8", DPC_F64, 8},  {"f2", DPC_F16, 2}, {"i4", DPC_I32, 4},
               {"i8", DPC_I64, 8}, {"b1", DPC_BOOL, 1}, {"u1", DPC_I32, 1}};
  if (descr[0] == '>' && descr[1] && strcmp(descr + 1, "b1") && strcmp(descr + 1, "u1"))
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: big-endian data ('%s') is not supported",
                         name, descr);
  if (descr[0] != '<' && descr[0] != '|' && descr[0] != '=' && descr[0] != '>')
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: dtype '%s' is not supported", name, descr);
  int ti = -1;
  for (int i = 0; i < (int)(sizeof types / sizeof *types); i++)
    if (!strcmp(descr + 1, types[i].descr)) ti = i;
  if (ti < 0)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: dtype '%s' is not supported (f4, f8, f2, i4, i8, b1, u1 are)", name,
                         descr);
  int64_t numel = 1;
  for (uint32_t i = 0; i < shape.rank; i++) {
    if (shape.d[i] && numel > (INT64_C(1) << 40) / shape.d[i])
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED, "%s: array too large", name);
    numel *= shape.d[i];
  }
  size_t need = (size_t)numel * types[ti].size, have = len - start - hlen;
  if (have < need)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s: truncated: the header promises %zu bytes of data, %zu follow", name,
                         need, have);
  dpc_tensor t = {NULL, types[ti].t, shape};
  size_t bytes = (size_t)numel * dpc_dtype_size(t.dtype);
  t.data = malloc(bytes ? bytes : 1);
  if (!t.data) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", name);
  const unsigned char *src = b + start + hlen;
  if (!strcmp(descr + 1, "u1")) {
    for (int64_t i = 0; i < numel; i++) dpc_tstore_i64(&t, i, src[i]);
  } else {
    if (bytes) memcpy(t.data, src, bytes);
  }
  *out = t;
  return DPC_OK;
}

dpc_status dpc_npy_read(const char *path, dpc_tensor *out, dpc_diag *d) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return dpc_diag_fail(d, DPC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 65536 > cap) {
      size_t nc = cap ? cap * 2 : 1 << 17;
      char *p = realloc(buf, nc);
      if (!p) {
        free(buf);
        fclose(f);
        return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory reading '%s'", path);
      }
      buf = p;
      cap = nc;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (!got) break;
  }
  bool err = ferror(f);
  fclose(f);
  dpc_status st = err ? dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s'", path)
                      : dpc_npy_parse(buf, n, path, out, d);
  free(buf);
  return st;
}

dpc_status dpc_npy_write(const char *path, const dpc_tensor *t, dpc_diag *d) {
  dpc_tensor w = *t;
  void *conv = NULL;
  if (t->dtype == DPC_BF16) {
    w.dtype = DPC_F32;
    int64_t n = dpc_tensor_numel(t);
    conv = malloc((size_t)(n ? n : 1) * 4);
    if (!conv) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory writing '%s'", path);
    w.data = conv;
    for (int64_t i = 0; i < n; i++) dpc_tstore(&w, i, dpc_tload(t, i));
  }
  static const char *const descr[DPC_DTYPE_COUNT] = {
      [DPC_F32] = "<f4", [DPC_F16] = "<f2",  [DPC_F64] = "<f8", [DPC_I32] = "<i4",
      [DPC_I64] = "<i8", [DPC_BOOL] = "|b1", [DPC_BF16] = "<f4"};
  char shape[256] = "";
  size_t k = 0;
  for (uint32_t i = 0; i < w.shape.rank; i++)
    k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld,%s", (long long)w.shape.d[i],
                          i + 1 < w.shape.rank ? " " : "");
  if (w.shape.rank > 1) shape[k - 1] = 0; /* NumPy writes (2, 3) but (5,) */
  char h[512];
  int hn = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                    descr[w.dtype], shape);
  /* Pad with spaces so the data starts on a 64-byte boundary, then a newline. */
  size_t total = 10 + (size_t)hn + 1;
  size_t pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(conv);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  }
  size_t hl = (size_t)hn + pad + 1;
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)hn, f) == (size_t)hn;
  for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF;
  size_t bytes = dpc_tensor_bytes(&w);
  ok = ok && (bytes == 0 || fwrite(w.data, 1, bytes, f) == bytes);
  ok = (fclose(f) == 0) && ok;
  free(conv);
  if (!ok) return dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  return DPC_OK;
}
