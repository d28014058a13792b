/*
 * dpc_cuda_emu.h — runs dpc's generated CUDA C on the host, so kernels are checked where no GPU
 * is at hand. The system C++ compiler builds the SAME source text NVRTC compiles, with this
 * header in front of it and dpc_cuda_emu_launch.h behind it (codegen/cuda/emu.c writes the
 * three-line wrapper).
 *
 * What it maps: a grid's blocks run one after another; the threads of a block are fibers
 * (ucontext) on the launching thread, and __syncthreads hands control back to the launcher, which
 * resumes every thread once all of them have reached it; a thread that ends while others wait at
 * a barrier fails the launch (CUDA leaves that undefined). __shared__ becomes `static`, one copy
 * that the block running at the time owns; warp shuffles go through a slot per thread between two
 * barriers (the generated kernels call them with the whole block, which is what makes a
 * block-wide barrier a correct stand-in for a warp's).
 *
 * Must not: be included by dpc's own code (only the emulated kernels' translation unit), or keep
 * state across launches beyond what a launch sets up itself.
 */
#ifndef DPC_CUDA_EMU_H
#define DPC_CUDA_EMU_H

#include <math.h>
#include <stdlib.h>
#include <ucontext.h>
#include <stdint.h>
#include <string.h>

#define __DPC_CUDA_EMU__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__      static
#define __launch_bounds__(...)

struct dpc_emu_dim3 {
  unsigned x, y, z;
};
typedef struct dpc_emu_dim3 dim3;

/* Per launching thread: launches on different threads (devices) do not meet. */
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

#define DPC_EMU_MAX_THREADS 1024
static thread_local unsigned long long dpc_emu_slot[DPC_EMU_MAX_THREADS];

/* Switching fibers: glibc's swapcontext saves and restores the signal mask with a system call at
 * every switch, which made the emulation spend half its time in the kernel. On x86-64 a switch
 * saves the callee-saved registers on the stack it leaves and takes the other's stack pointer
 * (the kernels change no floating-point control state, so there is none to keep); elsewhere the
 * ucontext calls stand in. */
#if defined(__x86_64__)
#define DPC_EMU_FAST_SWITCH 1
extern "C" __attribute__((visibility("hidden"))) void dpc_emu_switch(void **save_sp, void *to_sp);
__asm__(".pushsection .text\n"
        ".globl dpc_emu_switch\n"
        ".hidden dpc_emu_switch\n"
        ".type dpc_emu_switch, @function\n"
        "dpc_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size dpc_emu_switch, .-dpc_emu_switch\n"
        ".popsection\n");
#endif

/* The fibers of the running block and the launcher's context. */
struct dpc_emu_fiber {
#if DPC_EMU_FAST_SWITCH
  void *sp;
#else
  ucontext_t ctx;
#endif
  unsigned x, y, z;
  bool done;
};
#if DPC_EMU_FAST_SWITCH
static thread_local void *dpc_emu_main_sp;
#else
static thread_local ucontext_t dpc_emu_main;
#endif
static thread_local struct dpc_emu_fiber *dpc_emu_fibers;
static thread_local unsigned dpc_emu_cur;

/* Back to the launcher, which resumes this thread when every thread of the block is here. */
static inline void __syncthreads(void) {
#if DPC_EMU_FAST_SWITCH
  dpc_emu_switch(&dpc_emu_fibers[dpc_emu_cur].sp, dpc_emu_main_sp);
#else
  swapcontext(&dpc_emu_fibers[dpc_emu_cur].ctx, &dpc_emu_main);
#endif
}

static inline unsigned dpc_emu_tid(void) {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/* Lane `src` of this thread's warp holds the value read; every thread of the block takes part. */
template <typename T> static inline T dpc_emu_exchange(T v, unsigned src_lane) {
  unsigned tid = dpc_emu_tid(), base = tid & ~31u, n = blockDim.x * blockDim.y * blockDim.z;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof v);
  dpc_emu_slot[tid] = bits;
  __syncthreads();
  unsigned src = base + src_lane;
  if (src_lane >= 32 || src >= n) src = tid; /* CUDA: out of the warp, a thread keeps its own */
  bits = dpc_emu_slot[src];
  __syncthreads();
  T out;
  memcpy(&out, &bits, sizeof out);
  return out;
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, int delta) {
  (void)mask;
  return dpc_emu_exchange(v, (dpc_emu_tid() & 31u) + (unsigned)delta);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int m) {
  (void)mask;
  return dpc_emu_exchange(v, (dpc_emu_tid() & 31u) ^ (unsigned)m);
}
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int lane) {
  (void)mask;
  return dpc_emu_exchange(v, (unsigned)lane & 31u);
}

/* CUDA's math library functions that libm lacks. */
static inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
static inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}

#endif
