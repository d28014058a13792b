/*
 * gemm.c — dpc's compiled matmul against OpenBLAS sgemm, on one core or several.
 *
 *   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 build/bench/bench_gemm
 *   bench_gemm --threads 2    dpc on a pool of 2 threads, then OpenBLAS on 2 threads
 *   bench_gemm --fused        the MLP's forward layers, relu(x w + b): dpc's one fused kernel
 *                             against sgemm followed by a bias-and-ReLU pass
 *   bench_gemm --check        correctness sweep only (odd shapes, transposes, split ranges)
 *   bench_gemm M N K [ta tb]  one shape
 *
 * Each shape goes through dpc's own pipeline (a one-node .graph, passes, bind, plan, compile
 * with dpc_cpu_compile_plan); the compiled kernel is then called over [0, total) on this thread,
 * or on dpc's thread pool (runtime/pool.c, bound to cores) with --threads. Both read the same
 * inputs; the best of several repetitions is reported, after one warm-up call. The product never
 * links OpenBLAS: only this program does. Unset OPENBLAS_CORETYPE (these machines pin it to
 * Haswell, OpenBLAS's AVX2 kernel) to compare against its AVX-512 kernel; the kernel that ran
 * is printed.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <sched.h>

#include "codegen/cpu/cpu.h"
#include "frontend/frontend.h"
#include "partitioner/partitioner.h"
#include "passes/pass.h"
#include "runtime/pool.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *openblas_get_corename(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

typedef struct shape {
  int64_t m, n, k;
  int ta, tb;
  const char *what;
} shape;

/* Set from the command line. */
typedef struct opts {
  dpc_pool *pool; /* NULL: call the kernel on this thread */
  bool fused;     /* relu(matmul + bias), one fused kernel, against sgemm + a bias/ReLU pass */
} opts;

/* The square sizes, then the MLP's (784-512-512-10, batch 128) forward products and the two
 * backward ones of each layer: dX = dY W^T, dW = X^T dY. */
static const shape shapes[] = {
    {128, 128, 128, 0, 0, "square"},      {256, 256, 256, 0, 0, "square"},
    {512, 512, 512, 0, 0, "square"},      {1024, 1024, 1024, 0, 0, "square"},
    {2048, 2048, 2048, 0, 0, "square"},   {128, 512, 784, 0, 0, "mlp fc1 fwd"},
    {128, 512, 512, 0, 0, "mlp fc2 fwd"}, {128, 10, 512, 0, 0, "mlp fc3 fwd"},
    {128, 512, 512, 0, 1, "mlp fc2 dX"},  {128, 512, 10, 0, 1, "mlp fc3 dX"},
    {784, 512, 128, 1, 0, "mlp fc1 dW"},  {512, 512, 128, 1, 0, "mlp fc2 dW"},
    {512, 10, 128, 1, 0, "mlp fc3 dW"},
};

static void die(dpc_diag *d, const char *what) {
  char *m = dpc_diag_render(d);
  fprintf(stderr, "bench_gemm: %s: %s", what, m);
  free(m);
  exit(1);
}

/* A compiled one-matmul plan. */
typedef struct compiled {
  dpc_cpu_backend *cpu;
  dpc_plan *plan;
  dpc_native_kernel kern;
} compiled;

/* BENCH_DUMP=FILE writes the optimised IR of the kernels there (to read the micro-kernel's
 * code: llc-19 -O3 -mattr=+avx512f,+avx512vl,+fma FILE). */
static void dump(void *user, const char *what, const char *text) {
  (void)user;
  const char *path = getenv("BENCH_DUMP");
  FILE *fp = path && !strcmp(what, "llvm-optimised") ? fopen(path, "w") : NULL;
  if (fp) {
    fputs(text, fp);
    fclose(fp);
  }
}

static void compile(const shape *s, bool fused, compiled *out) {
  char text[512], bias[64] = "";
  /* stored shapes: a is [m, k] or [k, m] when transposed, b [k, n] or [n, k]; fused, the group's
   * arguments are a, b, then the bias */
  if (fused) snprintf(bias, sizeof bias, "input bias: f32[%lld]\n", (long long)s->n);
  snprintf(text, sizeof text,
           "model mm\ninput a: f32[%lld, %lld]\ninput b: f32[%lld, %lld]\n%s"
           "y = %smatmul(a, b, transpose_a=%d, transpose_b=%d)%s\noutput y\n",
           (long long)(s->ta ? s->k : s->m), (long long)(s->ta ? s->m : s->k),
           (long long)(s->tb ? s->n : s->k), (long long)(s->tb ? s->k : s->n), bias,
           fused ? "relu(" : "", s->ta, s->tb, fused ? " + bias)" : "");
  dpc_diag d;
  dpc_diag_init(&d);
  dpc_graph *g;
  if (dpc_parse_graph("mm.graph", text, strlen(text), &g, &d)) die(&d, "parse");
  dpc_pass_opts po = {.fuse = fused ? dpc_cpu_fusion() : 0};
  int64_t none = 0;
  if (dpc_passes_run(g, &po, &d) || dpc_graph_bind(g, &none, &d)) die(&d, "passes");
  if (dpc_plan_single(g, "cpu:0", false, &out->plan, &d)) die(&d, "plan");
  dpc_graph_free(g);
  const dpc_graph *pg = out->plan->g;
  dpc_native_kernel *k = calloc(pg->n_nodes, sizeof *k);
  if (!k) exit(1);
  if (dpc_cpu_backend_new(&(dpc_cpu_options){.dump = dump}, &out->cpu, &d)) die(&d, "backend");
  if (dpc_cpu_compile_plan(out->cpu, out->plan, k, &d)) die(&d, "compile");
  out->kern.fn = NULL;
  /* the one compiled kernel: the matmul, or the root of its fusion group */
  for (uint32_t i = 0; i < pg->n_nodes; i++)
    if (k[i].fn && (fused || pg->nodes[i].op == DPC_OP_MATMUL)) out->kern = k[i];
  free(k);
  if (!out->kern.fn) {
    fprintf(stderr, "bench_gemm: the matmul was not compiled\n");
    exit(1);
  }
  dpc_diag_free(&d);
}

static void release(compiled *c) {
  dpc_cpu_backend_free(c->cpu);
  dpc_plan_free(c->plan);
}

static float *random_matrix(int64_t n, unsigned *seed) {
  float *p = aligned_alloc(64, (size_t)(n + 16) * sizeof *p);
  if (!p) exit(1);
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

static void run_dpc(const opts *o, const compiled *c, float *a, float *b, float *bias, float *y,
                    int pieces) {
  void *args[4] = {a, b, o->fused ? bias : y, y};
  int64_t t = c->kern.total;
  if (o->pool && pieces == 1) {
    dpc_pool_run(o->pool, c->kern.fn, args, t, 0, 0);
    return;
  }
  /* in `pieces` ranges, last first: iterations must not depend on each other's order */
  for (int p = pieces; p-- > 0;) c->kern.fn(args, t * p / pieces, t * (p + 1) / pieces, 0, 0);
}

static void run_blas(const opts *o, const shape *s, const float *a, const float *b,
                     const float *bias, float *y) {
  cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
              (int)s->m, (int)s->n, (int)s->k, 1.0f, a, s->ta ? (int)s->m : (int)s->k, b,
              s->tb ? (int)s->k : (int)s->n, 0.0f, y, (int)s->n);
  if (!o->fused) return;
  /* what a library user writes next: one more pass over the output (the compiler vectorises it) */
  for (int64_t i = 0; i < s->m; i++) {
    float *row = y + i * s->n;
    for (int64_t j = 0; j < s->n; j++) {
      float v = row[j] + bias[j];
      row[j] = v > 0 ? v : 0;
    }
  }
}

/* max |x - y| / max |y|: the normwise difference. Elementwise relative differences say little
 * here: an f32 sum of k products that cancels to near zero differs in its last bits between any
 * two summation orders. */
static double max_rel(const float *x, const float *y, int64_t n) {
  double worst = 0, big = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)x[i] - y[i]);
    if (!(e <= worst)) worst = e; /* NaN sticks */
    if (fabs((double)y[i]) > big) big = fabs((double)y[i]);
  }
  return worst / (big > 0 ? big : 1);
}

/* Best times of dpc and OpenBLAS, in alternating blocks so that both see the same load: these
 * machines are shared, and a burst of other work would otherwise land on one side only. Blocks,
 * not single calls: with several threads, a pool that just finished keeps spinning for a while
 * (OpenBLAS's and dpc's alike) and would take the cores from the other side's first call. */
static void best_of(const opts *o, int reps, const compiled *c, const shape *s, float *a, float *b,
                    float *bias, float *y1, float *y2, bool do_dpc, bool do_blas, double *td,
                    double *tb) {
  *td = *tb = 1e30;
  int per = reps < 8 ? 2 : reps / 4;
  for (int r = 0; r < reps; r += per) {
    for (int i = 0; do_dpc && i < per; i++) {
      double t0 = dpc_now_s();
      run_dpc(o, c, a, b, bias, y1, 1);
      double t = dpc_now_s() - t0;
      if (t < *td) *td = t;
    }
    for (int i = 0; do_blas && i < per; i++) {
      double t0 = dpc_now_s();
      run_blas(o, s, a, b, bias, y2);
      double t = dpc_now_s() - t0;
      if (t < *tb) *tb = t;
    }
  }
}

/* What bench measured for one shape. */
typedef struct result {
  double td, tb; /* best seconds of dpc and of OpenBLAS (0: not timed) */
  double err;
  int64_t pieces;
  int bad; /* the results differ */
} result;

enum { BOTH, DPC_ONLY, BLAS_ONLY };

/* Check one shape against OpenBLAS and time it: both sides in alternating blocks, or one side
 * alone (with several threads each side runs in its own phase: see best_of). */
static result bench(const opts *o, const shape *s, bool timing, int side) {
  unsigned seed = 12345;
  int64_t na = s->m * s->k, nb = s->k * s->n, ny = s->m * s->n;
  float *a = random_matrix(na, &seed), *b = random_matrix(nb, &seed);
  float *y1 = random_matrix(ny, &seed), *y2 = random_matrix(ny, &seed);
  float *bias = random_matrix(s->n, &seed);
  compiled c;
  compile(s, o->fused, &c);
  run_dpc(o, &c, a, b, bias, y1, 3); /* split in three ranges, also the warm-up */
  run_blas(o, s, a, b, bias, y2);
  result r = {0};
  r.err = max_rel(y1, y2, ny);
  r.pieces = c.kern.total;
  /* f32 rounding grows like sqrt(k): 1e-5 up to k = 1024 */
  r.bad = !(r.err < 1e-5 * (s->k > 1024 ? sqrt((double)s->k / 1024) : 1));
  if (timing) {
    double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    int reps = flop > 4e9 ? 5 : flop > 1e8 ? 20 : 100;
    best_of(o, reps, &c, s, a, b, bias, y1, y2, side != BLAS_ONLY, side != DPC_ONLY, &r.td, &r.tb);
  } else if (r.bad) {
    printf("MISMATCH %lldx%lldx%lld ta=%d tb=%d: max rel %.2e\n", (long long)s->m, (long long)s->n,
           (long long)s->k, s->ta, s->tb, r.err);
  }
  fflush(stdout);
  release(&c);
  free(a);
  free(b);
  free(y1);
  free(y2);
  free(bias);
  return r;
}

static void print_row(const shape *s, const result *r) {
  double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
  printf("%-12s %5lld %5lld %5lld  %s%s  %8.1f  %8.1f  %5.2f  %6lld  %.1e%s\n", s->what,
         (long long)s->m, (long long)s->n, (long long)s->k, s->ta ? "T" : "N", s->tb ? "T" : "N",
         flop / r->td * 1e-9, flop / r->tb * 1e-9, r->tb / r->td, (long long)r->pieces, r->err,
         r->bad ? "  MISMATCH" : "");
  fflush(stdout);
}

/* Time shapes: alternating on one thread; with several, all of dpc first (OpenBLAS checked on
 * one thread, so none of its threads is awake), then all of OpenBLAS on its threads. */
static int bench_all(const opts *o, const shape *list, size_t n, int threads) {
  int bad = 0;
  if (threads <= 1) {
    for (size_t i = 0; i < n; i++) {
      result r = bench(o, &list[i], true, BOTH);
      print_row(&list[i], &r);
      bad |= r.bad;
    }
    return bad;
  }
  result *rs = calloc(n, sizeof *rs);
  if (!rs) exit(1);
  openblas_set_num_threads(1);
  for (size_t i = 0; i < n; i++) rs[i] = bench(o, &list[i], true, DPC_ONLY);
  /* dpc's pool bound this thread to one core, and OpenBLAS's threads would inherit that */
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c = 0; c < CPU_SETSIZE; c++) CPU_SET(c, &all);
  sched_setaffinity(0, sizeof all, &all);
  openblas_set_num_threads(threads);
  for (size_t i = 0; i < n; i++) {
    result r = bench(o, &list[i], true, BLAS_ONLY);
    rs[i].tb = r.tb;
    print_row(&list[i], &rs[i]);
    bad |= rs[i].bad | r.bad;
  }
  free(rs);
  return bad;
}

/* Shapes that cross every blocking boundary: 1, micro-tile edges, several KC / MC / NC blocks. */
static int check(const opts *o) {
  static const int64_t sizes[] = {1, 2, 7, 13, 15, 16, 17, 29, 31, 33, 47, 64, 97, 130, 200, 333};
  int fails = 0, n = 0;
  unsigned seed = 7;
  for (int i = 0; i < 60; i++) {
    shape s;
    seed = seed * 1664525u + 1013904223u;
    s.m = sizes[(seed >> 4) % 16];
    seed = seed * 1664525u + 1013904223u;
    s.n = sizes[(seed >> 4) % 16];
    seed = seed * 1664525u + 1013904223u;
    s.k = sizes[(seed >> 4) % 16];
    s.ta = (seed >> 20) & 1;
    s.tb = (seed >> 21) & 1;
    s.what = "check";
    fails += bench(o, &s, false, BOTH).bad;
    n++;
  }
  static const shape big[] = {{700, 900, 1100, 0, 0, ""}, {700, 900, 1100, 1, 1, ""},
                              {1500, 40, 600, 0, 1, ""},  {33, 1500, 1300, 1, 0, ""},
                              {1, 3000, 1000, 0, 0, ""},  {3000, 1, 1000, 0, 0, ""}};
  for (size_t i = 0; i < sizeof big / sizeof *big; i++, n++)
    fails += bench(o, &big[i], false, BOTH).bad;
  printf("check: %d of %d shapes agree with OpenBLAS\n", n - fails, n);
  return fails != 0;
}

static const char usage[] =
    "Usage: bench_gemm [--threads T] [--fused] [--check] [M N K [TA TB]]\n"
    "\n"
    "Times dpc's compiled matmul against OpenBLAS's sgemm (best of several runs, alternating)\n"
    "at M=N=K 128..2048 and at the MLP's shapes, or at one shape M N K (TA, TB: 1 to\n"
    "transpose A or B). Prints GFLOP/s of each and their ratio.\n"
    "\n"
    "  --threads T  dpc's kernel on its thread pool of T threads (bound to cores), and OpenBLAS\n"
    "               on T threads too. With T > 1 all of dpc's timings come first, then all of\n"
    "               OpenBLAS's: each side's idle threads spin for a while after a call and would\n"
    "               take cores from the other (start with OPENBLAS_NUM_THREADS=1, so that\n"
    "               OpenBLAS's threads are not spinning from its start-up either)\n"
    "  --fused      the MLP's forward layers relu(x w + b): dpc's fused kernel against sgemm\n"
    "               followed by a bias-and-ReLU pass over the output\n"
    "  --check      compare with OpenBLAS on 66 odd shapes, no timing\n"
    "\n"
    "These machines set OPENBLAS_CORETYPE=Haswell (OpenBLAS's AVX2 kernel); compare with its\n"
    "best: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 bench_gemm ...\n";

int main(int argc, char **argv) {
  opts o = {0};
  bool do_check = false;
  int npos = 0;
  char *pos[5];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--check")) {
      do_check = true;
    } else if (!strcmp(argv[i], "--fused")) {
      o.fused = true;
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      int t = atoi(argv[++i]);
      dpc_diag d;
      dpc_diag_init(&d);
      if (t < 1 || dpc_pool_new((uint32_t)t, &o.pool, &d)) {
        fprintf(stderr, "bench_gemm: --threads %s: cannot start the pool\n", argv[i]);
        return 2;
      }
      dpc_diag_free(&d);
    } else if (argv[i][0] != '-' && npos < 5) {
      pos[npos++] = argv[i];
    } else {
      fprintf(stderr, "bench_gemm: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (npos && npos < 3) {
    fprintf(stderr, "bench_gemm: a shape is M N K [TA TB] (see --help)\n");
    return 2;
  }
  int bad = 0;
  if (do_check) {
    bad = check(&o);
  } else {
    /* OpenBLAS runs on as many threads as dpc (or as OPENBLAS_NUM_THREADS says, if more) */
    int threads = openblas_get_num_threads();
    if (o.pool && (int)dpc_pool_size(o.pool) > threads) threads = (int)dpc_pool_size(o.pool);
    printf("OpenBLAS %s, kernel %s, on %d thread(s); dpc on %u thread(s)%s\n", OPENBLAS_VERSION,
           openblas_get_corename(), threads, o.pool ? dpc_pool_size(o.pool) : 1,
           o.fused ? "; relu(x w + b)" : "");
    printf("%-12s %5s %5s %5s  %s  %8s  %8s  %5s  %6s  %s\n", "shape", "M", "N", "K", "op",
           "dpc GF/s", "BLAS GF/s", "dpc/B", "pieces", "max rel diff");
    if (npos) {
      shape s = {atoll(pos[0]),
                 atoll(pos[1]),
                 atoll(pos[2]),
                 npos > 3 ? atoi(pos[3]) : 0,
                 npos > 4 ? atoi(pos[4]) : 0,
                 "custom"};
      bad = bench_all(&o, &s, 1, threads);
    } else {
      /* fused: the forward layers only (the backward products have no bias) */
      shape list[sizeof shapes / sizeof *shapes];
      size_t n = 0;
      for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        if (!o.fused || strstr(shapes[i].what, "fwd")) list[n++] = shapes[i];
      bad = bench_all(&o, list, n, threads);
    }
  }
  if (o.pool) dpc_pool_free(o.pool);
  return bad;
}
