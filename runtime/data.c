/*
 * data.c — datasets (Fashion-MNIST, a folder of IDX files, a pair of .npy files), copying their
 * samples into batch tensors, and the per-epoch visiting order.
 *
 * Files are read whole at open and checked there (counts, dtypes, labels), so filling a batch
 * during training only copies and converts. uint8 pixels stay uint8 in memory (a quarter of
 * the f32 size) and are scaled while filling. This file must not print, exit, keep global
 * state or depend on anything above the runtime; byte-level parsing lives in idx.c.
 */
#include "runtime/data.h"

#include "runtime/npy.h"
#include "runtime/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct dpc_dataset {
  char *name;
  uint64_t n;
  dpc_shape sample;
  int64_t sample_numel;
  int64_t classes;
  /* Inputs are either bytes (IDX, npy u1), pointing into `owned`, or a float tensor. */
  const uint8_t *pixels;
  dpc_tensor floats;
  int32_t *labels; /* checked to be in [0, INT32_MAX) at open */
  void *owned;     /* the inflated IDX image file, or the npy u8 pixels */
  /* a caller's samples (dpc_dataset_from_source): filled batch by batch, none held here */
  bool from_source;
  dpc_dataset_source src;
};

static char *fmt_shape(char buf[160], const dpc_shape *s) {
  size_t k = (size_t)snprintf(buf, 160, "[");
  for (uint32_t i = 0; i < s->rank && k < 160; i++)
    k += (size_t)snprintf(buf + k, 160 - k, "%s%lld", i ? ", " : "", (long long)s->d[i]);
  if (k < 160) snprintf(buf + k, 160 - k, "]");
  return buf;
}

static char *join(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", a, b, c);
  return s;
}

void dpc_dataset_close(dpc_dataset *ds) {
  if (!ds) return;
  free(ds->name);
  free(ds->floats.data);
  free(ds->labels);
  free(ds->owned);
  free(ds);
}

/* Labels as int32 from any integer tensor or byte array, refusing negatives (they would index
 * outside the logits) and values no i32 label tensor can hold. Sets ds->classes. */
static dpc_status take_labels(dpc_dataset *ds, const char *file, const dpc_tensor *t,
                              const uint8_t *bytes, dpc_diag *d) {
  ds->labels = malloc((size_t)(ds->n ? ds->n : 1) * sizeof *ds->labels);
  if (!ds->labels) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", file);
  int64_t top = -1;
  for (uint64_t i = 0; i < ds->n; i++) {
    int64_t v = bytes ? bytes[i] : dpc_tload_i64(t, (int64_t)i);
    if (v < 0)
      return dpc_diag_fail(d, DPC_ERR_INVALID,
                           "%s: label %llu is %lld; labels are class numbers, 0 or more", file,
                           (unsigned long long)i, (long long)v);
    if (v >= INT32_MAX)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: label %llu is %lld, too large for a class",
                           file, (unsigned long long)i, (long long)v);
    ds->labels[i] = (int32_t)v;
    if (v > top) top = v;
  }
  ds->classes = top + 1;
  return DPC_OK;
}

/* ---- IDX folders -------------------------------------------------------------------------- */

/* Names tried, in order, for one file of a split: the MNIST site's gzip'd name, the same
 * unpacked, and the dotted name many unpackers produce. */
static const char *const idx_names[][3] = {
    {"%s-images-idx3-ubyte.gz", "%s-images-idx3-ubyte", "%s-images.idx3-ubyte"},
    {"%s-labels-idx1-ubyte.gz", "%s-labels-idx1-ubyte", "%s-labels.idx1-ubyte"},
};

/* The first existing candidate for images (which = 0) or labels (1) in dir, malloc'd; NULL,
 * with the names tried added to `tried`, when there is none. */
static char *find_idx(const char *dir, const char *prefix, int which, char *tried, size_t cap) {
  char names[3][64];
  for (int i = 0; i < 3; i++) {
    char path[4096];
    snprintf(names[i], sizeof names[i], idx_names[which][i], prefix);
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return dpc_strdup(path);
  }
  size_t k = strlen(tried);
  for (int i = 0; i < 3 && k < cap; i++)
    k += (size_t)snprintf(tried + k, cap - k, "%s%s", k ? ", " : "", names[i]);
  return NULL;
}

static dpc_status open_idx_dir(dpc_dataset *ds, const char *dir, dpc_split split, bool package,
                               dpc_diag *d) {
  /* Said after every error about the package's folder, so the fix is in the message. */
  const char *hint = package ? "; the data comes from the Debian package dataset-fashion-mnist: "
                               "install it with 'apt-get install dataset-fashion-mnist' or run "
                               "scripts/setup"
                             : "";
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return dpc_diag_fail(d, DPC_ERR_IO, "no dataset folder '%s'%s", dir, hint);
  const char *prefix = split == DPC_SPLIT_TEST ? "t10k" : "train";
  char tried[512] = "";
  char *img = find_idx(dir, prefix, 0, tried, sizeof tried);
  char *lab = find_idx(dir, prefix, 1, tried, sizeof tried);
  dpc_status st = DPC_OK;
  void *lbuf = NULL;
  if (!img || !lab) {
    st = dpc_diag_fail(d, DPC_ERR_IO, "folder '%s' has no %s %s: looked for %s%s", dir, prefix,
                       !img && !lab ? "images or labels"
                       : !img       ? "images"
                                    : "labels",
                       tried, hint);
    goto done;
  }
  size_t ilen, llen;
  dpc_idx im, lb;
  if ((st = dpc_data_read_file(img, &ds->owned, &ilen, d)) ||
      (st = dpc_idx_parse(ds->owned, ilen, img, &im, d)) ||
      (st = dpc_data_read_file(lab, &lbuf, &llen, d)) ||
      (st = dpc_idx_parse(lbuf, llen, lab, &lb, d)))
    goto done;
  if (im.shape.rank < 2) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: expected images (IDX magic 0x00000803: count, rows, columns), found "
                       "%u dimension",
                       img, im.shape.rank);
    goto done;
  }
  if (lb.shape.rank != 1) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: expected labels (IDX magic 0x00000801, one dimension), found %u "
                       "dimensions",
                       lab, lb.shape.rank);
    goto done;
  }
  if (im.shape.d[0] != lb.shape.d[0]) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s holds %lld images but %s holds %lld labels", img,
                       (long long)im.shape.d[0], lab, (long long)lb.shape.d[0]);
    goto done;
  }
  ds->n = (uint64_t)im.shape.d[0];
  ds->sample.rank = im.shape.rank - 1;
  memcpy(ds->sample.d, im.shape.d + 1, ds->sample.rank * sizeof *ds->sample.d);
  ds->pixels = im.data;
  st = take_labels(ds, lab, NULL, lb.data, d);
done:
  free(img);
  free(lab);
  free(lbuf);
  return st;
}

/* ---- npy pairs ---------------------------------------------------------------------------- */

/* The dtype text ('<f4', '|u1') of an .npy image that dpc_npy_parse accepted. The reader turns
 * u1 into i32, so this is how u1 pixels (scaled) are told from i4 (refused). */
static void npy_descr(const unsigned char *b, size_t len, char out[16]) {
  out[0] = 0;
  size_t start = b[6] == 1 ? 10 : 12;
  const char *h = (const char *)b + start, *e = (const char *)b + len, *p = h;
  while (p + 7 < e && memcmp(p, "'descr'", 7) && memcmp(p, "\"descr\"", 7)) p++;
  if (p + 7 >= e) return;
  for (p += 7; p < e && *p != '\'' && *p != '"'; p++) {
  }
  size_t k = 0;
  for (p++; p < e && *p != '\'' && *p != '"' && k < 15; p++) out[k++] = *p;
  out[k] = 0;
}

static dpc_status read_npy(const char *path, dpc_tensor *t, char descr[16], dpc_diag *d) {
  void *buf;
  size_t len;
  dpc_status st = dpc_data_read_file(path, &buf, &len, d);
  if (st) return st;
  st = dpc_npy_parse(buf, len, path, t, d);
  if (!st) npy_descr(buf, len, descr);
  free(buf);
  return st;
}

static dpc_status open_npy_pair(dpc_dataset *ds, const char *xs, const char *ys, dpc_diag *d) {
  dpc_tensor y = {0};
  char xd[16], yd[16];
  dpc_status st = read_npy(xs, &ds->floats, xd, d);
  if (st) return st;
  if ((st = read_npy(ys, &y, yd, d))) return st;
  char s1[160], s2[160];
  bool x_u8 = xd[0] && !strcmp(xd + 1, "u1");
  if (!dpc_dtype_is_float(ds->floats.dtype) && !x_u8) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: inputs must be float (f4, f8, f2) or uint8 (u1), not '%s'", xs, xd);
  } else if (ds->floats.shape.rank < 1) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: inputs need a leading sample dimension, not %s", xs,
                       fmt_shape(s1, &ds->floats.shape));
  } else if (!dpc_dtype_is_int(y.dtype)) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: labels must be integers (i4, i8, u1), not '%s'", ys,
                       yd);
  } else if (y.shape.rank != 1 || y.shape.d[0] != ds->floats.shape.d[0]) {
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "%s: labels %s do not match inputs %s of %s: expected [%lld]", ys,
                       fmt_shape(s1, &y.shape), fmt_shape(s2, &ds->floats.shape), xs,
                       (long long)ds->floats.shape.d[0]);
  }
  if (st) goto done;
  ds->n = (uint64_t)ds->floats.shape.d[0];
  ds->sample.rank = ds->floats.shape.rank - 1;
  memcpy(ds->sample.d, ds->floats.shape.d + 1, ds->sample.rank * sizeof *ds->sample.d);
  if (x_u8) { /* back to one byte per pixel, as in IDX */
    int64_t total = dpc_tensor_numel(&ds->floats);
    uint8_t *px = malloc((size_t)(total ? total : 1));
    if (!px) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory", xs);
      goto done;
    }
    for (int64_t i = 0; i < total; i++) px[i] = (uint8_t)dpc_tload_i64(&ds->floats, i);
    free(ds->floats.data);
    ds->floats.data = NULL;
    ds->owned = px;
    ds->pixels = px;
  }
  st = take_labels(ds, ys, &y, NULL, d);
done:
  free(y.data);
  return st;
}

/* ---- opening ------------------------------------------------------------------------------ */

dpc_status dpc_dataset_open(const char *spec, dpc_split split, dpc_dataset **out, dpc_diag *d) {
  *out = NULL;
  if (!spec || !*spec)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "no dataset given: expected 'fashion-mnist', a folder of IDX files or "
                         "INPUTS.npy,LABELS.npy");
  dpc_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening '%s'", spec);
  const char *split_name = split == DPC_SPLIT_TEST ? " (test)" : " (train)";
  const char *comma = strchr(spec, ',');
  struct stat sb;
  bool exists = stat(spec, &sb) == 0;
  dpc_status st;
  if (!strcmp(spec, "fashion-mnist")) {
    ds->name = join("fashion-mnist", split_name, "");
    st = open_idx_dir(ds, DPC_FASHION_MNIST_DIR, split, true, d);
  } else if (comma) {
    ds->name = dpc_strdup(spec);
    char *xs = dpc_strdup(spec);
    if (!xs || !ds->name) {
      free(xs);
      dpc_dataset_close(ds);
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening '%s'", spec);
    }
    xs[comma - spec] = 0;
    const char *ys = xs + (comma - spec) + 1;
    if (!*xs || !*ys || strchr(ys, ','))
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "'%s': expected two .npy files as INPUTS.npy,LABELS.npy", spec);
    else
      st = open_npy_pair(ds, xs, ys, d);
    free(xs);
  } else if (exists && S_ISDIR(sb.st_mode)) {
    ds->name = join(spec, split_name, "");
    st = open_idx_dir(ds, spec, split, false, d);
  } else {
    ds->name = NULL;
    st = dpc_diag_fail(d, DPC_ERR_INVALID,
                       "dataset '%s' %s: expected 'fashion-mnist', a folder of IDX files or "
                       "INPUTS.npy,LABELS.npy",
                       spec, exists ? "is a file, not a dataset folder" : "does not exist");
  }
  if (!st && !ds->name) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening '%s'", spec);
  if (!st && ds->n == 0) st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s holds no samples", ds->name);
  ds->sample_numel = dpc_shape_numel(&ds->sample);
  if (!st && ds->sample_numel == 0)
    st = dpc_diag_fail(d, DPC_ERR_INVALID, "%s: its samples are empty", ds->name);
  if (st) {
    dpc_dataset_close(ds);
    return st;
  }
  *out = ds;
  return DPC_OK;
}

/* ---- a caller's samples ------------------------------------------------------------------ */

dpc_status dpc_dataset_from_source(const dpc_dataset_source *src, dpc_dataset **out, dpc_diag *d) {
  *out = NULL;
  char name[300], s1[160];
  if (src->name && *src->name)
    snprintf(name, sizeof name, "data source '%s'", src->name);
  else
    snprintf(name, sizeof name, "the data source");
  if (!src->fill)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s has no function to fill batches with", name);
  if (src->samples == 0) return dpc_diag_fail(d, DPC_ERR_INVALID, "%s holds no samples", name);
  if (src->sample.rank > DPC_MAX_RANK)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: its samples have %u dimensions, more than %d",
                         name, src->sample.rank, DPC_MAX_RANK);
  for (uint32_t k = 0; k < src->sample.rank; k++)
    if (src->sample.d[k] < 1)
      return dpc_diag_fail(d, DPC_ERR_INVALID, "%s: its sample shape %s has an empty dimension",
                           name, fmt_shape(s1, &src->sample));
  if (src->classes < 1)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s has %lld classes: its labels need at least one (classes is 1 + the "
                         "largest label)",
                         name, (long long)src->classes);
  dpc_dataset *ds = calloc(1, sizeof *ds);
  if (!ds || !(ds->name = dpc_strdup(name))) {
    free(ds);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory opening %s", name);
  }
  ds->from_source = true;
  ds->src = *src;
  ds->src.name = ds->name;
  ds->n = src->samples;
  ds->sample = src->sample;
  ds->sample_numel = dpc_shape_numel(&ds->sample);
  ds->classes = src->classes;
  *out = ds;
  return DPC_OK;
}

/* Batch idx[0..n) from the caller: rows straight into an f32 x, else through a float buffer
 * converted as dpc_tstore does; labels through an int64 buffer, checked against the classes. */
static dpc_status fill_from_source(const dpc_dataset *ds, const uint64_t *idx, uint32_t n,
                                   dpc_tensor *x, dpc_tensor *y, dpc_diag *d) {
  int64_t per = ds->sample_numel, total = per * (int64_t)n;
  bool direct = x && x->dtype == DPC_F32;
  float *xs = direct ? x->data : malloc((size_t)(total ? total : 1) * sizeof *xs);
  int64_t *ys = malloc((size_t)(n ? n : 1) * sizeof *ys);
  dpc_status st = DPC_OK;
  if (!xs || !ys) {
    st = dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory for a batch of %u", ds->name, n);
    goto done;
  }
  char err[512] = "";
  int rc = ds->src.fill(ds->src.user, idx, n, xs, ys, err, sizeof err);
  err[sizeof err - 1] = 0;
  if (rc) {
    st = err[0] ? dpc_diag_fail(d, DPC_ERR_IO, "%s: %s", ds->name, err)
                : dpc_diag_fail(d, DPC_ERR_IO, "%s failed to fill a batch of %u samples (%d)",
                                ds->name, n, rc);
    goto done;
  }
  for (uint32_t i = 0; i < n; i++)
    if (ys[i] < 0 || ys[i] >= ds->classes) {
      st = dpc_diag_fail(d, DPC_ERR_INVALID,
                         "%s: sample %llu has the label %lld, outside its %lld classes (0 to %lld)",
                         ds->name, (unsigned long long)idx[i], (long long)ys[i],
                         (long long)ds->classes, (long long)ds->classes - 1);
      goto done;
    }
  if (x && !direct)
    for (int64_t j = 0; j < total; j++) dpc_tstore(x, j, xs[j]);
  if (y)
    for (uint32_t i = 0; i < n; i++) dpc_tstore_i64(y, i, ys[i]);
done:
  if (!direct) free(xs);
  free(ys);
  return st;
}

uint64_t dpc_dataset_size(const dpc_dataset *ds) {
  return ds->n;
}
const dpc_shape *dpc_dataset_sample_shape(const dpc_dataset *ds) {
  return &ds->sample;
}
int64_t dpc_dataset_classes(const dpc_dataset *ds) {
  return ds->classes;
}
const char *dpc_dataset_name(const dpc_dataset *ds) {
  return ds->name;
}

/* ---- filling batches ---------------------------------------------------------------------- */

/* out[j] = src[j] / 255, four at a time: a training step's batch is converted on the thread
 * that feeds the devices, between steps (a batch of 256 Fashion-MNIST images: 160 -> 85 us
 * against a table lookup per pixel). Division, not a multiply by 1/255: the same bits as the
 * scalar formula. */
typedef uint8_t u8x4 __attribute__((vector_size(4)));
typedef float f32x4 __attribute__((vector_size(16)));

static void pixels_to_f32(float *out, const uint8_t *src, int64_t n) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    u8x4 b;
    memcpy(&b, src + j, sizeof b);
    f32x4 f = __builtin_convertvector(b, f32x4) / 255.0f;
    memcpy(out + j, &f, sizeof f);
  }
  for (; j < n; j++) out[j] = (float)src[j] / 255.0f;
}

dpc_status dpc_dataset_fill(const dpc_dataset *ds, const uint64_t *idx, uint32_t n, dpc_tensor *x,
                            dpc_tensor *y, dpc_diag *d) {
  char s1[160], s2[160];
  int64_t per = ds->sample_numel;
  if (x && !dpc_dtype_is_float(x->dtype))
    return dpc_diag_fail(d, DPC_ERR_SHAPE, "%s: inputs go into a float tensor, not %s%s", ds->name,
                         dpc_dtype_name(x->dtype), fmt_shape(s1, &x->shape));
  if (x && (x->shape.rank < 1 || x->shape.d[0] != n || dpc_tensor_numel(x) != per * n))
    return dpc_diag_fail(d, DPC_ERR_SHAPE,
                         "%s: a batch of %u samples of %s (%lld values each) does not fit the "
                         "input %s%s",
                         ds->name, n, fmt_shape(s1, &ds->sample), (long long)per,
                         dpc_dtype_name(x->dtype), fmt_shape(s2, &x->shape));
  if (y && (!dpc_dtype_is_int(y->dtype) || y->shape.rank != 1 || y->shape.d[0] != n))
    return dpc_diag_fail(d, DPC_ERR_SHAPE,
                         "%s: labels of a batch of %u samples go into i32[%u] or i64[%u], not "
                         "%s%s",
                         ds->name, n, n, n, dpc_dtype_name(y->dtype), fmt_shape(s1, &y->shape));
  for (uint32_t i = 0; i < n; i++)
    if (idx[i] >= ds->n)
      return dpc_diag_fail(
          d, DPC_ERR_INVALID,
          "%s: sample index %llu is out of range: it holds %llu samples (0 to %llu)", ds->name,
          (unsigned long long)idx[i], (unsigned long long)ds->n, (unsigned long long)ds->n - 1);
  if (ds->from_source) return fill_from_source(ds, idx, n, x, y, d);
  if (x && ds->pixels) {
    if (x->dtype == DPC_F32) { /* the common case, kept free of per-element dtype switches */
      for (uint32_t i = 0; i < n; i++)
        pixels_to_f32((float *)x->data + i * per, ds->pixels + idx[i] * (uint64_t)per, per);
    } else {
      for (uint32_t i = 0; i < n; i++) {
        const uint8_t *src = ds->pixels + idx[i] * (uint64_t)per;
        for (int64_t j = 0; j < per; j++) dpc_tstore(x, i * per + j, src[j] / 255.0);
      }
    }
  } else if (x) {
    size_t esz = dpc_dtype_size(x->dtype);
    for (uint32_t i = 0; i < n; i++) {
      int64_t from = (int64_t)idx[i] * per;
      if (x->dtype == ds->floats.dtype)
        memcpy((char *)x->data + (size_t)(i * per) * esz,
               (const char *)ds->floats.data + (size_t)from * esz, (size_t)per * esz);
      else
        for (int64_t j = 0; j < per; j++)
          dpc_tstore(x, i * per + j, dpc_tload(&ds->floats, from + j));
    }
  }
  if (y)
    for (uint32_t i = 0; i < n; i++) dpc_tstore_i64(y, i, ds->labels[idx[i]]);
  return DPC_OK;
}

/* ---- visiting order ----------------------------------------------------------------------- */

dpc_status dpc_order_init(dpc_order *o, uint64_t n, uint64_t seed, bool shuffle, dpc_diag *d) {
  memset(o, 0, sizeof *o);
  if (n > SIZE_MAX / sizeof *o->perm)
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "%llu samples are too many to order",
                         (unsigned long long)n);
  o->perm = malloc((size_t)(n ? n : 1) * sizeof *o->perm);
  if (!o->perm) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory ordering the samples");
  o->n = n;
  o->seed = seed;
  o->shuffle = shuffle;
  dpc_order_epoch(o, 0);
  return DPC_OK;
}

void dpc_order_free(dpc_order *o) {
  free(o->perm);
  memset(o, 0, sizeof *o);
}

void dpc_order_epoch(dpc_order *o, uint64_t epoch) {
  o->epoch = epoch;
  /* Start from 0..n-1 every time, never from the last epoch's order, so epoch e depends on
   * (seed, e) alone. */
  for (uint64_t i = 0; i < o->n; i++) o->perm[i] = i;
  if (!o->shuffle) return;
  /* A stream of its own (the constant keeps it apart from dropout's streams of the same seed).
   * Draw i picks j in [0, i]; the modulo's bias is below (i + 1) / 2^64, far under anything a
   * dataset of fewer than 2^40 samples could show. */
  uint64_t key = dpc_mix64(o->seed ^ dpc_mix64(epoch + 0x0dde75ull));
  for (uint64_t i = o->n; i-- > 1;) {
    uint64_t j = dpc_rng_bits(key, i) % (i + 1);
    uint64_t t = o->perm[i];
    o->perm[i] = o->perm[j];
    o->perm[j] = t;
  }
}

uint64_t dpc_order_batches(const dpc_order *o, uint32_t batch) {
  return batch ? (o->n + batch - 1) / batch : 0;
}

const uint64_t *dpc_order_batch(const dpc_order *o, uint32_t batch, uint64_t b, uint32_t *count) {
  *count = 0;
  if (b >= dpc_order_batches(o, batch)) return NULL;
  uint64_t start = b * batch, left = o->n - start;
  *count = left < batch ? (uint32_t)left : batch;
  return o->perm + start;
}
