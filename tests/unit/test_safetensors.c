/*
 * test_safetensors.c — safetensors checkpoints: round trips of every dtype, byte-for-byte
 * agreement with the reference implementation's output, files laid out by other tools, every kind
 * of corrupt file refused with its own message, and the crash-safety promise: kill -9 in the
 * middle of a checkpoint write leaves the previous checkpoint loadable and unchanged.
 *
 * The fixtures in tests/unit/data/ are made by tests/unit/data/make_fixtures.py from the format
 * spec (the Python safetensors package is not on the project's machines); ref_attn0.safetensors
 * is the reference implementation's own test vector.
 */
#include "runtime/safetensors.h"
#include "tests/unit/unit.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------------------------- */

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
  *len = b ? fread(b, 1, (size_t)(n > 0 ? n : 0), f) : 0;
  fclose(f);
  return b;
}

static bool exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* A private folder under /tmp; rm_dir removes it and what is in it (one level). */
static bool make_dir(char *tmpl) {
  return mkdtemp(tmpl) != NULL;
}

static void rm_dir(const char *dir) {
  DIR *dp = opendir(dir);
  struct dirent *e;
  while (dp && (e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  if (dp) closedir(dp);
  rmdir(dir);
}

static int count_entries(const char *dir) {
  int n = 0;
  DIR *dp = opendir(dir);
  struct dirent *e;
  while (dp && (e = readdir(dp))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (dp) closedir(dp);
  return n;
}

/* A file image: the 8-byte length of `header`, the header, then `data_len` bytes (0x11). */
static unsigned char *make_st(const char *header, size_t hlen, size_t data_len, size_t *len) {
  unsigned char *b = malloc(8 + hlen + data_len + 1);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  memcpy(b + 8, header, hlen);
  memset(b + 8 + hlen, 0x11, data_len);
  *len = 8 + hlen + data_len;
  return b;
}

static bool same_tensor(const dpc_tensor *a, const dpc_tensor *b) {
  size_t n = dpc_tensor_bytes(a);
  return a->dtype == b->dtype && dpc_shape_eq(&a->shape, &b->shape) &&
         (n == 0 || !memcmp(a->data, b->data, n)); /* an empty tensor's data may be NULL */
}

/* ---- round trips ------------------------------------------------------------------------------
 */

static void st_roundtrip_every_dtype(void) {
  char dir[] = "/tmp/dpc_st_XXXXXX";
  CHECK(make_dir(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/all.safetensors", dir);
  dpc_st_tensor ts[DPC_DTYPE_COUNT + 3];
  uint32_t n = 0;
  double vals[6] = {1, -2, 3.5, 0, 1, 65504};
  for (int t = 0; t < DPC_DTYPE_COUNT; t++) {
    static char names[DPC_DTYPE_COUNT][16];
    snprintf(names[t], sizeof names[t], "w.%s", dpc_dtype_name((dpc_dtype)t));
    dpc_tensor x = {malloc(48), (dpc_dtype)t, {2, {2, 3}}};
    for (int i = 0; i < 6; i++) dpc_tstore(&x, i, vals[i]);
    ts[n++] = (dpc_st_tensor){names[t], x};
  }
  double pi = 3.141592653589793;
  ts[n++] = (dpc_st_tensor){"scalar", {&pi, DPC_F64, {0, {0}}}};
  ts[n++] = (dpc_st_tensor){"empty", {NULL, DPC_F32, {1, {0}}}};
  ts[n++] = (dpc_st_tensor){"empty2", {NULL, DPC_I64, {2, {2, 0}}}};
  dpc_st_meta meta[] = {{"step", "1200"}, {"lr", "0.001"}, {"note", "caf\xc3\xa9 \"quoted\"\n"}};
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_safetensors_write(path, ts, n, meta, 3, &d) == DPC_OK, "%s", d.msg);
  CHECK(count_entries(dir) == 1); /* no temporary file left behind */

  /* Layout: header length a multiple of 8, padded with spaces, data section exactly the tensors */
  size_t len;
  unsigned char *raw = slurp(path, &len);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = hl << 8 | raw[i];
  CHECK(hl % 8 == 0 && raw[8] == '{');
  size_t data = 0;
  for (uint32_t i = 0; i < n; i++) data += dpc_tensor_bytes(&ts[i].t);
  CHECK(len == 8 + hl + data);
  free(raw);

  dpc_st_file *f;
  CHECK_MSG(dpc_safetensors_read(path, &f, &d) == DPC_OK, "%s", d.msg);
  if (f) {
    CHECK(dpc_st_count(f) == n);
    for (uint32_t i = 0; i < n && i < dpc_st_count(f); i++) {
      const dpc_st_tensor *e = dpc_st_at(f, i);
      CHECK_MSG(!strcmp(e->name, ts[i].name), "order: %s at %u", e->name, i);
      CHECK_MSG(same_tensor(&e->t, &ts[i].t), "tensor %s", ts[i].name);
      CHECK(e->t.data != NULL);
      CHECK(dpc_st_find(f, ts[i].name) == &e->t);
    }
    CHECK(dpc_st_at(f, n) == NULL);
    CHECK(dpc_st_find(f, "absent") == NULL);
    CHECK(dpc_st_find(f, "scalar")->shape.rank == 0 &&
          *(double *)dpc_st_find(f, "scalar")->data == pi);
    CHECK(dpc_st_meta_count(f) == 3);
    for (int i = 0; i < 3; i++) {
      CHECK(dpc_st_meta_get(f, meta[i].key) &&
            !strcmp(dpc_st_meta_get(f, meta[i].key), meta[i].value));
      CHECK(!strcmp(dpc_st_meta_at(f, (uint32_t)i)->key, meta[i].key));
    }
    CHECK(dpc_st_meta_get(f, "absent") == NULL);
    dpc_st_free(f);
  }
  for (int t = 0; t < DPC_DTYPE_COUNT; t++) free(ts[t].t.data);
  dpc_diag_free(&d);
  rm_dir(dir);
}

/* What our writer makes must be what the reference makes: these are its own test vectors. */
static void st_writes_reference_bytes(void) {
  char dir[] = "/tmp/dpc_st_XXXXXX";
  CHECK(make_dir(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/x.safetensors", dir);
  dpc_diag d;
  dpc_diag_init(&d);
  float v[6] = {0, 1, 2, 3, 4, 5};
  size_t len, rlen;

  dpc_st_tensor a = {"attn.0", {v, DPC_F32, {3, {1, 2, 3}}}};
  CHECK(dpc_safetensors_write(path, &a, 1, NULL, 0, &d) == DPC_OK);
  unsigned char *got = slurp(path, &len);
  unsigned char *want = slurp(DPC_SOURCE_DIR "/tests/unit/data/ref_attn0.safetensors", &rlen);
  CHECK(want && len == rlen && !memcmp(got, want, len));
  free(got);
  free(want);

  /* A shorter name: 7 spaces of padding bring the 65-byte header to 72 */
  dpc_st_tensor b = {"attn0", {v, DPC_F32, {4, {1, 1, 2, 3}}}};
  CHECK(dpc_safetensors_write(path, &b, 1, NULL, 0, &d) == DPC_OK);
  got = slurp(path, &len);
  const char *hdr = "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}"
                    "       ";
  CHECK(len == 8 + 72 + 24 && got[0] == 72 && !memcmp(got + 8, hdr, 72));
  CHECK(!memcmp(got + 80, v, 24));
  free(got);

  /* No tensors: "{}" and six spaces; with metadata, "__metadata__" and five */
  CHECK(dpc_safetensors_write(path, NULL, 0, NULL, 0, &d) == DPC_OK);
  got = slurp(path, &len);
  CHECK(len == 16 && got[0] == 8 && !memcmp(got + 8, "{}      ", 8));
  free(got);
  dpc_st_meta m = {"framework", "pt"};
  CHECK(dpc_safetensors_write(path, NULL, 0, &m, 1, &d) == DPC_OK);
  got = slurp(path, &len);
  CHECK(len == 48 && got[0] == 40 &&
        !memcmp(got + 8, "{\"__metadata__\":{\"framework\":\"pt\"}}     ", 40));
  free(got);
  dpc_st_file *f;
  CHECK(dpc_safetensors_read(path, &f, &d) == DPC_OK);
  CHECK(f && dpc_st_count(f) == 0 && !strcmp(dpc_st_meta_get(f, "framework"), "pt"));
  dpc_st_free(f);
  dpc_diag_free(&d);
  rm_dir(dir);
}

/* A file laid out as PyTorch's safetensors writes it: sorted by dtype width, then name. */
static void st_reads_reference_layout(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_st_file *f;
  CHECK_MSG(dpc_safetensors_read(DPC_SOURCE_DIR "/tests/unit/data/ref_pt.safetensors", &f, &d) ==
                DPC_OK,
            "%s", d.msg);
  if (!f) return;
  const char *order[] = {"step", "d", "bias", "empty", "weight", "idx", "emb", "h", "mask"};
  CHECK(dpc_st_count(f) == 9);
  for (uint32_t i = 0; i < 9 && i < dpc_st_count(f); i++)
    CHECK_MSG(!strcmp(dpc_st_at(f, i)->name, order[i]), "%u: %s", i, dpc_st_at(f, i)->name);
  const dpc_tensor *w = dpc_st_find(f, "weight");
  CHECK(w && w->dtype == DPC_F32 && w->shape.rank == 2 && w->shape.d[0] == 2 && w->shape.d[1] == 3);
  for (int i = 0; w && i < 6; i++) CHECK(dpc_tload(w, i) == i + 1);
  const dpc_tensor *t = dpc_st_find(f, "step");
  CHECK(t && t->dtype == DPC_I64 && t->shape.rank == 0 && dpc_tload_i64(t, 0) == 1200);
  t = dpc_st_find(f, "d");
  CHECK(t && t->dtype == DPC_F64 && dpc_tload(t, 0) == 3.141592653589793);
  t = dpc_st_find(f, "idx");
  CHECK(t && t->dtype == DPC_I32 && dpc_tload_i64(t, 0) == 7 && dpc_tload_i64(t, 1) == -8);
  t = dpc_st_find(f, "emb");
  CHECK(t && t->dtype == DPC_BF16 && dpc_tload(t, 0) == 1 && dpc_tload(t, 1) == -2 &&
        dpc_tload(t, 2) == 0.5 && dpc_tload(t, 3) == 3);
  t = dpc_st_find(f, "h");
  CHECK(t && t->dtype == DPC_F16 && dpc_tload(t, 0) == 1 && dpc_tload(t, 1) == -0.5);
  t = dpc_st_find(f, "mask");
  CHECK(t && t->dtype == DPC_BOOL && dpc_tload(t, 0) == 1 && dpc_tload(t, 1) == 0 &&
        dpc_tload(t, 3) == 1);
  t = dpc_st_find(f, "empty");
  CHECK(t && t->shape.rank == 1 && t->shape.d[0] == 0 && t->data);
  CHECK(!strcmp(dpc_st_meta_get(f, "format"), "pt"));
  CHECK(!strcmp(dpc_st_meta_get(f, "note"), "caf\xc3\xa9"));
  dpc_st_free(f);
  dpc_diag_free(&d);
}

/* Other writers: keys in any order, spaces and newlines, extra fields, "__metadata__": null. */
static void st_reads_any_order(void) {
  const char *h = "{ \"b\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [2, 10]},\n"
                  "  \"__metadata__\": null,\n"
                  "  \"z\": {\"data_offsets\": [10, 10], \"shape\": [0, 5], \"dtype\": \"F64\"},\n"
                  "  \"a\": {\"data_offsets\": [0, 2], \"shape\": [], \"dtype\": \"F16\", "
                  "\"extra\": 1} }\n   ";
  size_t len;
  unsigned char *b = make_st(h, strlen(h), 10, &len);
  const unsigned char data[10] = {0x00, 0x3c, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  memcpy(b + len - 10, data, 10);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_st_file *f;
  CHECK_MSG(dpc_safetensors_parse(b, len, "other.safetensors", &f, &d) == DPC_OK, "%s", d.msg);
  if (f) {
    CHECK(dpc_st_count(f) == 3 && !strcmp(dpc_st_at(f, 0)->name, "a") &&
          !strcmp(dpc_st_at(f, 1)->name, "b") && !strcmp(dpc_st_at(f, 2)->name, "z"));
    CHECK(dpc_tload(dpc_st_find(f, "a"), 0) == 1);
    CHECK(dpc_tload_i64(dpc_st_find(f, "b"), 0) == 1 &&
          dpc_tload_i64(dpc_st_find(f, "b"), 1) == -1);
    CHECK(dpc_st_meta_count(f) == 0);
    dpc_st_free(f);
  }
  free(b);
  dpc_diag_free(&d);
}

/* ---- corrupt files ------------------------------------------------------------------------------
 */

static void st_rejects_corrupt(void) {
  static const struct {
    const char *header;
    size_t data;
    dpc_status st;
    const char *want;
  } cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, DPC_ERR_SYNTAX,
       "the header is not valid JSON (header line 1, column 53): '}' expected"},
      {"{\"a\":{\"dtype\":\"F32\",\n\"shape\":[2],,\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "not valid JSON (header line 2, column 13)"},
      {"", 0, DPC_ERR_SYNTAX, "not valid JSON"},
      {"{\"\xff\":{}}", 0, DPC_ERR_SYNTAX, "not valid JSON"},
      {"[1, 2]", 0, DPC_ERR_SYNTAX, "the header is not a JSON object"},
      {"{\"a\":[1]}", 0, DPC_ERR_SYNTAX, "tensor \"a\" is not an object with \"dtype\""},
      {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "tensor \"a\": \"dtype\" is missing"},
      {"{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "tensor \"a\": \"dtype\" is not a string"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "tensor \"a\": \"shape\" is of the wrong type, not an array of integers"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, DPC_ERR_SYNTAX,
       "tensor \"a\": \"data_offsets\" is missing"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "\"shape\" holds something other than a non-negative integer"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "\"shape\" holds something other than a non-negative integer"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}}", 8, DPC_ERR_SYNTAX,
       "\"data_offsets\" holds something other than a non-negative integer"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, DPC_ERR_SYNTAX,
       "\"data_offsets\" is not [begin, end]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}", 16, DPC_ERR_SYNTAX,
       "\"data_offsets\" is not [begin, end]"},
      {"{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, DPC_ERR_SYNTAX,
       "tensor \"a\" has an unknown dtype \"Q7\""},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, DPC_ERR_UNSUPPORTED,
       "tensor \"a\" has dtype U8, which dpc does not support"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
       DPC_ERR_UNSUPPORTED, "tensor \"a\" has rank 9, above dpc's limit of 8"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20, DPC_ERR_SYNTAX,
       "tensor \"a\": 6 elements of F32 take 24 bytes, but data_offsets [0, 20] hold 20"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
       "\"data_offsets\":[0,0]}}",
       0, DPC_ERR_SYNTAX, "the element count of its shape overflows"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, DPC_ERR_SYNTAX,
       "data_offsets [0, 16] lie outside the data section, which holds 8 bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, DPC_ERR_SYNTAX,
       "data_offsets [8, 0] end before they begin"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
       12, DPC_ERR_SYNTAX, "tensors \"a\" (bytes 0..8) and \"b\" (bytes 4..12) overlap"},
      {"{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
       20, DPC_ERR_SYNTAX,
       "bytes 8..12 of the data section belong to no tensor (a gap before \"b\")"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, DPC_ERR_SYNTAX,
       "bytes 0..4 of the data section belong to no tensor"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
       16, DPC_ERR_SYNTAX, "the header names something twice (header line 1, column"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, DPC_ERR_SYNTAX,
       "4 bytes follow the last tensor's data"},
      {"{}", 3, DPC_ERR_SYNTAX, "3 bytes follow the last tensor's data"},
      {"{\"__metadata__\":{\"k\":\"v\",\"n\":1}}", 0, DPC_ERR_SYNTAX,
       "metadata value of \"n\" is not a string"},
      {"{\"__metadata__\":[\"k\"]}", 0, DPC_ERR_SYNTAX, "\"__metadata__\" is not an object"},
  };
  dpc_diag d;
  dpc_diag_init(&d);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t len;
    unsigned char *b = make_st(cases[i].header, strlen(cases[i].header), cases[i].data, &len);
    dpc_st_file *f = (dpc_st_file *)1;
    dpc_status st = dpc_safetensors_parse(b, len, "bad.safetensors", &f, &d);
    CHECK_MSG(st == cases[i].st, "case %zu: status %d, %s", i, (int)st, d.msg ? d.msg : "");
    CHECK_MSG(f == NULL, "case %zu", i);
    CHECK_MSG(d.msg && !strncmp(d.msg, "bad.safetensors: ", 17) && strstr(d.msg, cases[i].want),
              "case %zu: %s", i, d.msg ? d.msg : "(none)");
    free(b);
    dpc_diag_clear(&d);
  }

  /* A header padded with NULs instead of spaces (serde_json refuses it too) */
  dpc_st_file *f;
  size_t len;
  unsigned char *nul = make_st("{}\0\0\0\0\0\0", 8, 0, &len);
  CHECK(dpc_safetensors_parse(nul, len, "bad.safetensors", &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "not valid JSON"), "%s", d.msg);
  free(nul);

  /* The 8-byte length itself */
  unsigned char b[64] = {0};
  CHECK(dpc_safetensors_parse(b, 5, "bad.safetensors", &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "bad.safetensors: too short for a safetensors file (5 bytes"),
            "%s", d.msg);
  b[5] = 1; /* 2^40 */
  CHECK(dpc_safetensors_parse(b, 64, "bad.safetensors", &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "header length 1099511627776 is above the limit"), "%s", d.msg);
  memset(b, 0xff, 8);
  CHECK(dpc_safetensors_parse(b, 64, "bad.safetensors", &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "is above the limit of 100000000 bytes"), "%s", d.msg);
  memset(b, 0, 8);
  b[0] = 100;
  CHECK(dpc_safetensors_parse(b, 64, "bad.safetensors", &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg &&
                strstr(d.msg, "the header length 100 runs past the end of the file (64 bytes)"),
            "%s", d.msg);
  dpc_diag_free(&d);
}

/* The file reader: truncation on disk, a missing file, a folder. */
static void st_read_errors(void) {
  char dir[] = "/tmp/dpc_st_XXXXXX";
  CHECK(make_dir(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/t.safetensors", dir);
  dpc_diag d;
  dpc_diag_init(&d);
  float v[4] = {1, 2, 3, 4};
  dpc_st_tensor a = {"a", {v, DPC_F32, {1, {4}}}};
  CHECK(dpc_safetensors_write(path, &a, 1, NULL, 0, &d) == DPC_OK);
  struct stat sb;
  CHECK(stat(path, &sb) == 0);
  dpc_st_file *f;
  CHECK(truncate(path, sb.st_size - 4) == 0); /* the last element cut off */
  CHECK(dpc_safetensors_read(path, &f, &d) == DPC_ERR_SYNTAX && f == NULL);
  CHECK_MSG(d.msg && strstr(d.msg, path) &&
                strstr(d.msg, "data_offsets [0, 16] lie outside the data section, which holds 12 "
                              "bytes (truncated file?)"),
            "%s", d.msg);
  CHECK(truncate(path, 20) == 0); /* inside the header */
  CHECK(dpc_safetensors_read(path, &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "runs past the end of the file (20 bytes)"), "%s", d.msg);
  CHECK(truncate(path, 3) == 0);
  CHECK(dpc_safetensors_read(path, &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "too short"), "%s", d.msg);
  unlink(path);
  CHECK(dpc_safetensors_read(path, &f, &d) == DPC_ERR_IO);
  CHECK_MSG(d.msg && strstr(d.msg, "cannot open") && strstr(d.msg, path), "%s", d.msg);
  CHECK(dpc_safetensors_read(dir, &f, &d) == DPC_ERR_IO);
  CHECK_MSG(d.msg && strstr(d.msg, "not a regular file"), "%s", d.msg);
  dpc_diag_free(&d);
  rm_dir(dir);
}

/* Bad arguments to the writer are refused before any file is created. */
static void st_write_errors(void) {
  char dir[] = "/tmp/dpc_st_XXXXXX";
  CHECK(make_dir(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  float v[2] = {1, 2};
  dpc_tensor ok = {v, DPC_F32, {1, {2}}};
  struct {
    dpc_st_tensor t[2];
    uint32_t n;
    dpc_st_meta m[2];
    uint32_t nm;
    const char *want;
  } cases[] = {
      {{{"a", ok}, {"a", ok}}, 2, {{0}}, 0, "tensor name \"a\" is given twice"},
      {{{"__metadata__", ok}}, 1, {{0}}, 0, "needs a name other than \"__metadata__\""},
      {{{NULL, ok}}, 1, {{0}}, 0, "needs a name other than none"},
      {{{"a", {v, DPC_F32, {1, {DPC_DIM_SYM(0)}}}}}, 1, {{0}}, 0, "symbolic or negative"},
      {{{"a", {NULL, DPC_F32, {1, {2}}}}}, 1, {{0}}, 0, "tensor \"a\" has no data"},
      {{{"a", {v, DPC_DTYPE_COUNT, {1, {2}}}}}, 1, {{0}}, 0, "bad dtype or rank"},
      {{{"bad\xff", ok}}, 1, {{0}}, 0, "is not valid UTF-8"},
      {{{"a", ok}}, 1, {{"k", "1"}, {"k", "2"}}, 2, "metadata key \"k\" is given twice"},
      {{{"a", ok}}, 1, {{"k", NULL}}, 1, "has no key or value"},
      {{{"a", ok}}, 1, {{"k", "\xc3"}}, 1, "is not valid UTF-8"},
  };
  dpc_diag d;
  dpc_diag_init(&d);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    dpc_status st =
        dpc_safetensors_write(path, cases[i].t, cases[i].n, cases[i].m, cases[i].nm, &d);
    CHECK_MSG(st == DPC_ERR_INVALID, "case %zu: %d", i, (int)st);
    CHECK_MSG(d.msg && strstr(d.msg, path) && strstr(d.msg, cases[i].want), "case %zu: %s", i,
              d.msg ? d.msg : "(none)");
    dpc_diag_clear(&d);
  }
  CHECK(count_entries(dir) == 0);
  char nodir[300];
  snprintf(nodir, sizeof nodir, "%s/missing/w.safetensors", dir);
  dpc_st_tensor a = {"a", ok};
  CHECK(dpc_safetensors_write(nodir, &a, 1, NULL, 0, &d) == DPC_ERR_IO);
  CHECK_MSG(d.msg && strstr(d.msg, "cannot create"), "%s", d.msg);
  dpc_diag_free(&d);
  rm_dir(dir);
}

/* ---- crash safety ---------------------------------------------------------------------------- */

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* Checkpoint B: 300 MB in six tensors, big enough that a write takes a visible while. */
enum { B_TENSORS = 6, B_ELEMS = 50 << 18 }; /* 6 x 50 MB of f32 */

DPC_NORETURN static void write_b_forever(const char *path, int done_fd) {
  dpc_st_tensor t[B_TENSORS];
  static const char *const names[B_TENSORS] = {"b0", "b1", "b2", "b3", "b4", "b5"};
  for (int i = 0; i < B_TENSORS; i++) {
    void *p = malloc((size_t)B_ELEMS * 4);
    if (!p) _exit(3);
    memset(p, 0x40 + i, (size_t)B_ELEMS * 4);
    t[i] = (dpc_st_tensor){names[i], {p, DPC_F32, {1, {B_ELEMS}}}};
  }
  dpc_st_meta m = {"which", "B"};
  dpc_diag d;
  dpc_diag_init(&d);
  for (;;) {
    if (dpc_safetensors_write(path, t, B_TENSORS, &m, 1, &d)) _exit(2);
    if (write(done_fd, "w", 1) != 1) _exit(4); /* tell the parent a whole write finished */
  }
}

static void st_kill9_during_write_keeps_previous(void) {
  char dir[] = "/tmp/dpc_st_kill_XXXXXX";
  CHECK(make_dir(dir));
  char path[256], tmp[300];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  dpc_diag d;
  dpc_diag_init(&d);
  float av[3] = {1, 2, 3};
  dpc_st_tensor a = {"a", {av, DPC_F32, {1, {3}}}};
  dpc_st_meta am = {"which", "A"};
  CHECK(dpc_safetensors_write(path, &a, 1, &am, 1, &d) == DPC_OK);
  size_t alen, len;
  unsigned char *abytes = slurp(path, &alen);
  const off_t b_size = (off_t)B_TENSORS * B_ELEMS * 4;

  /* The child writes B over and over; we kill it while its temporary file is partly written.
   * The first write is nearly always the one caught; if a whole write got through first, PATH
   * must be exactly B, and we try again from A. */
  bool caught = false;
  for (int attempt = 0; attempt < 5 && !caught; attempt++) {
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(pfd[0]);
      write_b_forever(path, pfd[1]);
    }
    CHECK(pid > 0);
    close(pfd[1]);
    if (pid < 0) break;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    bool partial = false, reaped = false;
    int status = 0;
    for (int i = 0; i < 300000 && !partial && !reaped; i++) { /* 30 s at most */
      struct stat sb;
      partial = !stat(tmp, &sb) && sb.st_size > (1 << 20) && sb.st_size < b_size - (1 << 20);
      if (!partial) {
        reaped = waitpid(pid, &status, WNOHANG) == pid;
        nap_us(100);
      }
    }
    if (!reaped) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    CHECK_MSG(partial, "never saw the temporary file half written (child status %d)", status);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    int done = 0;
    char buf[64];
    ssize_t r;
    while ((r = read(pfd[0], buf, sizeof buf)) > 0) done += (int)r;
    close(pfd[0]);

    dpc_st_file *f;
    CHECK_MSG(dpc_safetensors_read(path, &f, &d) == DPC_OK, "%s", d.msg);
    if (done == 0) {
      /* The kill landed in the first write: PATH is still A, byte for byte. */
      unsigned char *now = slurp(path, &len);
      CHECK(now && len == alen && !memcmp(now, abytes, alen));
      free(now);
      CHECK(f && dpc_st_count(f) == 1 && same_tensor(&dpc_st_at(f, 0)->t, &a.t) &&
            !strcmp(dpc_st_meta_get(f, "which"), "A"));
      caught = partial;
    } else {
      CHECK(f && dpc_st_count(f) == B_TENSORS && !strcmp(dpc_st_meta_get(f, "which"), "B"));
      CHECK(dpc_safetensors_write(path, &a, 1, &am, 1, &d) == DPC_OK);
    }
    dpc_st_free(f);
    if (!caught) dpc_safetensors_clean(path, &d);
  }
  CHECK(caught);

  /* What is left: PATH and the killed writer's temporary file, nothing else. */
  CHECK(exists(tmp));
  CHECK(count_entries(dir) == 2);
  /* The next successful write clears it away. */
  CHECK(dpc_safetensors_write(path, &a, 1, &am, 1, &d) == DPC_OK);
  CHECK(!exists(tmp));
  CHECK(count_entries(dir) == 1);
  free(abytes);
  dpc_diag_free(&d);
  rm_dir(dir);
}

/* dpc_safetensors_clean removes the leftovers of dead writers of this path only. */
static void st_clean_removes_dead_writers_files(void) {
  char dir[] = "/tmp/dpc_st_XXXXXX";
  CHECK(make_dir(dir));
  fflush(stdout);
  pid_t dead = fork(); /* a pid that is surely gone once reaped */
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  char names[6][64];
  snprintf(names[0], sizeof names[0], "c.safetensors.tmp.%ld", (long)dead);      /* removed */
  snprintf(names[1], sizeof names[1], "c.safetensors.tmp.%ld", (long)getpid());  /* alive */
  snprintf(names[2], sizeof names[2], "c.safetensors.tmp.%ld", (long)getppid()); /* alive */
  snprintf(names[3], sizeof names[3], "c.safetensors.tmp.x%ld", (long)dead);     /* not ours */
  snprintf(names[4], sizeof names[4], "d.safetensors.tmp.%ld", (long)dead);      /* other file */
  snprintf(names[5], sizeof names[5], "c.safetensors.tmp.0");                    /* not a pid */
  char p[512];
  for (int i = 0; i < 6; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
  }
  dpc_diag d;
  dpc_diag_init(&d);
  snprintf(p, sizeof p, "%s/c.safetensors", dir);
  CHECK_MSG(dpc_safetensors_clean(p, &d) == DPC_OK, "%s", d.msg);
  for (int i = 0; i < 6; i++) {
    char q[512];
    snprintf(q, sizeof q, "%s/%s", dir, names[i]);
    CHECK_MSG(exists(q) == (i != 0), "%s", names[i]);
  }
  snprintf(p, sizeof p, "%s/missing/c.safetensors", dir);
  CHECK(dpc_safetensors_clean(p, &d) == DPC_ERR_IO);
  dpc_diag_free(&d);
  rm_dir(dir);
}

/* ---- checksums ----------------------------------------------------------------------------- */

/* Flip one bit of byte `off` of the file at path. */
static void flip_byte(const char *path, long off) {
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  if (!f) return;
  fseek(f, off, SEEK_SET);
  int c = fgetc(f);
  fseek(f, off, SEEK_SET);
  fputc(c ^ 0x04, f);
  fclose(f);
}

/* The header length of the file at path: its data section starts 8 bytes after it. */
static long header_len(const char *path) {
  size_t len;
  unsigned char *raw = slurp(path, &len);
  uint64_t hl = 0;
  for (int i = 7; raw && len >= 8 && i >= 0; i--) hl = hl << 8 | raw[i];
  free(raw);
  return (long)hl;
}

/* A checked write records each tensor's CRC-32; a byte flipped in one tensor's data is refused
 * by both readers, naming that tensor; without checksums the same damage loads as before. */
static void st_checksums_name_the_damaged_tensor(void) {
  /* the standard check value of CRC-32, and that it continues over pieces */
  CHECK(dpc_st_crc32(0, "123456789", 9) == 0xcbf43926u);
  CHECK(dpc_st_crc32(dpc_st_crc32(0, "1234", 4), "56789", 5) == 0xcbf43926u);
  CHECK(dpc_st_crc32(0, NULL, 0) == 0);
  /* a long buffer (eight bytes a step) agrees with the same bytes fed one at a time */
  unsigned char big[10007];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 2654435761u >> 13);
  uint32_t bytewise = 0;
  for (size_t i = 0; i < sizeof big; i++) bytewise = dpc_st_crc32(bytewise, big + i, 1);
  CHECK(dpc_st_crc32(0, big, sizeof big) == bytewise);
  char dir[] = "/tmp/dpc_st_XXXXXX";
  CHECK(make_dir(dir));
  char checked[256], plain[256];
  snprintf(checked, sizeof checked, "%s/c.safetensors", dir);
  snprintf(plain, sizeof plain, "%s/p.safetensors", dir);
  float a[3] = {1.5f, -2, 3};
  int64_t b[2] = {7, -9};
  dpc_st_tensor ts[] = {{"fc.a", {a, DPC_F32, {1, {3}}}},
                        {"fc.b", {b, DPC_I64, {1, {2}}}},
                        {"none", {NULL, DPC_F32, {1, {0}}}}};
  dpc_st_meta meta[] = {{"step", "7"}};
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK_MSG(dpc_safetensors_write_checked(checked, ts, 3, meta, 1, &d) == DPC_OK, "%s", d.msg);
  CHECK_MSG(dpc_safetensors_write(plain, ts, 3, meta, 1, &d) == DPC_OK, "%s", d.msg);
  dpc_st_file *f = NULL;
  CHECK_MSG(dpc_safetensors_read(checked, &f, &d) == DPC_OK, "%s", d.msg);
  if (f) {
    char want[16];
    snprintf(want, sizeof want, "%08x", (unsigned)dpc_st_crc32(0, b, sizeof b));
    const char *got = dpc_st_meta_get(f, DPC_ST_CRC_PREFIX "fc.b");
    CHECK_MSG(got && !strcmp(got, want), "%s vs %s", got ? got : "(none)", want);
    CHECK(!strcmp(dpc_st_meta_get(f, "step"), "7"));
    CHECK(same_tensor(dpc_st_find(f, "fc.a"), &ts[0].t));
    dpc_st_free(f);
  }
  /* one bit of fc.b's second element (data bytes 12..27 are fc.b's) */
  flip_byte(checked, 8 + header_len(checked) + 12 + 9);
  flip_byte(plain, 8 + header_len(plain) + 12 + 9);
  CHECK(dpc_safetensors_read(checked, &f, &d) == DPC_ERR_SYNTAX && f == NULL);
  CHECK_MSG(d.msg && strstr(d.msg, checked) && strstr(d.msg, "\"fc.b\" is damaged") &&
                !strstr(d.msg, "fc.a"),
            "%s", d.msg);
  size_t len;
  unsigned char *raw = slurp(checked, &len);
  CHECK(dpc_safetensors_parse(raw, len, "mem", &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "\"fc.b\" is damaged"), "%s", d.msg);
  free(raw);
  CHECK_MSG(dpc_safetensors_read(plain, &f, &d) == DPC_OK, "%s", d.msg);
  if (f) {
    CHECK(((const int64_t *)dpc_st_find(f, "fc.b")->data)[1] == (-9 ^ (4 << 8)));
    dpc_st_free(f);
  }
  /* a checksum that names no tensor, or is not 8 hex digits; and a key the writer needs */
  dpc_st_meta stray[] = {{DPC_ST_CRC_PREFIX "gone", "0badf00d"}};
  CHECK(dpc_safetensors_write(plain, ts, 3, stray, 1, &d) == DPC_OK);
  CHECK(dpc_safetensors_read(plain, &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "\"gone\", which the file does not hold"), "%s", d.msg);
  dpc_st_meta bad_hex[] = {{DPC_ST_CRC_PREFIX "fc.a", "12345"}};
  CHECK(dpc_safetensors_write(plain, ts, 3, bad_hex, 1, &d) == DPC_OK);
  CHECK(dpc_safetensors_read(plain, &f, &d) == DPC_ERR_SYNTAX);
  CHECK_MSG(d.msg && strstr(d.msg, "not 8 hex digits"), "%s", d.msg);
  CHECK(dpc_safetensors_write_checked(plain, ts, 3, bad_hex, 1, &d) == DPC_ERR_INVALID);
  CHECK_MSG(d.msg && strstr(d.msg, "is taken"), "%s", d.msg);
  dpc_diag_free(&d);
  rm_dir(dir);
}

const unit_test unit_tests[] = {
    {"st_roundtrip_every_dtype", st_roundtrip_every_dtype},
    {"st_writes_reference_bytes", st_writes_reference_bytes},
    {"st_reads_reference_layout", st_reads_reference_layout},
    {"st_reads_any_order", st_reads_any_order},
    {"st_rejects_corrupt", st_rejects_corrupt},
    {"st_read_errors", st_read_errors},
    {"st_write_errors", st_write_errors},
    {"st_kill9_during_write_keeps_previous", st_kill9_during_write_keeps_previous},
    {"st_clean_removes_dead_writers_files", st_clean_removes_dead_writers_files},
    {"st_checksums_name_the_damaged_tensor", st_checksums_name_the_damaged_tensor},
    {NULL, NULL},
};
