/*
 * test_data.c — datasets and visiting order (runtime/data.h): IDX folders plain and gzip'd,
 * .npy pairs, scaling and labels, batches and shuffling, and every refusal of a bad file. The
 * tests write their own tiny files into a temporary folder; the real Fashion-MNIST is checked
 * only where the Debian package is installed.
 */
#include "runtime/data.h"
#include "tests/unit/unit.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ---- writing test files --------------------------------------------------------------------- */

static char *tmp_dir(void) {
  static const char tmpl[] = "/tmp/dpc_data_XXXXXX";
  char *p = malloc(sizeof tmpl);
  memcpy(p, tmpl, sizeof tmpl);
  if (!mkdtemp(p)) {
    printf("    cannot make a temporary folder\n");
    exit(1);
  }
  return p;
}

/* Remove a folder of files and folders made by these tests. */
static void rm_tree(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
      rm_tree(p);
    else
      unlink(p);
  }
  closedir(dp);
  rmdir(dir);
}

static const char *path_in(char buf[1024], const char *dir, const char *name) {
  snprintf(buf, 1024, "%s/%s", dir, name);
  return buf;
}

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
  char p[1024];
  FILE *f = fopen(path_in(p, dir, name), "wb");
  CHECK(f && fwrite(data, 1, n, f) == n);
  if (f) fclose(f);
}

/* gzip `data` into memory (a whole gzip member, as the gzip tool writes it). */
static size_t gzip_bytes(const void *data, size_t n, unsigned char *out, size_t cap) {
  z_stream z;
  memset(&z, 0, sizeof z);
  CHECK(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  z.next_in = (unsigned char *)data;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
  size_t got = cap - z.avail_out;
  deflateEnd(&z);
  return got;
}

static void write_gz(const char *dir, const char *name, const void *data, size_t n) {
  unsigned char buf[8192];
  write_file(dir, name, buf, gzip_bytes(data, n, buf, sizeof buf));
}

/* An IDX image of unsigned bytes; returns its length. */
static size_t idx_bytes(unsigned char *out, uint32_t rank, const uint32_t *dims,
                        const uint8_t *data) {
  unsigned char *p = out;
  *p++ = 0, *p++ = 0, *p++ = 0x08, *p++ = (unsigned char)rank;
  size_t numel = 1;
  for (uint32_t i = 0; i < rank; i++) {
    *p++ = (unsigned char)(dims[i] >> 24), *p++ = (unsigned char)(dims[i] >> 16);
    *p++ = (unsigned char)(dims[i] >> 8), *p++ = (unsigned char)dims[i];
    numel *= dims[i];
  }
  memcpy(p, data, numel);
  return (size_t)(p - out) + numel;
}

/* The standard fixture: 5 images of 2x3 and labels 3 1 4 1 5. Pixel k of image i is
 * (i * 6 + k) * 8, except that pixel 0 of image 0 is 255 so the top of the range is tested. */
enum { N5 = 5, H = 2, W = 3 };
static const uint8_t labels5[N5] = {3, 1, 4, 1, 5};
static uint8_t pixel(int i, int k) {
  return i == 0 && k == 0 ? 255 : (uint8_t)((i * 6 + k) * 8);
}
static size_t images5(unsigned char *out) {
  uint8_t px[N5 * H * W];
  for (int i = 0; i < N5; i++)
    for (int k = 0; k < H * W; k++) px[i * H * W + k] = pixel(i, k);
  return idx_bytes(out, 3, (const uint32_t[]){N5, H, W}, px);
}
static size_t labels_idx(unsigned char *out, uint32_t n, const uint8_t *lab) {
  return idx_bytes(out, 1, (const uint32_t[]){n}, lab);
}

/* A version 1.0 .npy file with the given dtype text and shape text ("(4, 3)"). */
static void write_npy(const char *dir, const char *name, const char *descr, const char *shape,
                      const void *data, size_t bytes) {
  char h[128];
  int hn = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }\n", descr,
                    shape);
  unsigned char buf[4096] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hn, 0};
  memcpy(buf + 10, h, (size_t)hn);
  memcpy(buf + 10 + hn, data, bytes);
  write_file(dir, name, buf, 10 + (size_t)hn + bytes);
}

/* Open `spec`, expecting failure with a message containing each of the (up to three) texts;
 * `what` names the case in a failure. */
static void expect_open_error(const char *what, const char *spec, dpc_split split, const char *w1,
                              const char *w2, const char *w3) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_dataset *ds = NULL;
  dpc_status st = dpc_dataset_open(spec, split, &ds, &d);
  CHECK_MSG(st != DPC_OK && ds == NULL, "%s: '%s' opened", what, spec);
  const char *m = d.msg ? d.msg : "";
  const char *want[3] = {w1, w2, w3};
  for (int i = 0; i < 3; i++)
    CHECK_MSG(!want[i] || strstr(m, want[i]), "%s: '%s' not in: %s", what, want[i], m);
  dpc_dataset_close(ds);
  dpc_diag_free(&d);
}

static dpc_dataset *open_ok(const char *spec, dpc_split split) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_dataset *ds = NULL;
  CHECK_MSG(dpc_dataset_open(spec, split, &ds, &d) == DPC_OK, "%s: %s", spec, d.msg);
  dpc_diag_free(&d);
  return ds;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void idx_folder(void) {
  char *dir = tmp_dir();
  unsigned char buf[512];
  /* train plain, t10k gzip'd (3 images, the last three of the fixture's labels) */
  write_file(dir, "train-images-idx3-ubyte", buf, images5(buf));
  write_file(dir, "train-labels-idx1-ubyte", buf, labels_idx(buf, N5, labels5));
  uint8_t px3[3 * H * W];
  for (int k = 0; k < 3 * H * W; k++) px3[k] = (uint8_t)(k + 1);
  write_gz(dir, "t10k-images-idx3-ubyte.gz", buf,
           idx_bytes(buf, 3, (const uint32_t[]){3, H, W}, px3));
  write_gz(dir, "t10k-labels-idx1-ubyte.gz", buf, labels_idx(buf, 3, labels5 + 2));

  dpc_dataset *ds = open_ok(dir, DPC_SPLIT_TRAIN);
  if (!ds) return;
  CHECK(dpc_dataset_size(ds) == N5);
  const dpc_shape *s = dpc_dataset_sample_shape(ds);
  CHECK(s->rank == 2 && s->d[0] == H && s->d[1] == W);
  CHECK(dpc_dataset_classes(ds) == 6);
  CHECK(strstr(dpc_dataset_name(ds), dir) && strstr(dpc_dataset_name(ds), "train"));

  dpc_diag d;
  dpc_diag_init(&d);
  const uint64_t pick[2] = {4, 0};
  float xf[2 * H * W];
  int32_t yi[2];
  dpc_tensor x = {xf, DPC_F32, {2, {2, H * W}}}, y = {yi, DPC_I32, {1, {2}}};
  CHECK_MSG(dpc_dataset_fill(ds, pick, 2, &x, &y, &d) == DPC_OK, "%s", d.msg);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < H * W; k++)
      CHECK(xf[i * H * W + k] == (float)pixel((int)pick[i], k) / 255.0f);
  CHECK(xf[H * W] == 1.0f); /* 255 -> exactly 1 */
  CHECK(yi[0] == 5 && yi[1] == 3);
  /* [n, 2, 3] takes them too; f64, f16, bf16 and i64 labels convert */
  double xd[2 * H * W];
  int64_t yl[2];
  dpc_tensor x3 = {xd, DPC_F64, {3, {2, H, W}}}, y64 = {yl, DPC_I64, {1, {2}}};
  CHECK(dpc_dataset_fill(ds, pick, 2, &x3, &y64, &d) == DPC_OK);
  CHECK(xd[1] == pixel(4, 1) / 255.0 && xd[6] == 1.0 && yl[0] == 5 && yl[1] == 3);
  uint16_t xh[2 * H * W];
  for (int t = 0; t < 2; t++) {
    dpc_tensor xh_t = {xh, t ? DPC_BF16 : DPC_F16, {2, {2, H * W}}};
    CHECK(dpc_dataset_fill(ds, pick, 2, &xh_t, NULL, &d) == DPC_OK);
    for (int k = 0; k < 2 * H * W; k++) CHECK_NEAR(dpc_tload(&xh_t, k), xd[k], t ? 4e-3 : 5e-4);
  }
  dpc_dataset_close(ds);

  ds = open_ok(dir, DPC_SPLIT_TEST);
  if (ds) {
    CHECK(dpc_dataset_size(ds) == 3 && dpc_dataset_classes(ds) == 6);
    const uint64_t all[3] = {0, 1, 2};
    float x3f[3 * H * W];
    dpc_tensor xt = {x3f, DPC_F32, {2, {3, H * W}}};
    CHECK(dpc_dataset_fill(ds, all, 3, &xt, NULL, &d) == DPC_OK);
    CHECK(x3f[0] == 1 / 255.0f && x3f[17] == 18 / 255.0f);
  }
  dpc_dataset_close(ds);
  dpc_diag_free(&d);

  /* the dotted names an unpacked MNIST download often has */
  char *dir2 = tmp_dir();
  write_file(dir2, "train-images.idx3-ubyte", buf, images5(buf));
  write_file(dir2, "train-labels.idx1-ubyte", buf, labels_idx(buf, N5, labels5));
  ds = open_ok(dir2, DPC_SPLIT_TRAIN);
  CHECK(ds && dpc_dataset_size(ds) == N5);
  dpc_dataset_close(ds);
  rm_tree(dir2);
  free(dir2);
  rm_tree(dir);
  free(dir);
}

static void npy_pairs(void) {
  char *dir = tmp_dir();
  char xs[1024], ys[1024], spec[4096];
  float xv[4 * 3];
  for (int i = 0; i < 12; i++) xv[i] = (float)i * 0.5f - 1;
  int64_t yv[4] = {2, 0, 7, 1};
  write_npy(dir, "x.npy", "<f4", "(4, 3)", xv, sizeof xv);
  write_npy(dir, "y.npy", "<i8", "(4,)", yv, sizeof yv);
  snprintf(spec, sizeof spec, "%s,%s", path_in(xs, dir, "x.npy"), path_in(ys, dir, "y.npy"));
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_dataset *ds = open_ok(spec, DPC_SPLIT_TEST); /* the split is ignored */
  if (ds) {
    CHECK(dpc_dataset_size(ds) == 4 && dpc_dataset_classes(ds) == 8);
    const dpc_shape *s = dpc_dataset_sample_shape(ds);
    CHECK(s->rank == 1 && s->d[0] == 3);
    const uint64_t pick[3] = {2, 2, 1};
    float xf[9];
    int32_t yi[3];
    dpc_tensor x = {xf, DPC_F32, {2, {3, 3}}}, y = {yi, DPC_I32, {1, {3}}};
    CHECK_MSG(dpc_dataset_fill(ds, pick, 3, &x, &y, &d) == DPC_OK, "%s", d.msg);
    CHECK(xf[0] == xv[6] && xf[5] == xv[8] && xf[6] == xv[3] && xf[8] == xv[5]);
    CHECK(yi[0] == 7 && yi[1] == 7 && yi[2] == 0);
    double xd[9];
    dpc_tensor x64 = {xd, DPC_F64, {2, {3, 3}}};
    CHECK(dpc_dataset_fill(ds, pick, 3, &x64, NULL, &d) == DPC_OK && xd[7] == xv[4]);
  }
  dpc_dataset_close(ds);

  /* uint8 inputs are scaled like IDX pixels; u1 and i4 labels are integers */
  uint8_t xu[4 * 2 * 2];
  for (int i = 0; i < 16; i++) xu[i] = (uint8_t)(i * 17);
  uint8_t yu[4] = {1, 1, 0, 3};
  int32_t y4[4] = {0, 5, 0, 0};
  write_npy(dir, "xu.npy", "|u1", "(4, 2, 2)", xu, sizeof xu);
  write_npy(dir, "yu.npy", "|u1", "(4,)", yu, sizeof yu);
  write_npy(dir, "y4.npy", "<i4", "(4,)", y4, sizeof y4);
  snprintf(spec, sizeof spec, "%s,%s", path_in(xs, dir, "xu.npy"), path_in(ys, dir, "yu.npy"));
  ds = open_ok(spec, DPC_SPLIT_TRAIN);
  if (ds) {
    CHECK(dpc_dataset_classes(ds) == 4 && dpc_dataset_sample_shape(ds)->rank == 2);
    const uint64_t pick[1] = {3};
    float xf[4];
    int64_t yl[1];
    dpc_tensor x = {xf, DPC_F32, {2, {1, 4}}}, y = {yl, DPC_I64, {1, {1}}};
    CHECK(dpc_dataset_fill(ds, pick, 1, &x, &y, &d) == DPC_OK);
    CHECK(xf[0] == 204 / 255.0f && xf[3] == 1.0f && yl[0] == 3);
  }
  dpc_dataset_close(ds);
  snprintf(spec, sizeof spec, "%s,%s", path_in(xs, dir, "xu.npy"), path_in(ys, dir, "y4.npy"));
  ds = open_ok(spec, DPC_SPLIT_TRAIN);
  CHECK(ds && dpc_dataset_classes(ds) == 6);
  dpc_dataset_close(ds);
  dpc_diag_free(&d);
  rm_tree(dir);
  free(dir);
}

static bool is_permutation(const uint64_t *p, uint64_t n) {
  char *seen = calloc(n, 1);
  bool ok = true;
  for (uint64_t i = 0; i < n; i++) {
    if (p[i] >= n || seen[p[i]]) ok = false;
    if (p[i] < n) seen[p[i]] = 1;
  }
  free(seen);
  return ok;
}

static void order_and_batches(void) {
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_order o;
  /* shuffle off: 0..n-1 in every epoch; 10 samples in batches of 4 are 4, 4 and a partial 2 */
  CHECK(dpc_order_init(&o, 10, 1, false, &d) == DPC_OK);
  dpc_order_epoch(&o, 3);
  for (uint64_t i = 0; i < 10; i++) CHECK(o.perm[i] == i);
  CHECK(dpc_order_batches(&o, 4) == 3 && dpc_order_batches(&o, 10) == 1 &&
        dpc_order_batches(&o, 11) == 1 && dpc_order_batches(&o, 0) == 0);
  uint32_t c;
  const uint64_t *b = dpc_order_batch(&o, 4, 1, &c);
  CHECK(c == 4 && b && b[0] == 4 && b[3] == 7);
  b = dpc_order_batch(&o, 4, 2, &c);
  CHECK(c == 2 && b && b[0] == 8 && b[1] == 9);
  CHECK(dpc_order_batch(&o, 4, 3, &c) == NULL && c == 0);
  dpc_order_free(&o);

  /* shuffle: a pure function of (seed, epoch), each index once, epochs and seeds differ */
  enum { N = 1000 };
  dpc_order a, a2, other;
  CHECK(dpc_order_init(&a, N, 42, true, &d) == DPC_OK);
  CHECK(dpc_order_init(&a2, N, 42, true, &d) == DPC_OK);
  CHECK(dpc_order_init(&other, N, 43, true, &d) == DPC_OK);
  uint64_t *e0 = malloc(N * sizeof *e0), *e1 = malloc(N * sizeof *e1);
  memcpy(e0, a.perm, N * sizeof *e0);
  CHECK(is_permutation(a.perm, N));
  CHECK(!memcmp(a.perm, a2.perm, N * sizeof *e0));
  CHECK(memcmp(a.perm, other.perm, N * sizeof *e0) != 0);
  uint64_t fixed = 0;
  for (uint64_t i = 0; i < N; i++) fixed += a.perm[i] == i;
  CHECK(fixed < 20); /* a shuffle leaves about one element in place */
  dpc_order_epoch(&a, 1);
  memcpy(e1, a.perm, N * sizeof *e1);
  CHECK(is_permutation(a.perm, N) && memcmp(e0, e1, N * sizeof *e0) != 0);
  /* a resumed run jumps straight to epoch 1 and gets the same order */
  dpc_order_epoch(&a2, 7);
  dpc_order_epoch(&a2, 1);
  CHECK(!memcmp(a2.perm, e1, N * sizeof *e1));
  dpc_order_epoch(&a, 0);
  CHECK(!memcmp(a.perm, e0, N * sizeof *e0));
  /* the batches of an epoch cover every sample once */
  uint64_t covered = 0;
  for (uint64_t k = 0; k < dpc_order_batches(&a, 64); k++) {
    const uint64_t *p = dpc_order_batch(&a, 64, k, &c);
    CHECK(p == a.perm + k * 64);
    covered += c;
  }
  CHECK(covered == N && c == N % 64);
  free(e0);
  free(e1);
  dpc_order_free(&a);
  dpc_order_free(&a2);
  dpc_order_free(&other);
  /* tiny cases */
  CHECK(dpc_order_init(&o, 1, 5, true, &d) == DPC_OK && o.perm[0] == 0);
  dpc_order_free(&o);
  CHECK(dpc_order_init(&o, 0, 5, true, &d) == DPC_OK && dpc_order_batches(&o, 8) == 0);
  dpc_order_free(&o);
  dpc_diag_free(&d);
}

/* A folder dataset end to end: the shuffled last batch of 5 samples in 2s holds one. */
static void partial_last_batch(void) {
  char *dir = tmp_dir();
  unsigned char buf[512];
  write_gz(dir, "train-images-idx3-ubyte.gz", buf, images5(buf));
  write_gz(dir, "train-labels-idx1-ubyte.gz", buf, labels_idx(buf, N5, labels5));
  dpc_dataset *ds = open_ok(dir, DPC_SPLIT_TRAIN);
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_order o;
  if (ds && dpc_order_init(&o, dpc_dataset_size(ds), 9, true, &d) == DPC_OK) {
    CHECK(dpc_order_batches(&o, 2) == 3);
    int seen[N5] = {0};
    for (uint64_t k = 0; k < 3; k++) {
      uint32_t n;
      const uint64_t *idx = dpc_order_batch(&o, 2, k, &n);
      CHECK(n == (k < 2 ? 2u : 1u));
      float xf[2 * H * W];
      int32_t yi[2];
      dpc_tensor x = {xf, DPC_F32, {2, {n, H * W}}}, y = {yi, DPC_I32, {1, {n}}};
      CHECK_MSG(dpc_dataset_fill(ds, idx, n, &x, &y, &d) == DPC_OK, "%s", d.msg);
      for (uint32_t i = 0; i < n; i++) {
        seen[idx[i]]++;
        CHECK(yi[i] == labels5[idx[i]] && xf[i * H * W + 1] == pixel((int)idx[i], 1) / 255.0f);
      }
    }
    for (int i = 0; i < N5; i++) CHECK(seen[i] == 1);
    dpc_order_free(&o);
  }
  dpc_dataset_close(ds);
  dpc_diag_free(&d);
  rm_tree(dir);
  free(dir);
}

static void idx_errors(void) {
  char *dir = tmp_dir();
  char p[1024], sub[1024];
  unsigned char img[512], lab[64];
  size_t ni = images5(img), nl = labels_idx(lab, N5, labels5);

  /* nothing there, a file, no spec */
  expect_open_error("missing", path_in(p, dir, "nope"), DPC_SPLIT_TRAIN, "does not exist", "nope",
                    NULL);
  write_file(dir, "plain.txt", "hi", 2);
  expect_open_error("a file", path_in(p, dir, "plain.txt"), DPC_SPLIT_TRAIN, "is a file", NULL,
                    NULL);
  expect_open_error("empty", "", DPC_SPLIT_TRAIN, "no dataset given", NULL, NULL);

  /* a folder without the files: every name looked for is listed */
  mkdir(path_in(sub, dir, "empty"), 0700);
  expect_open_error("empty folder", sub, DPC_SPLIT_TRAIN, "no train images or labels",
                    "train-images-idx3-ubyte.gz, train-images-idx3-ubyte, train-images.idx3-ubyte",
                    "train-labels-idx1-ubyte.gz");
  expect_open_error("empty folder, test", sub, DPC_SPLIT_TEST, "no t10k images or labels",
                    "t10k-labels-idx1-ubyte", NULL);
  write_file(sub, "train-images-idx3-ubyte", img, ni);
  expect_open_error("no labels", sub, DPC_SPLIT_TRAIN, "no train labels", "train-labels.idx1-ubyte",
                    NULL);

  /* each case: a folder whose images or labels file is broken in one way */
  struct {
    const char *what, *file;
    const unsigned char *data;
    size_t n;
    bool gzip;
    size_t cut; /* drop this many bytes from the end of what is written */
    int flip;   /* xor 0xff into this byte of what is written (-1: none) */
    const char *w1, *w2;
  } cases[] = {
      {"truncated gzip", "train-images-idx3-ubyte.gz", img, ni, true, 15, -1, "truncated gzip data",
       "train-images-idx3-ubyte.gz"},
      {"corrupt gzip", "train-images-idx3-ubyte.gz", img, ni, true, 0, -6, "corrupt gzip data",
       "train-images-idx3-ubyte.gz"},
      {"not gzip", "train-labels-idx1-ubyte.gz", lab, nl, false, 0, -1, "not gzip data",
       "train-labels-idx1-ubyte.gz"},
      {"bad magic", "train-images-idx3-ubyte", img, ni, false, 0, 0, "bad magic 0xff000803",
       "train-images-idx3-ubyte"},
      {"bad type", "train-labels-idx1-ubyte", lab, nl, false, 0, 2, "element type 0xf7",
       "train-labels-idx1-ubyte"},
      {"truncated idx", "train-images-idx3-ubyte", img, ni, false, 1, -1, "truncated IDX data",
       "5 x 2 x 3"},
      {"truncated header", "train-images-idx3-ubyte", img, ni, false, ni - 6, -1,
       "truncated IDX header", NULL},
      {"count too large", "train-labels-idx1-ubyte", lab, nl, false, 0, 4, "truncated IDX data",
       "train-labels-idx1-ubyte"},
      {"labels are images", "train-labels-idx1-ubyte", img, ni, false, 0, -1, "expected labels",
       "0x00000801"},
      {"images are labels", "train-images-idx3-ubyte", lab, nl, false, 0, -1, "expected images",
       "0x00000803"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char name[32];
    snprintf(name, sizeof name, "case%zu", c);
    mkdir(path_in(sub, dir, name), 0700);
    bool img_case = strstr(cases[c].file, "images") != NULL;
    if (!img_case) write_file(sub, "train-images-idx3-ubyte", img, ni);
    if (img_case) write_file(sub, "train-labels-idx1-ubyte", lab, nl);
    unsigned char buf[8192];
    size_t n = cases[c].n;
    if (cases[c].gzip)
      n = gzip_bytes(cases[c].data, n, buf, sizeof buf);
    else
      memcpy(buf, cases[c].data, n);
    if (cases[c].flip != -1)
      buf[cases[c].flip < 0 ? n + cases[c].flip : (size_t)cases[c].flip] ^= 0xff;
    write_file(sub, cases[c].file, buf, n - cases[c].cut);
    expect_open_error(cases[c].what, sub, DPC_SPLIT_TRAIN, cases[c].w1, cases[c].w2, NULL);
  }

  /* counts that disagree between images and labels */
  mkdir(path_in(sub, dir, "counts"), 0700);
  write_gz(sub, "train-images-idx3-ubyte.gz", img, ni);
  write_gz(sub, "train-labels-idx1-ubyte.gz", lab, labels_idx(lab, 4, labels5));
  expect_open_error("counts", sub, DPC_SPLIT_TRAIN, "holds 5 images but", "holds 4 labels", NULL);

  /* an IDX of zero samples */
  mkdir(path_in(sub, dir, "zero"), 0700);
  write_file(sub, "train-images-idx3-ubyte", img,
             idx_bytes(img, 3, (const uint32_t[]){0, 2, 2}, img));
  write_file(sub, "train-labels-idx1-ubyte", lab, labels_idx(lab, 0, labels5));
  expect_open_error("zero", sub, DPC_SPLIT_TRAIN, "holds no samples", NULL, NULL);

  /* the parser alone, on a buffer too short for the magic */
  dpc_idx idx;
  dpc_diag d;
  dpc_diag_init(&d);
  CHECK(dpc_idx_parse("\0\0", 2, "t.idx", &idx, &d) == DPC_ERR_SYNTAX && strstr(d.msg, "t.idx"));
  dpc_diag_free(&d);
  rm_tree(dir);
  free(dir);
}

static void npy_errors(void) {
  char *dir = tmp_dir();
  char xs[1024], ys[1024], spec[4096];
  float xv[6] = {0};
  int32_t xi[6] = {0}, y3[3] = {0, 1, 2}, yneg[3] = {0, 1, -7};
  float yf[3] = {0};
  bool yb[3] = {0};
  int64_t y2[2] = {0, 1};
  write_npy(dir, "x.npy", "<f4", "(3, 2)", xv, sizeof xv);
  write_npy(dir, "xi.npy", "<i4", "(3, 2)", xi, sizeof xi);
  write_npy(dir, "y.npy", "<i4", "(3,)", y3, sizeof y3);
  write_npy(dir, "yf.npy", "<f4", "(3,)", yf, sizeof yf);
  write_npy(dir, "yb.npy", "|b1", "(3,)", yb, sizeof yb);
  write_npy(dir, "y2.npy", "<i8", "(2,)", y2, sizeof y2);
  write_npy(dir, "y31.npy", "<i4", "(3, 1)", y3, sizeof y3);
  write_npy(dir, "yneg.npy", "<i4", "(3,)", yneg, sizeof yneg);
  write_npy(dir, "xs.npy", "<f4", "()", xv, 4);
  struct {
    const char *x, *y, *w1, *w2;
  } cases[] = {
      {"xi.npy", "y.npy", "inputs must be float (f4, f8, f2) or uint8 (u1), not '<i4'", "xi.npy"},
      {"x.npy", "yf.npy", "labels must be integers", "'<f4'"},
      {"x.npy", "yb.npy", "labels must be integers", "yb.npy"},
      {"x.npy", "y2.npy", "labels [2] do not match inputs [3, 2]", "expected [3]"},
      {"x.npy", "y31.npy", "labels [3, 1] do not match", NULL},
      {"x.npy", "yneg.npy", "label 2 is -7", "yneg.npy"},
      {"xs.npy", "y.npy", "leading sample dimension", NULL},
      {"x.npy", "missing.npy", "cannot open", "missing.npy"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    snprintf(spec, sizeof spec, "%s,%s", path_in(xs, dir, cases[c].x),
             path_in(ys, dir, cases[c].y));
    expect_open_error(cases[c].y, spec, DPC_SPLIT_TRAIN, cases[c].w1, cases[c].w2, NULL);
  }
  snprintf(spec, sizeof spec, "%s,%s,%s", xs, ys, ys);
  expect_open_error("three", spec, DPC_SPLIT_TRAIN, "expected two .npy files", NULL, NULL);
  expect_open_error("no inputs", ",y.npy", DPC_SPLIT_TRAIN, "expected two .npy files", NULL, NULL);
  rm_tree(dir);
  free(dir);
}

static void fill_errors(void) {
  char *dir = tmp_dir();
  unsigned char buf[512];
  write_file(dir, "train-images-idx3-ubyte", buf, images5(buf));
  write_file(dir, "train-labels-idx1-ubyte", buf, labels_idx(buf, N5, labels5));
  dpc_dataset *ds = open_ok(dir, DPC_SPLIT_TRAIN);
  if (!ds) return;
  dpc_diag d;
  dpc_diag_init(&d);
  const uint64_t pick[2] = {1, 2}, bad[2] = {1, 5};
  float xf[16];
  int32_t yi[4];
  float yf[2];
  for (int i = 0; i < 16; i++) xf[i] = -1;
  struct {
    dpc_tensor x, y;
    const uint64_t *idx;
    const char *w1, *w2;
  } cases[] = {
      {{xf, DPC_F32, {2, {2, 5}}}, {yi, DPC_I32, {1, {2}}}, pick, "[2, 3]", "f32[2, 5]"},
      {{xf, DPC_F32, {2, {1, 6}}},
       {yi, DPC_I32, {1, {2}}},
       pick,
       "a batch of 2 samples",
       "f32[1, 6]"},
      {{xf, DPC_F32, {2, {2, 6}}}, {yi, DPC_I32, {1, {3}}}, pick, "labels", "i32[3]"},
      {{xf, DPC_F32, {2, {2, 6}}}, {yf, DPC_F32, {1, {2}}}, pick, "labels", "not f32[2]"},
      {{xf, DPC_I32, {2, {2, 6}}}, {yi, DPC_I32, {1, {2}}}, pick, "float tensor", "i32[2, 6]"},
      {{xf, DPC_F32, {2, {2, 6}}},
       {yi, DPC_I32, {1, {2}}},
       bad,
       "sample index 5 is out of range",
       "0 to 4"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    CHECK_MSG(dpc_dataset_fill(ds, cases[c].idx, 2, &cases[c].x, &cases[c].y, &d) != DPC_OK,
              "case %zu filled", c);
    CHECK_MSG(d.msg && strstr(d.msg, cases[c].w1) && strstr(d.msg, cases[c].w2), "case %zu: %s", c,
              d.msg ? d.msg : "");
  }
  for (int i = 0; i < 16; i++) CHECK(xf[i] == -1); /* nothing written on an error */
  dpc_diag_free(&d);
  dpc_dataset_close(ds);
  rm_tree(dir);
  free(dir);
}

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The real data, where the Debian package is installed; otherwise its absence must be
 * explained with the way to install it. */
static void fashion_mnist(void) {
  struct stat sb;
  if (stat(DPC_FASHION_MNIST_DIR, &sb) != 0) {
    printf("    skipped: %s is absent (dataset-fashion-mnist not installed)\n",
           DPC_FASHION_MNIST_DIR);
    expect_open_error("package", "fashion-mnist", DPC_SPLIT_TRAIN,
                      "apt-get install dataset-fashion-mnist", DPC_FASHION_MNIST_DIR,
                      "scripts/setup");
    return;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  dpc_dataset *ds = open_ok("fashion-mnist", DPC_SPLIT_TRAIN);
  double ms = ms_since(&t0);
  if (!ds) return;
  printf("    opened %s in %.0f ms\n", dpc_dataset_name(ds), ms);
  const dpc_shape *s = dpc_dataset_sample_shape(ds);
  CHECK(dpc_dataset_size(ds) == 60000 && s->rank == 2 && s->d[0] == 28 && s->d[1] == 28);
  CHECK(dpc_dataset_classes(ds) == 10);
  dpc_diag d;
  dpc_diag_init(&d);
  const uint64_t first[2] = {0, 59999};
  float *xf = malloc(2 * 784 * sizeof *xf);
  int64_t yl[2];
  dpc_tensor x = {xf, DPC_F32, {2, {2, 784}}}, y = {yl, DPC_I64, {1, {2}}};
  CHECK(dpc_dataset_fill(ds, first, 2, &x, &y, &d) == DPC_OK);
  CHECK(yl[0] == 9); /* the first training image is an ankle boot */
  float lo = 1, hi = 0;
  for (int i = 0; i < 2 * 784; i++) lo = fminf(lo, xf[i]), hi = fmaxf(hi, xf[i]);
  CHECK(lo == 0 && hi <= 1 && hi > 0.5f);
  free(xf);
  dpc_diag_free(&d);
  dpc_dataset_close(ds);
  ds = open_ok("fashion-mnist", DPC_SPLIT_TEST);
  CHECK(ds && dpc_dataset_size(ds) == 10000 && dpc_dataset_classes(ds) == 10);
  CHECK(ds && strstr(dpc_dataset_name(ds), "test"));
  dpc_dataset_close(ds);
}

const unit_test unit_tests[] = {
    {"idx_folder", idx_folder},
    {"npy_pairs", npy_pairs},
    {"order_and_batches", order_and_batches},
    {"partial_last_batch", partial_last_batch},
    {"idx_errors", idx_errors},
    {"npy_errors", npy_errors},
    {"fill_errors", fill_errors},
    {"fashion_mnist", fashion_mnist},
    {NULL, NULL},
};
