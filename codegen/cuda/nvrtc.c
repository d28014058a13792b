/*
 * nvrtc.c — CUDA C to PTX and CUBIN with NVRTC, offline (no GPU or driver needed). The only
 * file of dpc that includes nvrtc.h; built only when CMake finds the CUDA toolkit
 * (DPC_HAVE_NVRTC), otherwise dpc_cuda_compile reports that this build has none.
 */
#include "codegen/cuda/cuda.h"

#include <stdlib.h>
#include <string.h>

#ifdef DPC_HAVE_NVRTC
#include <nvrtc.h>
#endif

void dpc_cuda_binary_free(dpc_cuda_binary *b) {
  if (!b) return;
  free(b->ptx);
  free(b->cubin);
  memset(b, 0, sizeof *b);
}

bool dpc_cuda_have_nvrtc(void) {
#ifdef DPC_HAVE_NVRTC
  return true;
#else
  return false;
#endif
}

dpc_status dpc_cuda_compile(const char *source, const char *what, const char *arch,
                            dpc_cuda_binary *out, dpc_diag *d) {
  memset(out, 0, sizeof *out);
#ifndef DPC_HAVE_NVRTC
  (void)source, (void)arch;
  return dpc_diag_fail(d, DPC_ERR_UNSUPPORTED,
                       "cannot compile CUDA kernel %s: this dpc was built without the CUDA "
                       "toolkit (NVRTC)",
                       what);
#else
  if (strncmp(arch, "sm_", 3) || strlen(arch) > 8)
    return dpc_diag_fail(d, DPC_ERR_INVALID,
                         "CUDA architecture '%s' is not a real one such as sm_80 or sm_90", arch);
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, what, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "NVRTC cannot take kernel %s: %s", what,
                         nvrtcGetErrorString(r));
  char opt_arch[32];
  strcpy(opt_arch, "-arch=");
  strcat(opt_arch, arch);
  /* NVRTC's short option names; IEEE division and square root are its defaults */
  const char *opts[] = {opt_arch, "-std=c++17", "-prec-div=true", "-prec-sqrt=true"};
  r = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    char *log = malloc(n + 1);
    if (log) {
      log[0] = 0;
      nvrtcGetProgramLog(prog, log);
      log[n] = 0;
    }
    dpc_status st = dpc_diag_fail(d, DPC_ERR_INTERNAL, "NVRTC failed on kernel %s for %s: %s\n%s",
                                  what, arch, nvrtcGetErrorString(r), log ? log : "");
    free(log);
    nvrtcDestroyProgram(&prog);
    return st;
  }
  size_t ptx_n = 0, cubin_n = 0;
  nvrtcGetPTXSize(prog, &ptx_n);
  nvrtcGetCUBINSize(prog, &cubin_n);
  /* the PTX size counts a trailing NUL, which ptxas refuses inside the text */
  out->ptx = malloc(ptx_n ? ptx_n : 1);
  out->cubin = malloc(cubin_n ? cubin_n : 1);
  if (!out->ptx || !out->cubin) {
    nvrtcDestroyProgram(&prog);
    dpc_cuda_binary_free(out);
    return dpc_diag_fail(d, DPC_ERR_NOMEM, "out of memory for kernel %s", what);
  }
  nvrtcGetPTX(prog, out->ptx);
  out->ptx_size = ptx_n ? ptx_n - 1 : 0;
  if (cubin_n) nvrtcGetCUBIN(prog, out->cubin);
  out->cubin_size = cubin_n;
  nvrtcDestroyProgram(&prog);
  if (cubin_n == 0) {
    dpc_cuda_binary_free(out);
    return dpc_diag_fail(d, DPC_ERR_INTERNAL, "NVRTC gave no CUBIN for kernel %s (%s)", what, arch);
  }
  return DPC_OK;
#endif
}
