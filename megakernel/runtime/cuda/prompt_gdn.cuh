// GDN_CHUNK (docs/ISA.md "Prompt programs"): value head j's columns [h 64, h 64 + 64) (h = tile mod 2; j = tile / 2)
// over the chunk's rows in the WY form (reference/gdn.py chunked: WY chunks of at most 64 rows anchored at
// absolute multiples of 64) on the CUDA cores. The columns' fp32 state S [dk][64] stays in shared memory across the
// WY chunks; per WY chunk of C rows (rows past C are zeros):
//   q, k l2-normalised (q / sqrt(dk)); beta = bf16(sigmoid(b)), g = -exp(A_log) softplus(a + dt_bias); G = cumsum(g);
//   D[i][j] = exp(G_i - G_j), j <= i; A = beta_i (k_i . k_j) D_ij below the diagonal, QK = (q_i . k_j) D_ij on
//   and below it;
//   v_new = (I + A)^-1 (beta (v - exp(G) (k S)))       [= U - W S of the reference: (I + A)^-1 is linear]
//   o = exp(G) (q S) + QK v_new;  S = S exp(G_last) + (k exp(G_last - G))^T v_new;
// then bf16(o) -> buf_out (the gated RMSNorm follows in GATED_PREPARE, which sees a head's whole row). Every step is
// column by column but A and QK, which both halves compute: a head on two SMs (D71: a head a tile was 48 tiles on
// 132 SMs). The reference's two solves (U and W, dv + dk columns) are one here (dv columns), and W is never formed:
// its product with S is k S scaled per row.
//
// Why this shape (D70, D71; derived): shared memory returns one 32-bit register a lane per clock to a warp (128 B/clk
// an SM) while the SM issues four warp-wide fused multiply-adds a clock, so a product is bound by its FMAs only when
// a thread's register tile does enough FMAs a loaded register: [q; k] S runs in 8 x 4 tiles on 256 threads, the
// state's update in 8 x 2 on all 512, q and k transposed in shared memory so that a step's rows are float4 loads.
// The forward substitution keeps a column in registers (a thread a value column, four running sums). Sums over dk,
// keys and rows run in orders of the kernel's own (the reference's run in BLAS's): the per-word GPU test, and the
// CPU run of this file (tests/test_prompt_words_on_cpu.py), compare within the fp32 tolerance.
#pragma once

#include "prompt_ops.cuh"

namespace mk {

constexpr int WY_CHUNK = 64;  // reference/gdn.py CHUNK
constexpr int GDN_SPLIT = 2;  // plan.PROMPT_GDN_SPLIT: tiles a value head
constexpr int CHUNK_COLS = GDN_MAX_COLS / GDN_SPLIT;  // a tile's value columns
constexpr int XT_ROWS = 2 * WY_CHUNK;  // XT's columns: q rows 0..63, k rows 64..127
constexpr int XT_STRIDE = XT_ROWS + 4; // floats a d; padded so a warp's loading stores spread over 8 banks

// Dynamic shared memory (floats):
//   S    [dk][CHUNK_COLS]   the state's columns, S[d][c] (columns past dv zero)
//   XT   [dk][XT_STRIDE]    q and k transposed: XT[d][i] = q_i,d, XT[d][64 + i] = k_i,d (k exp(G_last - G) for the
//                           state's update)
//   O    [64][CHUNK_COLS]   o
//   V    [64][CHUNK_COLS]   v, then beta (v - exp(G) k S), then v_new
//   A    [64][64]           A[i][j] (read below the diagonal)
//   QK   [64][64]           QK transposed: QK[j][i], its 4 x 4 blocks on and below the diagonal (zeros above j = i
//                           within them; step 4 reads no block above)
//   G, gexp, beta, decay [64], rnorm [128]
//   raw  bf16: [2][64][dk] q and k rows, then [64][CHUNK_COLS] v, as the next WY chunk's copies land (D74)
struct ChunkSmem {
    float* S;
    float* XT;
    float* O;
    float* V;
    float* A;
    float* QK;
    float* G;
    float* gexp;
    float* beta;
    float* decay;
    float* rnorm;
    bf16* raw;
    __device__ explicit ChunkSmem(u8* smem)
        : S(reinterpret_cast<float*>(smem)),
          XT(S + GDN_DK * CHUNK_COLS),
          O(XT + GDN_DK * XT_STRIDE),
          V(O + WY_CHUNK * CHUNK_COLS),
          A(V + WY_CHUNK * CHUNK_COLS),
          QK(A + WY_CHUNK * WY_CHUNK),
          G(QK + WY_CHUNK * WY_CHUNK),
          gexp(G + WY_CHUNK),
          beta(gexp + WY_CHUNK),
          decay(beta + WY_CHUNK),
          rnorm(decay + WY_CHUNK),
          raw(reinterpret_cast<bf16*>(rnorm + XT_ROWS)) {}
};
constexpr int RAW_QK = 2 * WY_CHUNK * GDN_DK, RAW_V = WY_CHUNK * CHUNK_COLS;  // bf16 elements
constexpr int CHUNK_SMEM = 208384;  // megakernel/runtime/cuda_build.py prompt_word_smem reads it
static_assert(CHUNK_SMEM == 4 * (GDN_DK * CHUNK_COLS + GDN_DK * XT_STRIDE + 2 * WY_CHUNK * CHUNK_COLS +
                                 2 * WY_CHUNK * WY_CHUNK + 4 * WY_CHUNK + XT_ROWS) + 2 * (RAW_QK + RAW_V),
              "CHUNK_SMEM");
static_assert((CHUNK_SMEM - 2 * (RAW_QK + RAW_V)) % 16 == 0, "raw starts on 16 bytes");
static_assert(CHUNK_SMEM + 1024 <= 232448, "ChunkSmem and the kernel's static 1 KB fit the H200's 227 KB");
static_assert(TILE_THREADS == 512 && GDN_DK == 128 && CHUNK_COLS == 64 && WY_CHUNK == 64,
              "the stages' thread maps below");

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void ld8(float (&r)[8], const float* p) {
    const float4 a = ld4(p), b = ld4(p + 4);
    r[0] = a.x, r[1] = a.y, r[2] = a.z, r[3] = a.w, r[4] = b.x, r[5] = b.y, r[6] = b.z, r[7] = b.w;
}

// acc[a][b] += x[a] y[b]: a register tile's step.
template <int R, int N>
__device__ __forceinline__ void outer_fma(float (&acc)[R][N], const float (&x)[R], const float (&y)[N]) {
#pragma unroll
    for (int a = 0; a < R; ++a)
#pragma unroll
        for (int b = 0; b < N; ++b) acc[a][b] = fma_rn(x[a], y[b], acc[a][b]);
}

// Tile t's geometry, derived from the word where a stage needs it: values kept across the stages would hold
// registers the tiles need (the products' sums, the solve's column). Head j = t / GDN_SPLIT, its value columns
// [c_first, c_first + cols).
struct ChunkHead {
    int j, c_first, cols, hv, dk, dv, key_dim, kh, conv_dim;
    __device__ ChunkHead(const Word& w, int tile)
        : j(tile / GDN_SPLIT), c_first((tile % GDN_SPLIT) * CHUNK_COLS),
          cols(max(0, min(CHUNK_COLS, static_cast<int>(w.p(5)) - c_first))), hv(w.p(3)), dk(w.p(4)), dv(w.p(5)),
          key_dim(w.p(2) * dk), kh(j / (hv / w.p(2))), conv_dim(2 * key_dim + hv * dv) {}
};

// The WY chunk's rows [c0, c0 + C) of q, k and the tile's v columns into `raw` by cp.async, 16 bytes a copy (rows
// past C not copied: step 1 reads them as zeros); the copies land at step 1's wait. Issued for the next WY chunk
// as soon as step 1 has read `raw`, so they fly during steps 2-5 (the loads were an estimated 3-5 us of round trips
// a WY chunk, not measured: D74).
// The 16-byte pieces need conv rows and v columns on 8 elements (cuda_build refuses other shapes).
__device__ inline void chunk_prefetch(const ChunkSmem& sm, const Ctx& ctx, const Word& w, int tile, int c0, int C) {
    const ChunkHead h(w, tile);
    const Buffer conv = ctx.buffer(w.buf_in());
    for (int e = threadIdx.x; e < RAW_QK / 8; e += TILE_THREADS) {
        const int piece = e % (GDN_DK / 8), i = (e / (GDN_DK / 8)) % WY_CHUNK, half = e / (GDN_DK / 8 * WY_CHUNK);
        if (i < C)
            copy_async16(smem_addr(sm.raw + (half * WY_CHUNK + i) * GDN_DK + 8 * piece),
                         conv.at<bf16>(c0 + i, half * h.key_dim + h.kh * h.dk + 8 * piece));
    }
    for (int e = threadIdx.x; e < RAW_V / 8; e += TILE_THREADS) {
        const int piece = e % (CHUNK_COLS / 8), i = e / (CHUNK_COLS / 8);
        if (i < C && 8 * piece < h.cols)
            copy_async16(smem_addr(sm.raw + RAW_QK + i * CHUNK_COLS + 8 * piece),
                         conv.at<bf16>(c0 + i, 2 * h.key_dim + h.j * h.dv + h.c_first + 8 * piece));
    }
    copies_commit();
}

// 1. The WY chunk's rows [c0, c0 + C): XT (q, k l2-normalised, q / sqrt(dk)), V (the tile's v columns), the gates;
// zeros past C.
__device__ inline void chunk_rows(const ChunkSmem& sm, const Ctx& ctx, const Word& w, int tile, int c0, int C) {
    const ChunkHead h(w, tile);
    const int j = h.j, hv = h.hv;
    const Buffer mixed = ctx.buffer(w.buf_aux1());
    const float neg_a = -expf(ctx.weight(w.p(0)).value(j)), bias = ctx.weight(w.p(1)).value(j);
    const int tid = threadIdx.x;
    if (tid < WY_CHUNK) {  // the gates first: their loads' round trip overlaps the copies' wait
        const int b_col = h.conv_dim + hv * h.dv + j;  // in_proj's output: [q | k | v | z | b | a]
        const bool row = tid < C;
        sm.beta[tid] = row ? round_bf16(sigmoid_ref(bf(*mixed.at<bf16>(c0 + tid, b_col)))) : 0.0f;
        sm.G[tid] = row ? mul_rn(neg_a, softplus_ref(add_rn(bf(*mixed.at<bf16>(c0 + tid, b_col + hv)), bias))) : 0.0f;
    }
    stage_wait();  // this WY chunk's copies
    for (int e = tid; e < RAW_QK; e += TILE_THREADS) {  // a warp's lanes along d
        const int d = e % GDN_DK, i = (e / GDN_DK) % WY_CHUNK, half = e / (WY_CHUNK * GDN_DK);
        sm.XT[d * XT_STRIDE + half * WY_CHUNK + i] = i < C ? bf(sm.raw[e]) : 0.0f;
    }
    for (int e = tid; e < RAW_V; e += TILE_THREADS) {
        const int c = e % CHUNK_COLS, i = e / CHUNK_COLS;
        sm.V[e] = i < C && c < h.cols ? bf(sm.raw[RAW_QK + e]) : 0.0f;
    }
    __syncthreads();
    if (tid == 0)  // cumsum in order; rows past C repeat G_last
        for (int i = 1; i < WY_CHUNK; ++i) sm.G[i] = i < C ? add_rn(sm.G[i - 1], sm.G[i]) : sm.G[i - 1];
    if (tid >= 32 && tid < 32 + XT_ROWS) {  // a row's sum of squares over d in order (lanes on consecutive rows)
        const int r = tid - 32;
        float ss = 0.0f;
        for (int d = 0; d < GDN_DK; ++d) ss = add_rn(ss, mul_rn(sm.XT[d * XT_STRIDE + r], sm.XT[d * XT_STRIDE + r]));
        sm.rnorm[r] = rsqrt_ref(add_rn(ss, 1e-6f));
    }
    __syncthreads();
    const float root = sqrt_rn(static_cast<float>(h.dk)), g_last = sm.G[C - 1];
    if (tid < WY_CHUNK) {
        sm.gexp[tid] = expf(sm.G[tid]);
        sm.decay[tid] = tid < C ? expf(sub_rn(g_last, sm.G[tid])) : 0.0f;
    }
    for (int e = tid; e < GDN_DK * XT_ROWS; e += TILE_THREADS) {
        const int r = e % XT_ROWS, at = (e / XT_ROWS) * XT_STRIDE + r;
        sm.XT[at] = r < WY_CHUNK ? div_rn(mul_rn(sm.XT[at], sm.rnorm[r]), root) : mul_rn(sm.XT[at], sm.rnorm[r]);
    }
    __syncthreads();
}

// Tile t of the 136 4 x 4 tiles on and below the diagonal of a 64 x 64 matrix, row by row: (bi, bj), bj <= bi.
__device__ __forceinline__ void lower_tile(int t, int& bi, int& bj) {
    bi = 0;
    while (t > bi) t -= ++bi;
    bj = t;
}
constexpr int LOWER_TILES = 16 * 17 / 2;

// (rows . k_j) over d for a 4 x 4 tile: XT's columns `rows` .. + 3 (q or k) against k's j0 .. j0 + 3.
__device__ __forceinline__ void tile_dots(float (&acc)[4][4], const float* XT, int rows, int j0) {
#pragma unroll 4
    for (int d = 0; d < GDN_DK; ++d) {
        const float4 x4 = ld4(XT + d * XT_STRIDE + rows), y4 = ld4(XT + d * XT_STRIDE + WY_CHUNK + j0);
        const float x[4] = {x4.x, x4.y, x4.z, x4.w}, y[4] = {y4.x, y4.y, y4.z, y4.w};
        outer_fma(acc, x, y);
    }
}

// 2. [q; k] S in 8 x 4 tiles (threads 0..255: rows 8 (t / 16), columns 4 (t % 16)): O = exp(G) (q S), V = beta (v -
// exp(G) (k S)); beside them A = beta_i (k_i . k_j) D_ij below the diagonal (threads 256..391, a 4 x 4 tile each).
__device__ inline void chunk_state_products(const ChunkSmem& sm, int C) {
    const int tid = threadIdx.x;
    if (tid < TILE_THREADS / 2) {
        const int r0 = 8 * (tid / 16), c0 = 4 * (tid % 16);
        float acc[8][4] = {};
#pragma unroll 2
        for (int d = 0; d < GDN_DK; ++d) {
            float x[8];
            ld8(x, sm.XT + d * XT_STRIDE + r0);
            const float4 y4 = ld4(sm.S + d * CHUNK_COLS + c0);
            const float y[4] = {y4.x, y4.y, y4.z, y4.w};
            outer_fma(acc, x, y);
        }
#pragma unroll
        for (int a = 0; a < 8; ++a) {
            const int r = r0 + a;
            if (r < WY_CHUNK) {
                const float e = sm.gexp[r];
                st4(sm.O + r * CHUNK_COLS + c0, make_float4(mul_rn(e, acc[a][0]), mul_rn(e, acc[a][1]),
                                                            mul_rn(e, acc[a][2]), mul_rn(e, acc[a][3])));
            } else {
                const int i = r - WY_CHUNK;
                float* v = sm.V + i * CHUNK_COLS + c0;
#pragma unroll
                for (int b = 0; b < 4; ++b) v[b] = mul_rn(sm.beta[i], sub_rn(v[b], mul_rn(sm.gexp[i], acc[a][b])));
            }
        }
    } else if (tid < TILE_THREADS / 2 + LOWER_TILES) {
        int bi, bj;
        lower_tile(tid - TILE_THREADS / 2, bi, bj);
        float acc[4][4] = {};
        tile_dots(acc, sm.XT, WY_CHUNK + 4 * bi, 4 * bj);
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int i = 4 * bi + a, jj = 4 * bj + b;
                sm.A[i * WY_CHUNK + jj] =
                    jj < i && i < C ? mul_rn(mul_rn(acc[a][b], sm.beta[i]), expf(sub_rn(sm.G[i], sm.G[jj]))) : 0.0f;
            }
    }
    __syncthreads();
}

// 3. Two jobs at once: v_new = (I + A)^-1 V by forward substitution (threads 0..63: a thread a value column, the
// column in registers, each row's sum in four running sums (j mod 4) added pairwise), and QK = (q_i . k_j) D_ij on
// and below the diagonal, stored transposed (threads 64..199: a 4 x 4 tile each; 14 warps sat idle beside the solve,
// D74). Step 4 reads QK's blocks on and below the diagonal only: those above are never written.
__device__ inline void chunk_solve_and_queries(const ChunkSmem& sm, int C) {
    const int tid = threadIdx.x;
    if (tid < CHUNK_COLS) {
        const int c = tid;
        float x[WY_CHUNK];
#pragma unroll
        for (int i = 0; i < WY_CHUNK; ++i) x[i] = sm.V[i * CHUNK_COLS + c];
#pragma unroll
        for (int i = 1; i < WY_CHUNK; ++i) {
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int jj = 0; jj < i; jj += 4) {
                const float4 a = ld4(sm.A + i * WY_CHUNK + jj);
                const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (jj + e < i) s[e] = fma_rn(av[e], x[jj + e], s[e]);
            }
            x[i] = sub_rn(x[i], add_rn(add_rn(s[0], s[1]), add_rn(s[2], s[3])));
        }
#pragma unroll
        for (int i = 0; i < WY_CHUNK; ++i) sm.V[i * CHUNK_COLS + c] = x[i];
    } else if (tid < CHUNK_COLS + LOWER_TILES) {
        int bi, bj;
        lower_tile(tid - CHUNK_COLS, bi, bj);
        float acc[4][4] = {};
        tile_dots(acc, sm.XT, 4 * bi, 4 * bj);
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int i = 4 * bi + a, jj = 4 * bj + b;
                sm.QK[jj * WY_CHUNK + i] = jj <= i && i < C ? mul_rn(acc[a][b], expf(sub_rn(sm.G[i], sm.G[jj]))) : 0.0f;
            }
    }
    __syncthreads();
}

// 4. O += QK v_new: warp w rows 4w .. 4w + 3 (all 16 warps), lane the columns 2 lane, 2 lane + 1, keys j <= 4w + 3
// (within the diagonal block QK is zero above j = i); then k exp(G_last - G) in place, for the state's update (q and
// k were last read by step 3).
__device__ inline void chunk_intra(const ChunkSmem& sm) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, i0 = 4 * warp, c0 = 2 * lane;
    float acc[4][2] = {};
#pragma unroll 4
    for (int jj = 0; jj < i0 + 4; ++jj) {
        const float4 x4 = ld4(sm.QK + jj * WY_CHUNK + i0);
        const float2 v2 = *reinterpret_cast<const float2*>(sm.V + jj * CHUNK_COLS + c0);
        const float x[4] = {x4.x, x4.y, x4.z, x4.w}, y[2] = {v2.x, v2.y};
        outer_fma(acc, x, y);
    }
#pragma unroll
    for (int a = 0; a < 4; ++a) {
        float2* o = reinterpret_cast<float2*>(sm.O + (i0 + a) * CHUNK_COLS + c0);
        const float2 p = *o;
        *o = make_float2(add_rn(p.x, acc[a][0]), add_rn(p.y, acc[a][1]));
    }
    for (int e = threadIdx.x; e < WY_CHUNK * GDN_DK; e += TILE_THREADS) {
        const int i = e % WY_CHUNK, at = (e / WY_CHUNK) * XT_STRIDE + WY_CHUNK + i;
        sm.XT[at] = mul_rn(sm.XT[at], sm.decay[i]);
    }
    __syncthreads();
}

// 5. S = S exp(G_last) + (k exp(G_last - G))^T v_new (all 16 warps: warp w the state's rows 8w .. 8w + 7, read from
// XT by all its lanes at once, lane the columns 2 lane, 2 lane + 1); then bf16(o) of the rows below C -> buf_out.
__device__ inline void chunk_update_and_output(const ChunkSmem& sm, const Ctx& ctx, const Word& w, int tile, int c0,
                                               int C) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, d0 = 8 * warp, col0 = 2 * lane;
    const float decay = expf(sm.G[C - 1]);
    float acc[8][2] = {};
#pragma unroll 4
    for (int i = 0; i < C; ++i) {
        float x[8];
#pragma unroll
        for (int a = 0; a < 8; ++a) x[a] = sm.XT[(d0 + a) * XT_STRIDE + WY_CHUNK + i];
        const float2 v2 = *reinterpret_cast<const float2*>(sm.V + i * CHUNK_COLS + col0);
        const float y[2] = {v2.x, v2.y};
        outer_fma(acc, x, y);
    }
#pragma unroll
    for (int a = 0; a < 8; ++a) {
        float2* s = reinterpret_cast<float2*>(sm.S + (d0 + a) * CHUNK_COLS + col0);
        const float2 p = *s;
        *s = make_float2(add_rn(mul_rn(p.x, decay), acc[a][0]), add_rn(mul_rn(p.y, decay), acc[a][1]));
    }
    const ChunkHead h(w, tile);
    const Buffer out = ctx.buffer(w.buf_out());
    for (int e = threadIdx.x; e < C * CHUNK_COLS; e += TILE_THREADS) {
        const int c = e % CHUNK_COLS, row = e / CHUNK_COLS;
        if (c < h.cols) *out.at<bf16>(c0 + row, h.j * h.dv + h.c_first + c) = to_bf16(sm.O[e]);
    }
    __syncthreads();
}

// The tile's state columns between the state buffer ([dv][dk]) and S[d][c] = state[c_first + c][d]: lanes along c
// (shared memory without conflicts; the global reads hit L1 lines). Its own function so that nothing of it stays
// live across the WY chunks (128 registers a thread).
__device__ __noinline__ void chunk_state_io(float* S, const Ctx& ctx, const Word& w, int tile, bool store) {
    const ChunkHead h(w, tile);
    float* state = ctx.buffer(w.buf_aux0()).at<float>(h.j, 0);
    for (int e = threadIdx.x; e < GDN_DK * CHUNK_COLS; e += TILE_THREADS) {
        const int c = e % CHUNK_COLS, d = e / CHUNK_COLS;
        if (store && c < h.cols) state[(h.c_first + c) * h.dk + d] = S[e];
        if (!store) S[e] = c < h.cols ? state[(h.c_first + c) * h.dk + d] : 0.0f;
    }
}

__device__ inline void gdn_chunk_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    const ChunkSmem sm(smem);
    chunk_state_io(sm.S, ctx, w, tile, false);
    __syncthreads();
    const int r = chunk_rows_now(ctx, w), pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    auto rows_at = [&](int c0) { return c0 < r ? min(r - c0, WY_CHUNK - (pos + c0) % WY_CHUNK) : 0; };
    if (r > 0) chunk_prefetch(sm, ctx, w, tile, 0, rows_at(0));
    for (int c0 = 0; c0 < r;) {
        const int C = rows_at(c0);
        chunk_rows(sm, ctx, w, tile, c0, C);
        if (c0 + C < r) chunk_prefetch(sm, ctx, w, tile, c0 + C, rows_at(c0 + C));  // raw is read: the next copies
        chunk_state_products(sm, C);
        chunk_solve_and_queries(sm, C);
        chunk_intra(sm);
        chunk_update_and_output(sm, ctx, w, tile, c0, C);
        c0 += C;
    }
    chunk_state_io(sm.S, ctx, w, tile, true);
}

}  // namespace mk
