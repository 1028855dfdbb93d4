#!/usr/bin/env python3
"""Checks the byte-to-k assignment of src/backend/cuda/kernels/match_u8_mma.cuh against the PTX ISA's fragment
layout of mma.m16n8k32 with .u8 operands (A row-major 16 x 32, B column-major 32 x 8, C 16 x 8 s32), on the host.

Layout (PTX ISA, 'Matrix fragments for mma.m16n8k32'): lane = 4 * g + t (group g, thread t of the group);
A registers 0..3 hold (row g, k 4t..4t+3), (row g+8, same k), (row g, k 16+4t..), (row g+8, k 16+4t..);
B registers 0..1 hold (k 4t.., column g), (k 16+4t.., column g); C holds (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1);
byte j of a register is element j. The kernel loads, for k-step ks, A words 2 ks and 2 ks + 1 of the lane's 32
bytes at 32 t of its rows, and B likewise from train row g of the n8 tile. This model builds the matrices the
MMA sees from those registers and checks that C is every (query, train) dot product over all 128 bytes.
Run: python3 scripts/match_u8_fragment_model.py  (prints 'fragment model OK')."""
import random

random.seed(1)
Q = [[random.randrange(256) for _ in range(128)] for _ in range(32)]  # one warp's 32 queries
T = [[random.randrange(256) for _ in range(128)] for _ in range(8)]  # one n8 tile of train descriptors


def word(row, w, t):
    return row[32 * t + 4 * w:32 * t + 4 * w + 4]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


for m in range(2):
    C = [[0] * 8 for _ in range(16)]
    for ks in range(4):
        A = [[None] * 32 for _ in range(16)]
        B = [[None] * 8 for _ in range(32)]
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            a = [word(Q[16 * m + g], 2 * ks, t), word(Q[16 * m + g + 8], 2 * ks, t),
                 word(Q[16 * m + g], 2 * ks + 1, t), word(Q[16 * m + g + 8], 2 * ks + 1, t)]
            b = [word(T[g], 2 * ks, t), word(T[g], 2 * ks + 1, t)]
            for j in range(4):
                A[g][4 * t + j], A[g + 8][4 * t + j] = a[0][j], a[1][j]
                A[g][16 + 4 * t + j], A[g + 8][16 + 4 * t + j] = a[2][j], a[3][j]
                B[4 * t + j][g], B[16 + 4 * t + j][g] = b[0][j], b[1][j]
        assert all(x is not None for r in A for x in r) and all(x is not None for r in B for x in r)
        for i in range(16):
            for n in range(8):
                C[i][n] += sum(A[i][k] * B[k][n] for k in range(32))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        got = [C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]]
        want = [dot(Q[16 * m + g], T[2 * t]), dot(Q[16 * m + g], T[2 * t + 1]),
                dot(Q[16 * m + g + 8], T[2 * t]), dot(Q[16 * m + g + 8], T[2 * t + 1])]
        assert got == want, (m, lane)
print("fragment model OK")
