/*
 * safetensors.c — reading and writing safetensors files (format and rules in safetensors.h).
 *
 * The JSON header is parsed and printed by jansson. Both the in-memory parser and the file reader
 * go through one header check (parse_header), which validates every tensor against the size of
 * the data section before anything is allocated for data; the file reader then reads each
 * tensor straight into its own buffer with pread, so a checkpoint is never held twice in memory.
 */
#include "runtime/safetensors.h"
#include "ir/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dpc_st_file {
  uint32_t n, n_meta;
  dpc_st_tensor *t;            /* by data offset; names and data owned */
  const dpc_st_tensor **by_nm; /* the same tensors sorted by name, for dpc_st_find */
  dpc_st_meta *meta;           /* header order; keys and values owned */
};

/* ---- dtypes ------------------------------------------------------------------------------ */

static const char *const st_dtype_names[DPC_DTYPE_COUNT] = {
    [DPC_F32] = "F32", [DPC_F16] = "F16", [DPC_BF16] = "BF16", [DPC_F64] = "F64",
    [DPC_I32] = "I32", [DPC_I64] = "I64", [DPC_BOOL] = "BOOL"};

/* safetensors dtypes dpc has no element type for: valid files, but refused as unsupported
 * rather than as corrupt, so the message says which it is. */
static const char *const st_other_dtypes[] = {"U8",      "I8",      "U16",     "I16",     "U32",
                                              "U64",     "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3",
                                              "F6_E3M2", "F4",      "C64"};

/* ---- small helpers ----------------------------------------------------------------------- */

/* a * b into *out; false on overflow. */
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  if (a && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

static uint64_t le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* CRC-32 (reflected, polynomial 0xEDB88320) a byte at a time from a table built by the
 * compiler: each entry is its index run through eight bit steps. */
#define CRC_BIT(c) (((c) >> 1) ^ (0xEDB88320u & (0u - ((c)&1u))))
#define CRC_ENTRY(n)                                                                               \
  CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT(CRC_BIT((uint32_t)(n)))))))))
#define CRC_4(n)  CRC_ENTRY(n), CRC_ENTRY(n + 1), CRC_ENTRY(n + 2), CRC_ENTRY(n + 3)
#define CRC_16(n) CRC_4(n), CRC_4(n + 4), CRC_4(n + 8), CRC_4(n + 12)
#define CRC_64(n) CRC_16(n), CRC_16(n + 16), CRC_16(n + 32), CRC_16(n + 48)
static const uint32_t crc_table[256] = {CRC_64(0), CRC_64(64), CRC_64(128), CRC_64(192)};

uint32_t dpc_st_crc32(uint32_t crc, const void *data, size_t n) {
  const unsigned char *p = data;
  crc = ~crc;
  if (n >= 4096) {
    /* Slicing by 8: eight bytes per step from eight tables, each the one before it advanced by
     * a byte. Built here, on the stack (8 KiB, a few microseconds), rather than kept in global
     * state; a byte at a time runs at a fifth of the speed. */
    uint32_t t[8][256];
    memcpy(t[0], crc_table, sizeof t[0]);
    for (int k = 1; k < 8; k++)
      for (int i = 0; i < 256; i++) t[k][i] = (t[k - 1][i] >> 8) ^ crc_table[t[k - 1][i] & 0xffu];
    for (; n >= 8; n -= 8, p += 8) {
      uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
      crc = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^
            t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    }
  }
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

void dpc_st_free(dpc_st_file *f) {
  if (!f) return;
  for (uint32_t i = 0; i < f->n; i++) {
    free((void *)f->t[i].name);
    free(f->t[i].t.data);
  }
  for (uint32_t i = 0; i < f->n_meta; i++) {
    free((void *)f->meta[i].key);
    free((void *)f->meta[i].value);
  }
  free(f->t);
  free(f->by_nm);
  free(f->meta);
  free(f);
}

uint32_t dpc_st_count(const dpc_st_file *f) {
  return f->n;
}

const dpc_st_tensor *dpc_st_at(const dpc_st_file *f, uint32_t i) {
  return i < f->n ? &f->t[i] : NULL;
}

static int cmp_by_name(const void *a, const void *b) {
  return strcmp((*(const dpc_st_tensor *const *)a)->name, (*(const dpc_st_tensor *const *)b)->name);
}

static int cmp_name_key(const void *key, const void *elem) {
  return strcmp((const char *)key, (*(const dpc_st_tensor *const *)elem)->name);
}

const dpc_tensor *dpc_st_find(const dpc_st_file *f, const char *name) {
  if (!f->n) return NULL;
  const dpc_st_tensor *const *hit = bsearch(name, f->by_nm, f->n, sizeof *f->by_nm, cmp_name_key);
  return hit ? &(*hit)->t : NULL;
}

uint32_t dpc_st_meta_count(const dpc_st_file *f) {
  return f->n_meta;
}

const dpc_st_meta *dpc_st_meta_at(const dpc_st_file *f, uint32_t i) {
  return i < f->n_meta ? &f->meta[i] : NULL;
}

const char *dpc_st_meta_get(const dpc_st_file *f, const char *key) {
  for (uint32_t i = 0; i < f->n_meta; i++)
    if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
  return NULL;
}

/* ---- the header ---------------------------------------------------------------------------- */

/* One tensor while the header is checked: where its bytes are in the data section. */
typedef struct slot {
  dpc_st_tensor t;
  uint64_t begin, end;
  uint32_t order; /* position in the JSON, to break ties between empty tensors */
} slot;

static int cmp_slot(const void *a, const void *b) {
  const slot *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

typedef struct hctx {
  const char *file;
  dpc_diag *d;
} hctx;

static dpc_status bad(hctx *h, dpc_status st, const char *fmt, ...) DPC_PRINTF(3, 4);
/* Every message starts with the file's name, as the .npy reader's do. Names quoted in messages
 * are cut to 100 bytes, so the text always fits. */
static dpc_status bad(hctx *h, dpc_status st, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dpc_diag_fail(h->d, st, "%s: %s", h->file, msg);
}

static dpc_status parse_meta(hctx *h, json_t *m, dpc_st_file *f) {
  if (json_is_null(m)) return DPC_OK; /* serde reads null as "no metadata" */
  if (!json_is_object(m))
    return bad(h, DPC_ERR_SYNTAX, "\"__metadata__\" is not an object of strings");
  size_t n = json_object_size(m);
  f->meta = calloc(n ? n : 1, sizeof *f->meta);
  if (!f->meta) return bad(h, DPC_ERR_NOMEM, "out of memory");
  const char *key;
  json_t *v;
  json_object_foreach(m, key, v) {
    if (!json_is_string(v))
      return bad(h, DPC_ERR_SYNTAX, "metadata value of \"%.100s\" is not a string", key);
    dpc_st_meta *e = &f->meta[f->n_meta++];
    e->key = dpc_strdup(key);
    e->value = dpc_strdup(json_string_value(v));
    if (!e->key || !e->value) return bad(h, DPC_ERR_NOMEM, "out of memory");
  }
  return DPC_OK;
}

/* A shape or a [begin, end] pair: a JSON array of non-negative integers into vals (at most max
 * of them are stored); *n is the array's length. */
static dpc_status int_array(hctx *h, json_t *a, const char *tname, const char *field,
                            uint64_t *vals, size_t max, size_t *n) {
  if (!json_is_array(a))
    return bad(h, DPC_ERR_SYNTAX, "tensor \"%.100s\": \"%s\" is %s, not an array of integers",
               tname, field, a ? "of the wrong type" : "missing");
  *n = json_array_size(a);
  if (*n > max) return DPC_OK; /* the caller says what is wrong with the count */
  for (size_t i = 0; i < *n; i++) {
    json_t *v = json_array_get(a, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return bad(h, DPC_ERR_SYNTAX,
                 "tensor \"%.100s\": \"%s\" holds something other than a non-negative integer",
                 tname, field);
    vals[i] = (uint64_t)json_integer_value(v);
  }
  return DPC_OK;
}

static dpc_status parse_tensor(hctx *h, const char *name, json_t *v, uint64_t data_len, slot *s) {
  if (!json_is_object(v))
    return bad(h, DPC_ERR_SYNTAX,
               "tensor \"%.100s\" is not an object with \"dtype\", \"shape\" and \"data_offsets\"",
               name);
  json_t *dt = json_object_get(v, "dtype");
  if (!json_is_string(dt))
    return bad(h, DPC_ERR_SYNTAX, "tensor \"%.100s\": \"dtype\" is %s", name,
               dt ? "not a string" : "missing");
  const char *dts = json_string_value(dt);
  int ti = -1;
  for (int i = 0; i < DPC_DTYPE_COUNT; i++)
    if (!strcmp(dts, st_dtype_names[i])) ti = i;
  if (ti < 0) {
    for (size_t i = 0; i < sizeof st_other_dtypes / sizeof *st_other_dtypes; i++)
      if (!strcmp(dts, st_other_dtypes[i]))
        return bad(h, DPC_ERR_UNSUPPORTED,
                   "tensor \"%.100s\" has dtype %s, which dpc does not support (F32, F16, BF16, "
                   "F64, I32, I64 and BOOL are)",
                   name, dts);
    return bad(h, DPC_ERR_SYNTAX, "tensor \"%.100s\" has an unknown dtype \"%.40s\"", name, dts);
  }
  uint64_t dims[DPC_MAX_RANK], offs[2];
  size_t rank, noff;
  dpc_status st =
      int_array(h, json_object_get(v, "shape"), name, "shape", dims, DPC_MAX_RANK, &rank);
  if (st) return st;
  if (rank > DPC_MAX_RANK)
    return bad(h, DPC_ERR_UNSUPPORTED, "tensor \"%.100s\" has rank %zu, above dpc's limit of %d",
               name, rank, DPC_MAX_RANK);
  st = int_array(h, json_object_get(v, "data_offsets"), name, "data_offsets", offs, 2, &noff);
  if (st) return st;
  if (noff != 2)
    return bad(h, DPC_ERR_SYNTAX, "tensor \"%.100s\": \"data_offsets\" is not [begin, end]", name);
  if (offs[1] < offs[0])
    return bad(h, DPC_ERR_SYNTAX,
               "tensor \"%.100s\": data_offsets [%llu, %llu] end before they begin", name,
               (unsigned long long)offs[0], (unsigned long long)offs[1]);
  if (offs[1] > data_len)
    return bad(h, DPC_ERR_SYNTAX,
               "tensor \"%.100s\": data_offsets [%llu, %llu] lie outside the data section, which "
               "holds %llu bytes (truncated file?)",
               name, (unsigned long long)offs[0], (unsigned long long)offs[1],
               (unsigned long long)data_len);
  /* Check the product with overflow tests, as the reference does, rather than trusting a
   * dimension that could wrap the count around to the right size. */
  uint64_t numel = 1, bytes;
  for (size_t i = 0; i < rank; i++)
    if (!mul_u64(numel, dims[i], &numel))
      return bad(h, DPC_ERR_SYNTAX, "tensor \"%.100s\": the element count of its shape overflows",
                 name);
  if (!mul_u64(numel, dpc_dtype_size((dpc_dtype)ti), &bytes))
    return bad(h, DPC_ERR_SYNTAX, "tensor \"%.100s\": the byte count of its shape overflows", name);
  if (bytes != offs[1] - offs[0])
    return bad(h, DPC_ERR_SYNTAX,
               "tensor \"%.100s\": %llu elements of %s take %llu bytes, but data_offsets [%llu, "
               "%llu] hold %llu",
               name, (unsigned long long)numel, dts, (unsigned long long)bytes,
               (unsigned long long)offs[0], (unsigned long long)offs[1],
               (unsigned long long)(offs[1] - offs[0]));
  s->t.t.dtype = (dpc_dtype)ti;
  s->t.t.shape.rank = (uint32_t)rank;
  for (size_t i = 0; i < rank; i++) s->t.t.shape.d[i] = (int64_t)dims[i];
  s->begin = offs[0];
  s->end = offs[1];
  s->t.name = dpc_strdup(name);
  if (!s->t.name) return bad(h, DPC_ERR_NOMEM, "out of memory");
  return DPC_OK;
}

/* Check the JSON header against a data section of data_len bytes and fill f's tensors (data
 * still NULL) in file order; begins[i] is where tensor i's bytes start. */
static dpc_status parse_header(hctx *h, const char *text, size_t len, uint64_t data_len,
                               dpc_st_file *f, uint64_t **begins) {
  json_error_t e;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
  if (!root) {
    const char *what = json_error_code(&e) == json_error_duplicate_key
                           ? "the header names something twice"
                           : "the header is not valid JSON";
    if (e.line < 1) return bad(h, DPC_ERR_SYNTAX, "%s: %s", what, e.text);
    return bad(h, DPC_ERR_SYNTAX, "%s (header line %d, column %d): %s", what, e.line, e.column,
               e.text);
  }
  dpc_status st = DPC_OK;
  slot *slots = NULL;
  if (!json_is_object(root)) {
    st = bad(h, DPC_ERR_SYNTAX, "the header is not a JSON object");
    goto out;
  }
  size_t total = json_object_size(root);
  slots = calloc(total ? total : 1, sizeof *slots);
  if (!slots) {
    st = bad(h, DPC_ERR_NOMEM, "out of memory");
    goto out;
  }
  uint32_t n = 0;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (!strcmp(key, "__metadata__")) {
      st = parse_meta(h, v, f);
    } else {
      slots[n].order = n;
      st = parse_tensor(h, key, v, data_len, &slots[n]);
      n++; /* counted even on failure so the name is freed below */
    }
    if (st) goto out;
  }
  /* Tensors may be listed in any order; in offset order they must tile the data section. */
  qsort(slots, n, sizeof *slots, cmp_slot);
  uint64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (slots[i].begin < at) {
      st = bad(h, DPC_ERR_SYNTAX,
               "tensors \"%.100s\" (bytes %llu..%llu) and \"%.100s\" (bytes %llu..%llu) overlap",
               slots[i - 1].t.name, (unsigned long long)slots[i - 1].begin,
               (unsigned long long)slots[i - 1].end, slots[i].t.name,
               (unsigned long long)slots[i].begin, (unsigned long long)slots[i].end);
      goto out;
    }
    if (slots[i].begin > at) {
      st = bad(h, DPC_ERR_SYNTAX,
               "bytes %llu..%llu of the data section belong to no tensor (a gap before \"%.100s\")",
               (unsigned long long)at, (unsigned long long)slots[i].begin, slots[i].t.name);
      goto out;
    }
    at = slots[i].end;
  }
  if (at != data_len) {
    st = bad(h, DPC_ERR_SYNTAX,
             "%llu bytes follow the last tensor's data; the safetensors format requires the "
             "tensors to fill the data section exactly",
             (unsigned long long)(data_len - at));
    goto out;
  }
  f->t = calloc(n ? n : 1, sizeof *f->t);
  f->by_nm = calloc(n ? n : 1, sizeof *f->by_nm);
  *begins = calloc(n ? n : 1, sizeof **begins);
  if (!f->t || !f->by_nm || !*begins) {
    st = bad(h, DPC_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) {
    f->t[i] = slots[i].t;
    (*begins)[i] = slots[i].begin;
    f->by_nm[i] = &f->t[i];
    slots[i].t.name = NULL; /* now f's */
  }
  f->n = n;
  qsort(f->by_nm, n, sizeof *f->by_nm, cmp_by_name);
out:
  for (uint32_t i = 0; slots && i < n; i++) free((void *)slots[i].t.name);
  free(slots);
  json_decref(root);
  return st;
}

/* Checks of the 8-byte prefix shared by both readers; *hlen is the header's length. */
static dpc_status check_prefix(hctx *h, const unsigned char pre[8], uint64_t file_len,
                               uint64_t *hlen) {
  *hlen = le64(pre);
  if (*hlen > DPC_ST_MAX_HEADER)
    return bad(h, DPC_ERR_SYNTAX,
               "the header length %llu is above the limit of %u bytes (not a safetensors file, or "
               "a corrupt one)",
               (unsigned long long)*hlen, DPC_ST_MAX_HEADER);
  if (*hlen > file_len - 8)
    return bad(h, DPC_ERR_SYNTAX,
               "the header length %llu runs past the end of the file (%llu bytes): truncated, or "
               "not a safetensors file",
               (unsigned long long)*hlen, (unsigned long long)file_len);
  return DPC_OK;
}

static dpc_status new_file(hctx *h, dpc_st_file **f) {
  *f = calloc(1, sizeof **f);
  return *f ? DPC_OK : bad(h, DPC_ERR_NOMEM, "out of memory");
}

/* Give every tensor its own buffer (1 byte for empty ones, so data is never NULL). */
static dpc_status alloc_data(hctx *h, dpc_st_file *f) {
  for (uint32_t i = 0; i < f->n; i++) {
    size_t bytes = dpc_tensor_bytes(&f->t[i].t);
    f->t[i].t.data = malloc(bytes ? bytes : 1);
    if (!f->t[i].t.data)
      return bad(h, DPC_ERR_NOMEM, "out of memory for tensor \"%.100s\" (%zu bytes)", f->t[i].name,
                 bytes);
  }
  return DPC_OK;
}

/* The checksums in the metadata (DPC_ST_CRC_PREFIX NAME) against the loaded data. */
static dpc_status verify_checksums(hctx *h, const dpc_st_file *f) {
  size_t pl = strlen(DPC_ST_CRC_PREFIX);
  for (uint32_t i = 0; i < f->n_meta; i++) {
    const char *key = f->meta[i].key, *val = f->meta[i].value;
    if (strncmp(key, DPC_ST_CRC_PREFIX, pl)) continue;
    const char *name = key + pl;
    uint32_t want = 0;
    size_t k = 0;
    for (; val[k] && k < 9; k++) {
      char c = val[k];
      int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v < 0) break;
      want = want << 4 | (uint32_t)v;
    }
    if (k != 8 || val[k])
      return bad(h, DPC_ERR_SYNTAX,
                 "the checksum of tensor \"%.100s\" is \"%.40s\", not 8 hex digits (a damaged "
                 "header)",
                 name, val);
    const dpc_tensor *x = dpc_st_find(f, name);
    if (!x)
      return bad(h, DPC_ERR_SYNTAX,
                 "the metadata holds a checksum of tensor \"%.100s\", which the file does not "
                 "hold (a damaged or edited header)",
                 name);
    uint32_t got = dpc_st_crc32(0, x->data, dpc_tensor_bytes(x));
    if (got != want)
      return bad(h, DPC_ERR_SYNTAX,
                 "the data of tensor \"%.100s\" is damaged: its CRC-32 is %08x, and %08x was "
                 "written with it",
                 name, (unsigned)got, (unsigned)want);
  }
  return DPC_OK;
}

dpc_status dpc_safetensors_parse(const void *buf, size_t len, const char *name, dpc_st_file **out,
                                 dpc_diag *d) {
  hctx h = {name, d};
  const unsigned char *b = buf;
  *out = NULL;
  if (len < 8)
    return bad(&h, DPC_ERR_SYNTAX,
               "too short for a safetensors file (%zu bytes; the header length alone takes 8)",
               len);
  uint64_t hlen;
  dpc_status st = check_prefix(&h, b, len, &hlen);
  if (st) return st;
  dpc_st_file *f;
  if ((st = new_file(&h, &f))) return st;
  uint64_t *begins = NULL;
  st = parse_header(&h, (const char *)b + 8, (size_t)hlen, len - 8 - hlen, f, &begins);
  if (!st) st = alloc_data(&h, f);
  for (uint32_t i = 0; !st && i < f->n; i++)
    memcpy(f->t[i].t.data, b + 8 + hlen + begins[i], dpc_tensor_bytes(&f->t[i].t));
  if (!st) st = verify_checksums(&h, f);
  free(begins);
  if (st) {
    dpc_st_free(f);
    return st;
  }
  *out = f;
  return DPC_OK;
}

/* pread all of [off, off+n); a short file (shrunk since fstat) is an error, not a hang. */
static bool pread_all(int fd, void *buf, size_t n, uint64_t off) {
  unsigned char *p = buf;
  while (n) {
    size_t chunk = n < ((size_t)1 << 30) ? n : (size_t)1 << 30;
    ssize_t got = pread(fd, p, chunk, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = EIO;
      return false;
    }
    p += got;
    off += (uint64_t)got;
    n -= (size_t)got;
  }
  return true;
}

dpc_status dpc_safetensors_read(const char *path, dpc_st_file **out, dpc_diag *d) {
  hctx h = {path, d};
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return dpc_diag_fail(d, DPC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  dpc_status st = DPC_OK;
  char *text = NULL;
  uint64_t *begins = NULL;
  dpc_st_file *f = NULL;
  if (fstat(fd, &sb)) goto io;
  if (!S_ISREG(sb.st_mode)) {
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s': not a regular file", path);
    goto out;
  }
  uint64_t len = (uint64_t)sb.st_size;
  unsigned char pre[8];
  if (len < 8) {
    st = bad(&h, DPC_ERR_SYNTAX,
             "too short for a safetensors file (%llu bytes; the header length alone takes 8)",
             (unsigned long long)len);
    goto out;
  }
  uint64_t hlen;
  if (!pread_all(fd, pre, 8, 0)) goto io;
  if ((st = check_prefix(&h, pre, len, &hlen))) goto out;
  text = malloc(hlen ? (size_t)hlen : 1);
  if (!text) {
    st = bad(&h, DPC_ERR_NOMEM, "out of memory for a %llu-byte header", (unsigned long long)hlen);
    goto out;
  }
  if (!pread_all(fd, text, (size_t)hlen, 8)) goto io;
  if ((st = new_file(&h, &f))) goto out;
  if ((st = parse_header(&h, text, (size_t)hlen, len - 8 - hlen, f, &begins))) goto out;
  if ((st = alloc_data(&h, f))) goto out;
  for (uint32_t i = 0; i < f->n; i++)
    if (!pread_all(fd, f->t[i].t.data, dpc_tensor_bytes(&f->t[i].t), 8 + hlen + begins[i])) goto io;
  st = verify_checksums(&h, f);
  goto out;
io:
  st = dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
out:
  close(fd);
  free(text);
  free(begins);
  if (st) {
    dpc_st_free(f);
    return st;
  }
  *out = f;
  return DPC_OK;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* The JSON header for the tensors and metadata, padded with spaces to a multiple of 8. */
static dpc_status build_header(const char *path, const dpc_st_tensor *t, uint32_t n,
                               const dpc_st_meta *meta, uint32_t n_meta, bool crc, char **text,
                               size_t *len, dpc_diag *d) {
  dpc_status st = DPC_OK;
  json_t *root = json_object();
  if (!root) return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory writing '%s'", path);
#define FAIL(code, ...)                                                                            \
  do {                                                                                             \
    st = dpc_diag_fail(d, code, __VA_ARGS__);                                                      \
    goto out;                                                                                      \
  } while (0)
  json_t *m = NULL;
  if (n_meta || (crc && n)) {
    m = json_object();
    if (!m || json_object_set_new(root, "__metadata__", m))
      FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
    for (uint32_t i = 0; i < n_meta; i++) {
      if (!meta[i].key || !meta[i].value)
        FAIL(DPC_ERR_INVALID, "cannot write '%s': metadata entry %u has no key or value", path, i);
      if (json_object_get(m, meta[i].key))
        FAIL(DPC_ERR_INVALID, "cannot write '%s': metadata key \"%.100s\" is given twice", path,
             meta[i].key);
      json_t *s = json_string(meta[i].value);
      /* json_string refuses text that is not UTF-8; so does json_object_set_new for keys */
      if (!s || json_object_set_new(m, meta[i].key, s))
        FAIL(DPC_ERR_INVALID,
             "cannot write '%s': metadata \"%.100s\" is not valid UTF-8 (or memory ran out)", path,
             meta[i].key);
    }
  }
  uint64_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    const char *name = t[i].name;
    const dpc_tensor *x = &t[i].t;
    if (!name || !strcmp(name, "__metadata__"))
      FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor %u needs a name other than %s", path, i,
           name ? "\"__metadata__\"" : "none");
    if (json_object_get(root, name))
      FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor name \"%.100s\" is given twice", path, name);
    if ((unsigned)x->dtype >= DPC_DTYPE_COUNT || x->shape.rank > DPC_MAX_RANK)
      FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor \"%.100s\" has a bad dtype or rank", path,
           name);
    /* json_object_set_new takes the value even when it fails (and fails on a NULL value or a
     * key that is not UTF-8), so each new node is owned by root from here on. */
    json_t *info = json_object(), *shape, *offs;
    if (json_object_set_new(root, name, info))
      FAIL(DPC_ERR_INVALID,
           "cannot write '%s': tensor name \"%.100s\" is not valid UTF-8 (or memory ran out)", path,
           name);
    if (json_object_set_new(info, "dtype", json_string(st_dtype_names[x->dtype])) ||
        json_object_set_new(info, "shape", shape = json_array()) ||
        json_object_set_new(info, "data_offsets", offs = json_array()))
      FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
    uint64_t numel = 1, bytes;
    for (uint32_t k = 0; k < x->shape.rank; k++) {
      if (x->shape.d[k] < 0)
        FAIL(DPC_ERR_INVALID,
             "cannot write '%s': tensor \"%.100s\" has a symbolic or negative dimension", path,
             name);
      if (!mul_u64(numel, (uint64_t)x->shape.d[k], &numel))
        FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor \"%.100s\" is too large", path, name);
      if (json_array_append_new(shape, json_integer(x->shape.d[k])))
        FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
    }
    if (!mul_u64(numel, dpc_dtype_size(x->dtype), &bytes) || off + bytes < off ||
        off + bytes > (uint64_t)INT64_MAX)
      FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor \"%.100s\" is too large", path, name);
    if (bytes && !x->data)
      FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor \"%.100s\" has no data", path, name);
    if (json_array_append_new(offs, json_integer((json_int_t)off)) ||
        json_array_append_new(offs, json_integer((json_int_t)(off + bytes))))
      FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
    off += bytes;
    if (crc) {
      char key[4096], hex[16];
      if ((size_t)snprintf(key, sizeof key, DPC_ST_CRC_PREFIX "%s", name) >= sizeof key)
        FAIL(DPC_ERR_INVALID, "cannot write '%s': tensor name \"%.100s...\" is too long", path,
             name);
      if (json_object_get(m, key))
        FAIL(DPC_ERR_INVALID, "cannot write '%s': metadata key \"%.100s\" is taken", path, key);
      snprintf(hex, sizeof hex, "%08x", (unsigned)dpc_st_crc32(0, x->data, (size_t)bytes));
      if (json_object_set_new(m, key, json_string(hex)))
        FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
    }
  }
  /* Compact separators, keys in insertion order: the reference's own spelling. */
  char *js = json_dumps(root, JSON_COMPACT);
  if (!js) FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
  size_t jl = strlen(js), padded = (jl + 7) / 8 * 8;
  if (padded > DPC_ST_MAX_HEADER) {
    free(js);
    FAIL(DPC_ERR_INVALID, "cannot write '%s': the header would exceed %u bytes", path,
         DPC_ST_MAX_HEADER);
  }
  *text = malloc(8 + padded);
  if (!*text) {
    free(js);
    FAIL(DPC_ERR_NOMEM, "out of memory writing '%s'", path);
  }
  for (int i = 0; i < 8; i++) (*text)[i] = (char)(unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(*text + 8, js, jl);
  memset(*text + 8 + jl, ' ', padded - jl);
  *len = 8 + padded;
  free(js);
#undef FAIL
out:
  json_decref(root);
  return st;
}

static bool write_all(int fd, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n) {
    size_t chunk = n < ((size_t)1 << 30) ? n : (size_t)1 << 30;
    ssize_t put = write(fd, p, chunk);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      if (put == 0) errno = EIO;
      return false;
    }
    p += put;
    n -= (size_t)put;
  }
  return true;
}

dpc_status dpc_safetensors_clean(const char *path, dpc_diag *d) {
  char dir[4096];
  dpc_path_dir(path, dir, sizeof dir);
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  DIR *dp = opendir(dir);
  if (!dp)
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot list the folder of '%s': %s", path,
                         strerror(errno));
  dpc_status st = DPC_OK;
  struct dirent *e;
  while ((e = readdir(dp))) {
    pid_t pid = dpc_path_temp_pid(e->d_name, base, NULL);
    /* Only a writer that is gone: a live one (ours included) is still using its file. kill with
     * signal 0 only asks whether the process exists; pid > 0 keeps it to one process. */
    if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    char full[4096 + 256];
    snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
    if (unlink(full) && errno != ENOENT && !st)
      st = dpc_diag_fail(d, DPC_ERR_IO, "cannot remove the leftover '%s': %s", full,
                         strerror(errno));
  }
  closedir(dp);
  return st;
}

static dpc_status write_file(const char *path, const dpc_st_tensor *t, uint32_t n,
                             const dpc_st_meta *meta, uint32_t n_meta, bool crc, dpc_diag *d) {
  char *head = NULL;
  size_t hlen = 0;
  dpc_status st = build_header(path, t, n, meta, n_meta, crc, &head, &hlen, d);
  if (st) return st;
  char tmp[4096 + 32];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
    free(head);
    return dpc_diag_fail(d, DPC_ERR_INVALID, "cannot write '%s': the path is too long", path);
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    free(head);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
  }
  /* Tensors go straight from their own memory to the file: no copy of a whole checkpoint. */
  bool ok = write_all(fd, head, hlen);
  for (uint32_t i = 0; ok && i < n; i++) {
    size_t bytes = dpc_tensor_bytes(&t[i].t);
    ok = !bytes || write_all(fd, t[i].t.data, bytes);
  }
  free(head);
  /* fsync before rename: otherwise the rename can reach the disk before the data, and a power
   * cut leaves PATH naming a file of zeros. */
  ok = ok && fsync(fd) == 0;
  int e = errno;
  if (close(fd) && ok) ok = false, e = errno;
  if (ok && rename(tmp, path)) ok = false, e = errno;
  if (!ok) {
    unlink(tmp);
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", path, strerror(e));
  }
  if (dpc_path_sync_dir(path))
    return dpc_diag_fail(d, DPC_ERR_IO, "wrote '%s' but could not sync its folder: %s", path,
                         strerror(errno));
  /* Best effort: leftovers of killed writers waste disk but harm nothing. */
  dpc_diag quiet;
  dpc_diag_init(&quiet);
  dpc_safetensors_clean(path, &quiet);
  dpc_diag_free(&quiet);
  return DPC_OK;
}

dpc_status dpc_safetensors_write(const char *path, const dpc_st_tensor *t, uint32_t n,
                                 const dpc_st_meta *meta, uint32_t n_meta, dpc_diag *d) {
  return write_file(path, t, n, meta, n_meta, false, d);
}

dpc_status dpc_safetensors_write_checked(const char *path, const dpc_st_tensor *t, uint32_t n,
                                         const dpc_st_meta *meta, uint32_t n_meta, dpc_diag *d) {
  return write_file(path, t, n, meta, n_meta, true, d);
}
