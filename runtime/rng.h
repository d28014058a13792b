/*
 * rng.h — counter-based random numbers: value i of a stream is a pure function of (seed, i).
 *
 * Nothing is sequential, so any backend, thread or device computes the same numbers for the
 * same elements, and a tensor can be filled in any order or in parallel. The functions are
 * defined here so that tests and the Python scripts beside them (tests/ops/gen_cases.py) can
 * reproduce them exactly.
 */
#ifndef DPC_RUNTIME_RNG_H
#define DPC_RUNTIME_RNG_H

#include <math.h>
#include <stdint.h>

/* SplitMix64's finaliser: a strong 64-bit mix. */
static inline uint64_t dpc_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Element i of stream `seed`, as 64 random bits. */
static inline uint64_t dpc_rng_bits(uint64_t seed, uint64_t i) {
  return dpc_mix64(dpc_mix64(seed) ^ i);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double dpc_rng_uniform(uint64_t seed, uint64_t i) {
  return (double)(dpc_rng_bits(seed, i) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal for element i, by Box-Muller on the uniforms 2i and 2i+1. */
static inline double dpc_rng_normal(uint64_t seed, uint64_t i) {
  double u1 = 1.0 - dpc_rng_uniform(seed, 2 * i); /* in (0, 1]: log is finite */
  double u2 = dpc_rng_uniform(seed, 2 * i + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The stream a dropout node uses at a given step. */
static inline uint64_t dpc_rng_dropout_seed(uint64_t seed, uint64_t step) {
  return dpc_mix64(seed ^ dpc_mix64(step + 0x5eedull));
}

#endif
