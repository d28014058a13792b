/*
 * idx.c — the bytes of dataset files: reading a file whole, inflating gzip, parsing IDX headers.
 *
 * Everything here handles untrusted bytes, so every length is checked before it is used and
 * every failure is a message naming the file and what is wrong; nothing aborts. It knows
 * nothing of datasets (data.c decides what the arrays mean) and is fuzzed by
 * tests/fuzz/fuzz_idx.c.
 */
#include "runtime/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static bool is_gzip(const unsigned char *b, size_t len) {
  return len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && !strcmp(s + n - k, tail);
}

/* Hand zlib the next piece of input once it has used up the last; avail_in is 32-bit, so a
 * file over 4 GiB goes in pieces. */
static void feed(z_stream *z, const unsigned char *in, size_t len, size_t *fed) {
  if (z->avail_in || *fed == len) return;
  size_t piece = len - *fed < (1u << 30) ? len - *fed : (1u << 30);
  z->next_in = (unsigned char *)in + *fed;
  z->avail_in = (uInt)piece;
  *fed += piece;
}

dpc_status dpc_data_gunzip(const void *gz, size_t len, const char *name, void **out,
                           size_t *out_len, dpc_diag *d) {
  *out = NULL;
  *out_len = 0;
  const unsigned char *in = gz;
  if (!is_gzip(in, len))
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: not gzip data (it does not start with 1f 8b)",
                         name);
  /* The trailer's ISIZE is the inflated size mod 2^32: a good first guess that saves the
   * doubling reallocs on a 47 MB file. It is only a hint (the data may lie), so it is capped by
   * deflate's best ratio (about 1032:1) and the buffer still grows when needed. */
  size_t cap = len >= 18 ? (size_t)in[len - 4] | (size_t)in[len - 3] << 8 |
                               (size_t)in[len - 2] << 16 | (size_t)in[len - 1] << 24
                         : 0;
  if (cap / 1040 > len) cap = len * 4;
  cap += 4096; /* room past the hint, so an exact hint never costs a doubling at the end */
  unsigned char *buf = malloc(cap);
  if (!buf) return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory inflating", name);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) { /* 16+: gzip wrapper only */
    free(buf);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: cannot start zlib", name);
  }
  size_t used = 0, fed = 0; /* bytes of output written, of input handed to zlib */
  dpc_status st = DPC_OK;
  for (;;) {
    feed(&z, in, len, &fed);
    if (used == cap) {
      size_t nc = cap * 2;
      unsigned char *p = nc > cap ? realloc(buf, nc) : NULL;
      if (!p) {
        st = dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory inflating", name);
        break;
      }
      buf = p;
      cap = nc;
    }
    size_t room = cap - used < (1u << 30) ? cap - used : (1u << 30);
    z.next_out = buf + used;
    z.avail_out = (uInt)room;
    int r = inflate(&z, Z_NO_FLUSH);
    used += room - z.avail_out;
    if (r == Z_STREAM_END) {
      /* gzip allows several members back to back; anything else after the end is ignored,
       * as gzip itself does. */
      feed(&z, in, len, &fed);
      if (is_gzip(z.next_in, z.avail_in) && inflateReset(&z) == Z_OK) continue;
      break;
    }
    if (r == Z_MEM_ERROR) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "%s: out of memory inflating", name);
      break;
    }
    if (r == Z_DATA_ERROR || r == Z_NEED_DICT || r == Z_STREAM_ERROR) {
      st = dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: corrupt gzip data (%s)", name,
                         z.msg ? z.msg : "zlib could not inflate it");
      break;
    }
    /* Z_OK or Z_BUF_ERROR: zlib wants more input or more room. With room left and no input
     * left, the stream stopped before its end. */
    if (z.avail_out > 0 && z.avail_in == 0 && fed == len) {
      st = dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s: truncated gzip data (the file ends before the compressed stream "
                         "does; %zu bytes inflated so far)",
                         name, used);
      break;
    }
  }
  inflateEnd(&z);
  if (st) {
    free(buf);
    return st;
  }
  *out = buf;
  *out_len = used;
  return DPC_OK;
}

dpc_status dpc_data_read_file(const char *path, void **out, size_t *out_len, dpc_diag *d) {
  *out = NULL;
  *out_len = 0;
  struct stat sb;
  if (stat(path, &sb) != 0)
    return dpc_diag_fail(d, DPC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return dpc_diag_fail(d, DPC_ERR_IO, "'%s' is not a regular file", path);
  FILE *f = fopen(path, "rb");
  if (!f) return dpc_diag_fail(d, DPC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  /* Read in one go at the size stat gave, then keep reading in case the file grew. */
  size_t cap = (size_t)sb.st_size + 1, n = 0;
  unsigned char *buf = malloc(cap);
  bool oom = !buf;
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    unsigned char *p = realloc(buf, cap * 2);
    if (!p) {
      oom = true;
      break;
    }
    buf = p;
    cap *= 2;
  }
  bool err = ferror(f);
  fclose(f);
  if (oom || err) {
    free(buf);
    return oom ? dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory reading '%s'", path)
               : dpc_diag_fail(d, DPC_ERR_IO, "cannot read '%s'", path);
  }
  if (is_gzip(buf, n)) {
    void *raw;
    size_t rn;
    dpc_status st = dpc_data_gunzip(buf, n, path, &raw, &rn, d);
    free(buf);
    if (st) return st;
    *out = raw;
    *out_len = rn;
    return DPC_OK;
  }
  if (ends_with(path, ".gz")) {
    free(buf);
    return dpc_diag_fail(d, DPC_ERR_SYNTAX, "%s: not gzip data (it does not start with 1f 8b)",
                         path);
  }
  *out = buf;
  *out_len = n;
  return DPC_OK;
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

dpc_status dpc_idx_parse(const void *buf, size_t len, const char *name, dpc_idx *out, dpc_diag *d) {
  const unsigned char *b = buf;
  memset(out, 0, sizeof *out);
  if (len < 4)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s: not an IDX file (%zu bytes, too short for the 4-byte magic)", name,
                         len);
  uint32_t magic = be32(b), rank = b[3];
  if (b[0] || b[1] || rank == 0 || rank > DPC_MAX_RANK) {
    if (b[0] == 0 && b[1] == 0 && b[2] == 0x08)
      return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                           "%s: IDX file with %u dimensions (magic 0x%08x); dpc reads 1 to %d",
                           name, rank, magic, DPC_MAX_RANK);
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s: not an IDX file: bad magic 0x%08x (expected 0x00000803 for "
                         "images, 0x00000801 for labels)",
                         name, magic);
  }
  if (b[2] != 0x08)
    return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                         "%s: IDX element type 0x%02x is not supported (only unsigned bytes, "
                         "0x08)",
                         name, b[2]);
  size_t head = 4 + 4 * (size_t)rank;
  if (len < head)
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s: truncated IDX header (%u dimensions need %zu bytes, the file has "
                         "%zu)",
                         name, rank, head, len);
  dpc_shape shape = {rank, {0}};
  uint64_t numel = 1;
  bool huge = false;
  for (uint32_t i = 0; i < rank; i++) {
    shape.d[i] = be32(b + 4 + 4 * i);
    /* Each count is below 2^32, so the running product only needs guarding once it could pass
     * the 2^62 that int64 shapes hold; "huge" then means "more than any file". */
    if (shape.d[i] && numel > (UINT64_C(1) << 62) / (uint64_t)shape.d[i])
      huge = true;
    else
      numel *= (uint64_t)shape.d[i];
  }
  if (huge || numel > len - head) {
    char dims[8 * 12] = "";
    size_t k = 0;
    for (uint32_t i = 0; i < rank; i++)
      k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? " x " : "",
                            (long long)shape.d[i]);
    return dpc_diag_fail(d, DPC_ERR_SYNTAX,
                         "%s: truncated IDX data: the header's counts (%s) need %s%llu bytes, "
                         "%zu follow the header",
                         name, dims, huge ? "more than " : "",
                         (unsigned long long)(huge ? UINT64_C(1) << 62 : numel), len - head);
  }
  out->shape = shape;
  out->data = b + head;
  return DPC_OK;
}
