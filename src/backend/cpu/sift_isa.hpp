// SIFT_CLONES: the CPU SIFT's hot loops are compiled for AVX2 as well as the baseline and picked at run time
// (GCC function multiversioning). With -ffp-contract=off no FMA is formed, so both clones give identical bits.
// Not under ThreadSanitizer: the ifunc resolver of target_clones is instrumented and runs during relocation,
// before the TSan runtime is up (every program crashed at start in the tsan build).
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_THREAD__)
#define SIFT_CLONES __attribute__((target_clones("avx2", "default")))
// g++ -O3 "unroll-and-jams" a tap loop around a vectorised column loop and emits scalar code for the result;
// SIFT_NO_JAM keeps the two-level structure so that the column loop stays vectorised.
#define SIFT_NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define SIFT_CLONES
#define SIFT_NO_JAM
#endif
