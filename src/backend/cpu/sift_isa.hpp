// SIFT_CLONES: the CPU SIFT's hot loops are compiled for AVX2 as well as the baseline and picked at run time
// (GCC function multiversioning). With -ffp-contract=off no FMA is formed, so both clones give identical bits.
// Not under ThreadSanitizer: the ifunc resolver of target_clones is instrumented and runs during relocation,
// before the TSan runtime is up (every program crashed at start in the tsan build).
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_THREAD__)
#define SIFT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SIFT_CLONES
#endif
