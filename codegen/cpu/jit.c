/*
 * jit.c — compiling a plan's kernels for this process: in parallel, and through a cache of
 * object files on disk, so a model run again starts without compiling anything.
 *
 * Each kernel is a module of its own: its IR text is generated (lower_*.c), its object code
 * looked up on disk by a key of the text and the target (triple, CPU, features, LLVM and dpc
 * versions), and otherwise compiled by one of the worker threads, each with its own LLVM context
 * and target machine (LLVM is thread-safe only across contexts). The objects go into the ORC
 * LLJIT, which links them; functions are then looked up by name. Within a process the backend
 * remembers every kernel by the hash of its text, so plans that share kernels (a batch size's
 * tail, the evaluation plan) compile them once.
 *
 * The disk cache lives in $DPC_CACHE_DIR, else $XDG_CACHE_HOME/dpc, else ~/.cache/dpc
 * (DPC_CACHE_DIR=off disables it). Entries are written atomically (a temporary file, then
 * rename) and carry their key and length, so one cut short or misplaced is compiled again and
 * rewritten rather than linked.
 */
#include "codegen/cache.h"
#include "codegen/cpu/backend.h"

#include <llvm-c/Error.h>
#include <llvm/Config/llvm-config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the disk cache ---------------------------------------------------------------------- */

/* The cache folder, created if need be; "" when there is none. */
static void cache_dir(const dpc_cpu_backend *b, char *out, size_t n) {
  out[0] = 0;
  char base[3072];
  if (!dpc_cache_base_dir(b->o.cache_dir, base, sizeof base)) return;
  snprintf(out, n, "%s/kernels-llvm%s", base, LLVM_VERSION_STRING);
  if (mkdir(out, 0755) && errno != EEXIST) out[0] = 0;
}

/* Two independent 64-bit FNV-1a hashes of the text and the target: a 128-bit key. */
static void cache_key(const dpc_cpu_backend *b, const char *text, char *out, size_t n) {
  uint64_t h1 = 1469598103934665603ull, h2 = 0x84222325cbf29ce4ull;
  const char *parts[] = {text, b->triple, b->cpu, b->features, DPC_VERSION_STRING};
  for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
    for (const char *s = parts[k]; *s; s++) {
      h1 = (h1 ^ (unsigned char)*s) * 1099511628211ull;
      h2 = (h2 ^ (unsigned char)*s) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
    h1 = (h1 ^ 0xff) * 1099511628211ull;
  }
  snprintf(out, n, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

/* An entry is the object file followed by a trailer: a tag, the key and the object's length,
 * so a file cut short or left by another key is never linked. */
#define TRAILER_TAG "dpc-kernel-1"
typedef struct trailer {
  char tag[16];
  char key[40];
  uint64_t len;
} trailer;

static LLVMMemoryBufferRef cache_read(const char *path, const char *key) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  LLVMMemoryBufferRef mb = NULL;
  long len = !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
  char *data = len > (long)sizeof(trailer) ? malloc((size_t)len) : NULL;
  rewind(f);
  if (data && fread(data, 1, (size_t)len, f) == (size_t)len) {
    trailer t;
    uint64_t obj = (uint64_t)len - sizeof t;
    memcpy(&t, data + obj, sizeof t);
    if (!memcmp(t.tag, TRAILER_TAG, sizeof TRAILER_TAG) && !strncmp(t.key, key, sizeof t.key) &&
        t.len == obj && !memcmp(data, "\177ELF", 4))
      mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(data, (size_t)obj, path);
  }
  free(data);
  fclose(f);
  return mb;
}

/* Best effort: a cache that cannot be written costs a compile next time, nothing else. */
static void cache_write(const char *path, const char *key, LLVMMemoryBufferRef mb) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  trailer t;
  memset(&t, 0, sizeof t);
  memcpy(t.tag, TRAILER_TAG, sizeof TRAILER_TAG);
  snprintf(t.key, sizeof t.key, "%s", key);
  t.len = LLVMGetBufferSize(mb);
  bool ok = fwrite(LLVMGetBufferStart(mb), 1, t.len, f) == t.len;
  ok &= fwrite(&t, sizeof t, 1, f) == 1;
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, path)) unlink(tmp);
}

/* ---- compiling kernels in parallel -------------------------------------------------------- */

typedef struct kjob {
  char *text;              /* the module: preamble and one kernel */
  char key[40];            /* in the disk cache */
  LLVMMemoryBufferRef obj; /* object code, from the cache or compiled */
  bool from_disk;
} kjob;

typedef struct workers {
  dpc_cpu_backend *b;
  kjob *jobs;
  uint32_t n;
  atomic_uint next;
  atomic_bool failed;
  pthread_mutex_t mu;
  dpc_diag d; /* the first failure */
} workers;

static dpc_status compile_one(dpc_cpu_backend *b, LLVMTargetMachineRef tm, kjob *j, dpc_diag *d) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = NULL;
  dpc_status st = cg_parse_optimise(b, tm, ctx, j->text, &m, d);
  if (!st) {
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &err, &j->obj)) {
      st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "emitting a kernel's object code: %s",
                         err ? err : "?");
      LLVMDisposeMessage(err);
    }
  }
  if (m) LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return st;
}

static void *worker(void *arg) {
  workers *w = arg;
  LLVMTargetMachineRef tm = cg_target_machine(w->b);
  dpc_diag d;
  dpc_diag_init(&d);
  for (;;) {
    unsigned i = atomic_fetch_add(&w->next, 1);
    if (i >= w->n || atomic_load(&w->failed)) break;
    if (compile_one(w->b, tm, &w->jobs[i], &d)) {
      pthread_mutex_lock(&w->mu);
      if (!atomic_exchange(&w->failed, true)) dpc_diag_fail(&w->d, d.status, "%s", d.msg);
      pthread_mutex_unlock(&w->mu);
      break;
    }
  }
  dpc_diag_free(&d);
  LLVMDisposeTargetMachine(tm);
  return NULL;
}

/* Compile the jobs without an object on as many threads as the options say. */
static dpc_status compile_jobs(dpc_cpu_backend *b, kjob *jobs, uint32_t n, dpc_diag *d) {
  workers w = {.b = b, .jobs = jobs, .n = n};
  atomic_init(&w.next, 0);
  atomic_init(&w.failed, false);
  pthread_mutex_init(&w.mu, NULL);
  dpc_diag_init(&w.d);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t want = b->o.jobs ? b->o.jobs : (uint32_t)(cores > 0 ? cores : 1);
  /* dumps print in order: one thread */
  if (b->o.dump) want = 1;
  if (want > n) want = n;
  if (want > 16) want = 16;
  pthread_t th[16];
  uint32_t started = 0;
  for (uint32_t i = 1; i < want; i++)
    if (!pthread_create(&th[started], NULL, worker, &w)) started++;
  worker(&w); /* this thread works too */
  for (uint32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  dpc_status st = DPC_OK;
  if (atomic_load(&w.failed)) st = dpc_diag_fail(d, w.d.status, "%s", w.d.msg);
  dpc_diag_free(&w.d);
  pthread_mutex_destroy(&w.mu);
  return st;
}

/* ---- the plan ------------------------------------------------------------------------------ */

static dpc_native_fn known(const dpc_cpu_backend *b, uint64_t h) {
  for (uint32_t i = 0; i < b->n_cache; i++)
    if (b->cache[i].hash == h) return b->cache[i].fn;
  return NULL;
}

/* Put the objects into the JIT and look their kernels up. */
static dpc_status link_jobs(dpc_cpu_backend *b, kjob *jobs, uint64_t *hashes, uint32_t n,
                            dpc_diag *d) {
  LLVMOrcJITDylibRef lib = LLVMOrcLLJITGetMainJITDylib(b->jit);
  for (uint32_t i = 0; i < n; i++) {
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFile(b->jit, lib, jobs[i].obj);
    jobs[i].obj = NULL; /* the JIT owns it now, even when adding failed */
    if (e) return cg_llvm_error(d, "adding a kernel to the JIT", e);
  }
  for (uint32_t i = 0; i < n; i++) {
    char name[40];
    cg_symbol(hashes[i], name, sizeof name);
    LLVMOrcExecutorAddress addr;
    LLVMErrorRef e = LLVMOrcLLJITLookup(b->jit, &addr, name);
    if (e) return cg_llvm_error(d, "looking a kernel up", e);
    dpc_native_fn fn;
    uintptr_t a = (uintptr_t)addr;
    memcpy(&fn, &a, sizeof fn);
    if (DPC_VEC_RESERVE(b->cache, b->cap_cache, b->n_cache + 1))
      return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
    b->cache[b->n_cache++] = (cache_entry){hashes[i], fn};
  }
  return DPC_OK;
}

/* What the walk over a plan's kernels gathers: a job for each kernel neither the backend nor
 * an earlier step of the plan has. */
typedef struct jit_walk {
  dpc_cpu_backend *b;
  dpc_native_kernel *kernels;
  kjob *jobs;
  uint64_t *hashes, *node_hash;
  uint32_t n;
  const char *dir;
} jit_walk;

static dpc_status jit_visit(void *user, const cg_plan_kernel *pk, dpc_diag *d) {
  jit_walk *w = user;
  dpc_cpu_backend *b = w->b;
  w->node_hash[pk->node] = pk->hash;
  w->kernels[pk->node].total = pk->total;
  bool seen = known(b, pk->hash) != NULL;
  for (uint32_t k = 0; k < w->n && !seen; k++) seen = w->hashes[k] == pk->hash;
  if (seen) {
    b->cached++;
    return DPC_OK;
  }
  /* a module of its own: the preamble, then the kernel under its final name */
  dpc_buf mod = {0};
  cg_module_preamble(b, &mod);
  dpc_buf_putn(&mod, pk->head, pk->head_len);
  char sym[40];
  cg_symbol(pk->hash, sym, sizeof sym);
  dpc_buf_printf(&mod, "@%s(", sym);
  dpc_buf_puts(&mod, pk->body);
  if (mod.oom) {
    dpc_buf_free(&mod);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory generating kernels");
  }
  kjob *k = &w->jobs[w->n];
  k->text = mod.data;
  w->hashes[w->n++] = pk->hash;
  if (b->o.dump) b->o.dump(b->o.user, "llvm", k->text);
  if (w->dir[0]) {
    cache_key(b, k->text, k->key, sizeof k->key);
    char path[3300];
    snprintf(path, sizeof path, "%s/%s.o", w->dir, k->key);
    if ((k->obj = cache_read(path, k->key))) k->from_disk = true;
  }
  return DPC_OK;
}

dpc_status dpc_cpu_compile_plan(dpc_cpu_backend *b, const dpc_plan *plan,
                                dpc_native_kernel *kernels, dpc_diag *d) {
  double t0 = dpc_now_s();
  const dpc_graph *g = plan->g;
  size_t nn = g->n_nodes ? g->n_nodes : 1;
  kjob *jobs = calloc(nn, sizeof *jobs);
  uint64_t *hashes = calloc(nn, sizeof *hashes), *node_hash = calloc(nn, sizeof *node_hash);
  char dir[3200];
  cache_dir(b, dir, sizeof dir);
  jit_walk w = {b, kernels, jobs, hashes, node_hash, 0, dir};
  dpc_status st =
      jobs && hashes && node_hash ? DPC_OK : dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) st = cg_walk_plan(b, plan, jit_visit, &w, d);
  uint32_t n = w.n;
  /* compile what the disk did not have, in parallel: jobs with an object are skipped */
  uint32_t todo = 0;
  for (uint32_t i = 0; i < n && !st; i++) {
    if (jobs[i].obj) continue;
    kjob tmp = jobs[todo];
    jobs[todo] = jobs[i];
    jobs[i] = tmp;
    uint64_t th = hashes[todo];
    hashes[todo] = hashes[i];
    hashes[i] = th;
    todo++;
  }
  if (!st && todo) st = compile_jobs(b, jobs, todo, d);
  for (uint32_t i = 0; !st && i < n; i++) {
    if (jobs[i].from_disk) {
      b->from_disk++;
    } else {
      b->compiled++;
      if (dir[0]) {
        char path[3300];
        snprintf(path, sizeof path, "%s/%s.o", dir, jobs[i].key);
        cache_write(path, jobs[i].key, jobs[i].obj);
      }
    }
  }
  if (!st) st = link_jobs(b, jobs, hashes, n, d);
  for (uint32_t i = 0; !st && i < g->n_nodes; i++) {
    if (!node_hash[i]) continue;
    kernels[i].fn = known(b, node_hash[i]);
    kernels[i].kind = DPC_KERNEL_HOST;
  }
  for (uint32_t i = 0; jobs && i < n; i++) {
    free(jobs[i].text);
    if (jobs[i].obj) LLVMDisposeMemoryBuffer(jobs[i].obj);
  }
  free(jobs);
  free(hashes);
  free(node_hash);
  b->seconds += dpc_now_s() - t0;
  return st;
}
