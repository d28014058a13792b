/*
 * aot.c — compiled artifacts (.dpx): every kernel of some plans as machine code, in a shared
 * library that also carries the plans as data, so the runtime library loads and runs a model
 * with no LLVM on the machine (runtime/artifact.c).
 *
 * The module holds the kernels (each once, named by the hash of its IR), and two symbols:
 * dpc_artifact_blob (the bytes below) and dpc_artifact_size. It is optimised for the backend's
 * target (--cpu/--features), written as an object file and linked into a shared library by the
 * system's C compiler driver (`cc -shared`), the one tool outside LLVM this needs.
 *
 * Blob: "DPCA", u32 version, u32 target length + target ("x86_64... +avx512f,..."), u32 count,
 * then per plan: u32 role length + role ("infer", "train", "eval"), and the plan as
 * ir/serialize.c writes it.
 *
 * File: the linked library, then the 16-byte checksum trailer of ir/seal.h over all of it, which
 * the runtime checks before dlopen maps any of it. It is written as PATH.tmp.PID (and the object
 * file PATH.tmp.PID.o), then renamed over PATH: a failed, interrupted or killed compile leaves
 * an existing PATH as it was. What a killed compile leaves goes at the next one's success.
 */
#include "codegen/cpu/backend.h"
#include "codegen/cpu/cg.h"
#include "ir/path.h"
#include "ir/seal.h"
#include "ir/serialize.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define BLOB_VERSION 1u

static bool stopped(const dpc_cpu_backend *b) {
  return b->o.stop && *b->o.stop;
}

static dpc_status interrupted(const char *path, dpc_diag *d) {
  return dpc_diag_fail(d, DPC_ERR_RUNTIME, "interrupted: '%s' was not written", path);
}

/* Run `cc -shared -o out obj -lm` and wait for it; on a stop request, stop it too. */
static dpc_status link_shared(const dpc_cpu_backend *b, const char *obj, const char *out,
                              const char *path, dpc_diag *d) {
  const char *cc = getenv("CC");
  if (!cc || !*cc) cc = "cc";
  char *argv[] = {(char *)cc, "-shared", "-o", (char *)out, (char *)obj, "-lm", NULL};
  pid_t pid;
  int err = posix_spawnp(&pid, cc, NULL, NULL, argv, environ);
  if (err)
    return dpc_diag_fail(
        d, DPC_ERR_IO,
        "cannot run '%s' to link the artifact (%s): dpc compile needs a C compiler driver "
        "(install build-essential, or set CC)",
        cc, strerror(err));
  int status;
  bool sent = false;
  /* A caught signal ends waitpid with EINTR (the handler is installed without SA_RESTART). */
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return dpc_diag_fail(d, DPC_ERR_IO, "waiting for the linker: %s", strerror(errno));
    if (stopped(b) && !sent) sent = kill(pid, SIGTERM) == 0;
  }
  if (stopped(b)) return interrupted(path, d);
  if (!WIFEXITED(status) || WEXITSTATUS(status))
    return dpc_diag_fail(d, DPC_ERR_IO, "linking '%s' failed: '%s -shared' exited with %d", path,
                         cc, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return DPC_OK;
}

/* Make a rename durable: it lives in the folder, not in the file. */
static dpc_status sync_dir(const char *path, dpc_diag *d) {
  if (dpc_path_sync_dir(path))
    return dpc_diag_fail(d, DPC_ERR_IO, "wrote '%s' but could not sync its folder: %s", path,
                         strerror(errno));
  return DPC_OK;
}

/* Best effort: remove what compiles of PATH that were killed (SIGKILL, a power cut) left. */
static void remove_leftovers(const char *path) {
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  char dir[4096];
  dpc_path_dir(path, dir, sizeof dir);
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp))) {
    pid_t pid = dpc_path_temp_pid(e->d_name, base, ".o");
    /* only a writer that is gone: kill with signal 0 asks whether the process exists */
    if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    char full[4096 + 256];
    snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
    unlink(full);
  }
  closedir(dp);
}

/* Object code, linked, sealed with its checksum and renamed into place: PATH is either the old
 * file or the whole new one, never a part (checkpoints do the same: runtime/safetensors.c). */
static dpc_status write_library(dpc_cpu_backend *b, LLVMModuleRef m, const char *path,
                                dpc_diag *d) {
  char tmp[4096 + 32], obj[4096 + 40];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
    return dpc_diag_fail(d, DPC_ERR_INVALID, "cannot write '%s': the path is too long", path);
  snprintf(obj, sizeof obj, "%s.o", tmp);
  dpc_status st = DPC_OK;
  char *err = NULL;
  if (LLVMTargetMachineEmitToFile(b->tm, m, obj, LLVMObjectFile, &err)) {
    st = dpc_diag_fail(d, DPC_ERR_IO, "writing object code to '%s': %s", obj, err ? err : "?");
    LLVMDisposeMessage(err);
  }
  if (!st && stopped(b)) st = interrupted(path, d);
  if (!st) st = link_shared(b, obj, tmp, path, d);
  unlink(obj);
  if (!st) st = dpc_seal_append(tmp, d);
  if (!st && stopped(b)) st = interrupted(path, d);
  if (!st && rename(tmp, path))
    st = dpc_diag_fail(d, DPC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  if (st) {
    unlink(tmp);
    return st;
  }
  remove_leftovers(path);
  return sync_dir(path, d);
}

/* What the walk over an artifact's plans gathers: the module with each kernel once, and the
 * symbol of every node's kernel for the plan being written. */
typedef struct aot_walk {
  dpc_buf *mod;
  dpc_plan_kernel *k;
  uint64_t *done;
  uint32_t n_done, cap_done;
  uint32_t next_md; /* the module's metadata numbers in use (cg_append_kernel_text) */
} aot_walk;

static dpc_status aot_visit(void *user, const cg_plan_kernel *pk, dpc_diag *d) {
  aot_walk *w = user;
  dpc_plan_kernel *k = &w->k[pk->node];
  cg_symbol(pk->hash, k->symbol, sizeof k->symbol);
  k->total = pk->total;
  for (uint32_t i = 0; i < w->n_done; i++)
    if (w->done[i] == pk->hash) return DPC_OK;
  dpc_buf_putn(w->mod, pk->head, pk->head_len);
  dpc_buf_printf(w->mod, "@%s(", k->symbol);
  cg_append_kernel_text(w->mod, pk->body, &w->next_md);
  if (DPC_VEC_RESERVE(w->done, w->cap_done, w->n_done + 1))
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  w->done[w->n_done++] = pk->hash;
  return DPC_OK;
}

dpc_status dpc_cpu_compile_artifact(dpc_cpu_backend *b, const dpc_aot_plan *plans, uint32_t n,
                                    const char *path, dpc_diag *d) {
  dpc_buf mod = {0}, blob = {0};
  dpc_status st = DPC_OK;
  aot_walk w = {.mod = &mod};
  cg_module_preamble(b, &mod);
  char target[1200];
  snprintf(target, sizeof target, "%s %s %s", b->triple, b->cpu, b->features);
  dpc_artifact_blob_begin(&blob, BLOB_VERSION, target, n);
  for (uint32_t p = 0; p < n && !st; p++) {
    const dpc_plan *plan = plans[p].plan;
    const dpc_graph *g = plan->g;
    w.k = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *w.k);
    if (!w.k) {
      st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
      break;
    }
    st = cg_walk_plan(b, plan, aot_visit, &w, d);
    if (!st) {
      dpc_artifact_blob_role(&blob, plans[p].role);
      st = dpc_plan_write(plan, w.k, &blob, d);
    }
    free(w.k);
  }
  free(w.done);
  if (!st && (blob.oom || mod.oom)) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  if (!st) {
    /* the plans, as constant data the runtime finds with dlsym */
    dpc_buf_printf(&mod, "@dpc_artifact_size = constant i64 %zu\n", blob.len);
    dpc_buf_printf(&mod, "@dpc_artifact_blob = constant [%zu x i8] c\"", blob.len);
    for (size_t i = 0; i < blob.len; i++)
      dpc_buf_printf(&mod, "\\%02X", (unsigned char)blob.data[i]);
    dpc_buf_puts(&mod, "\"\n");
    if (mod.oom) st = dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory");
  }
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = NULL;
  if (!st && stopped(b)) st = interrupted(path, d);
  if (!st) st = cg_parse_optimise(b, b->tm, ctx, mod.data, &m, d);
  if (!st && stopped(b)) st = interrupted(path, d);
  if (!st) st = write_library(b, m, path, d);
  if (m) LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  dpc_buf_free(&mod);
  dpc_buf_free(&blob);
  return st;
}
