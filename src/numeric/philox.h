/* philox.h — Philox4x32-10 counter-based random numbers (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011), in the common subset of C++, CUDA and OpenCL C.
 *
 * A counter-based generator has no state: output = bijection_key(counter). RANSAC draws sample k of
 * iteration i as philox4x32_10(counter = (i_lo, i_hi, k, 0), key = (seed_lo, seed_hi)) word 0, so
 * any backend, any thread and any order of evaluation produce the same samples.
 *
 * One round: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2 (32 x 32 -> 64-bit products),
 *            c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); then the key is bumped by (W0, W1).
 * Ten rounds. Constants M0 = 0xD2511F53, M1 = 0xCD9E8D57, W0 = 0x9E3779B9, W1 = 0xBB67AE85.
 * Known-answer vectors (the authors' Random123 kat_vectors) are checked in tests/geometry_test.cpp. */
#ifndef SPECTRASIFT_NUMERIC_PHILOX_H
#define SPECTRASIFT_NUMERIC_PHILOX_H

#include "dialect.h"

#if defined(__OPENCL_VERSION__)
typedef uint ss_u32;
typedef ulong ss_u64;
#else
typedef uint32_t ss_u32;
typedef uint64_t ss_u64;
#endif

/* Four 32-bit words: a counter or an output block. */
typedef struct {
  ss_u32 v[4];
} ss_philox4x32;

SPECTRASIFT_FN ss_philox4x32 ss_philox4x32_10(ss_philox4x32 c, ss_u32 k0, ss_u32 k1) {
  for (int r = 0; r < 10; ++r) {
    const ss_u64 p0 = (ss_u64)0xD2511F53u * (ss_u64)c.v[0];
    const ss_u64 p1 = (ss_u64)0xCD9E8D57u * (ss_u64)c.v[2];
    ss_philox4x32 n;
    n.v[0] = (ss_u32)(p1 >> 32) ^ c.v[1] ^ k0;
    n.v[1] = (ss_u32)p1;
    n.v[2] = (ss_u32)(p0 >> 32) ^ c.v[3] ^ k1;
    n.v[3] = (ss_u32)p0;
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

/* Draw `k` of RANSAC iteration `iteration` for `seed`: word 0 of the Philox block. */
SPECTRASIFT_FN ss_u32 ss_ransac_draw(ss_u64 seed, ss_u64 iteration, ss_u32 k) {
  ss_philox4x32 c;
  c.v[0] = (ss_u32)iteration;
  c.v[1] = (ss_u32)(iteration >> 32);
  c.v[2] = k;
  c.v[3] = 0u;
  return ss_philox4x32_10(c, (ss_u32)seed, (ss_u32)(seed >> 32)).v[0];
}

/* Maps a uniform 32-bit word to an index in [0, n) by multiply-shift (bias < n / 2^32). */
SPECTRASIFT_FN ss_u32 ss_uniform_index(ss_u32 word, ss_u32 n) { return (ss_u32)(((ss_u64)word * (ss_u64)n) >> 32); }

#endif /* SPECTRASIFT_NUMERIC_PHILOX_H */
