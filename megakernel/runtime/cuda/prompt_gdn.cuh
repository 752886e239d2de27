// GDN_CHUNK (docs/ISA.md "Prompt programs"): value head j over the chunk's rows in the WY form (reference/gdn.py
// chunked: WY chunks of at most 64 rows anchored at absolute multiples of 64) on the CUDA cores, its three
// products with the state (W S, (q exp(G)) S, the state's update) in register tiles of fused multiply-adds (D69). The head's fp32 state
// stays in shared memory across the WY chunks; per WY chunk of C rows:
//   q, k l2-normalised (q / sqrt(dk)) as GDN_CORE normalises them; beta = bf16(sigmoid(b)), g = -exp(A_log)
//   softplus(a + dt_bias); G = cumsum(g); D[i][j] = exp(G_i - G_j), j <= i;
//   A = (k beta) k^T * D below the diagonal; U = (I + A)^-1 (v beta), W = (I + A)^-1 (k beta exp(G)) by forward
//   substitution, a thread a column; v_new = U - W S; o = (q exp(G)) S + ((q k^T) * D) v_new;
//   S = S exp(G_last) + (k exp(G_last - G))^T v_new;
// then per row the gated RMSNorm of bf16(o) (GDN_CORE's arithmetic) -> buf_out. Sums over dk, keys and rows in
// order (the reference's BLAS products sum in theirs, and round each product: the per-word GPU test compares
// within the fp32 tolerance).
// Written without a GPU (D68, D69).
#pragma once

#include "prompt_ops.cuh"

namespace mk {

constexpr int WY_CHUNK = 64;  // reference/gdn.py CHUNK

// Dynamic shared memory (floats): the state S [dk][dv], then q, k [64][QK_STRIDE], v (-> U -> v_new) [64][dv],
// w (-> W -> o) [64][dk], a [64][64] (A -> q k^T * D), G, exp(G), beta [64]. q and k rows are padded by one float:
// A and q k^T give a warp's lanes consecutive rows of k at one d, which an unpadded 128-float stride would put in
// one bank (a 32-way conflict every step; found by review, D69).
constexpr int QK_STRIDE = GDN_DK + 1;
struct ChunkSmem {
    float* S;
    float* q;
    float* k;
    float* v;
    float* w;
    float* a;
    float* G;
    float* gexp;
    float* beta;
    __device__ explicit ChunkSmem(u8* smem)
        : S(reinterpret_cast<float*>(smem)),
          q(S + GDN_DK * GDN_MAX_COLS),
          k(q + WY_CHUNK * QK_STRIDE),
          v(k + WY_CHUNK * QK_STRIDE),
          w(v + WY_CHUNK * GDN_MAX_COLS),
          a(w + WY_CHUNK * GDN_DK),
          G(a + WY_CHUNK * WY_CHUNK),
          gexp(G + WY_CHUNK),
          beta(gexp + WY_CHUNK) {}
};
constexpr int CHUNK_SMEM = 214272;  // megakernel/runtime/cuda_build.py prompt_word_smem reads it
static_assert(CHUNK_SMEM == 4 * (GDN_DK * GDN_MAX_COLS + 2 * WY_CHUNK * QK_STRIDE + WY_CHUNK * GDN_MAX_COLS +
                                 WY_CHUNK * GDN_DK + WY_CHUNK * WY_CHUNK + 3 * WY_CHUNK), "CHUNK_SMEM");
static_assert(CHUNK_SMEM + LAUNCH_PROGRAM_BYTES <= 232448, "ChunkSmem fits the H200's shared memory (227 KB)");
static_assert(TILE_WARPS * 4 == WY_CHUNK && TILE_WARPS * 8 == GDN_DK && 4 * 32 == GDN_MAX_COLS,
              "the register tiles: a warp 4 rows of a WY chunk (8 of dk), a lane 4 value columns");

// acc[a][b] += the sum over i in [0, n) of A(a, i) B(i, tx + 32 b), in order by fused multiply-adds: A(a, i) at
// a[a * a_row + i * a_col], B's row i at b + i * b_stride (its columns past dv read as zero). A register tile of
// GDN_CHUNK's products: R rows of A a warp, 4 columns of B a lane.
template <int R>
__device__ __forceinline__ void tile_fma(float (&acc)[R][4], const float* a, int a_row, int a_col, const float* b,
                                         int b_stride, int n, int tx, int dv) {
    for (int i = 0; i < n; ++i) {
        float av[R], bv[4];
#pragma unroll
        for (int r = 0; r < R; ++r) av[r] = a[r * a_row + i * a_col];
#pragma unroll
        for (int c = 0; c < 4; ++c) bv[c] = tx + 32 * c < dv ? b[i * b_stride + tx + 32 * c] : 0.0f;
#pragma unroll
        for (int e = 0; e < 4 * R; ++e) acc[e >> 2][e & 3] = fma_rn(av[e >> 2], bv[e & 3], acc[e >> 2][e & 3]);
    }
}

__device__ inline void gdn_chunk_tile(const Ctx& ctx, const Word& w, int j, u8* smem) {
    const ChunkSmem sm(smem);
    const int key_heads = w.p(2), hv = w.p(3), dk = w.p(4), dv = w.p(5);
    const float eps = w.pf(7);
    const int r = chunk_rows_now(ctx, w), pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
    const int key_dim = key_heads * dk, kh = j / (hv / key_heads), conv_dim = 2 * key_dim + hv * dv;
    const Buffer conv = ctx.buffer(w.buf_in()), mixed = ctx.buffer(w.buf_aux1()), out = ctx.buffer(w.buf_out());
    float* state = ctx.buffer(w.buf_aux0()).at<float>(j, 0);  // [dv][dk]
    const Weight a_log = ctx.weight(w.p(0)), dt_bias = ctx.weight(w.p(1)), norm = ctx.weight(w.p(6));
    const float neg_a = -expf(a_log.value(j)), bias = dt_bias.value(j), root = sqrt_rn(static_cast<float>(dk));
    for (int e = tid; e < dk * dv; e += TILE_THREADS) sm.S[(e % dk) * dv + e / dk] = state[e];
    __syncthreads();
    for (int c0 = 0; c0 < r;) {
        const int C = min(r - c0, WY_CHUNK - (pos + c0) % WY_CHUNK);
        // 1. the chunk's rows: q, k l2-normalised (a warp a row), v; the gates
        for (int e = tid; e < C * dv; e += TILE_THREADS)
            sm.v[(e / dv) * GDN_MAX_COLS + e % dv] = bf(*conv.at<bf16>(c0 + e / dv, 2 * key_dim + j * dv + e % dv));
        for (int pair = warp; pair < 2 * C; pair += TILE_WARPS) {
            const int row = pair % C, col0 = pair < C ? kh * dk : key_dim + kh * dk;
            float* x = (pair < C ? sm.q : sm.k) + row * QK_STRIDE;
            float ss = 0.0f;
            for (int i = lane; i < dk; i += 32) {
                x[i] = bf(*conv.at<bf16>(c0 + row, col0 + i));
                ss = add_rn(ss, mul_rn(x[i], x[i]));
            }
            const float rn = rsqrt_ref(add_rn(warp_sum(ss), 1e-6f));
            for (int i = lane; i < dk; i += 32) x[i] = pair < C ? div_rn(mul_rn(x[i], rn), root) : mul_rn(x[i], rn);
        }
        if (tid < C) {
            const int b_col = conv_dim + hv * dv + j;  // in_proj's output: [q | k | v | z | b | a]
            sm.beta[tid] = round_bf16(sigmoid_ref(bf(*mixed.at<bf16>(c0 + tid, b_col))));
            sm.G[tid] = mul_rn(neg_a, softplus_ref(add_rn(bf(*mixed.at<bf16>(c0 + tid, b_col + hv)), bias)));
        }
        __syncthreads();
        if (tid == 0)
            for (int i = 1; i < C; ++i) sm.G[i] = add_rn(sm.G[i - 1], sm.G[i]);  // cumsum, in order
        __syncthreads();
        if (tid < C) sm.gexp[tid] = expf(sm.G[tid]);
        __syncthreads();
        // 2. the right-hand sides and A
        for (int e = tid; e < C * GDN_DK; e += TILE_THREADS) {
            const int i = e / GDN_DK, d = e % GDN_DK;
            sm.w[i * GDN_DK + d] = mul_rn(mul_rn(sm.k[i * QK_STRIDE + d], sm.beta[i]), sm.gexp[i]);
            if (d < dv) sm.v[i * GDN_MAX_COLS + d] = mul_rn(sm.v[i * GDN_MAX_COLS + d], sm.beta[i]);
        }
        for (int e = tid; e < C * C; e += TILE_THREADS) {
            const int i = e / C, jj = e % C;
            float dot = 0.0f;
            if (jj < i) {
                for (int d = 0; d < dk; ++d)
                    dot = add_rn(dot, mul_rn(mul_rn(sm.k[i * QK_STRIDE + d], sm.beta[i]), sm.k[jj * QK_STRIDE + d]));
                dot = mul_rn(dot, expf(sub_rn(sm.G[i], sm.G[jj])));
            }
            sm.a[i * WY_CHUNK + jj] = dot;
        }
        __syncthreads();
        // 3. forward substitution, a thread a column of U (dv) or W (dk): X_i = RHS_i - sum_{j < i} A_ij X_j
        if (tid < dv + dk) {
            float* X = tid < dv ? sm.v + tid : sm.w + (tid - dv);
            const int stride = tid < dv ? GDN_MAX_COLS : GDN_DK;
            for (int i = 1; i < C; ++i) {
                float acc = 0.0f;
                for (int jj = 0; jj < i; ++jj) acc = add_rn(acc, mul_rn(sm.a[i * WY_CHUNK + jj], X[jj * stride]));
                X[i * stride] = sub_rn(X[i * stride], acc);
            }
        }
        __syncthreads();
        // 4. v_new = U - W S, then q k^T * D on and below the diagonal (A is spent). The products with the state
        // sum each output in order by fused multiply-adds (one rounding a term, as GDN_CORE's delta rule), the
        // work in register tiles: warp ty the rows 4 ty .. 4 ty + 3 (8 ty .. for S), lane tx the columns tx + 32 b.
        const int ty = warp, tx = lane;
        {
            float acc[4][4];
#pragma unroll
            for (int e = 0; e < 16; ++e) acc[e >> 2][e & 3] = 0.0f;
            tile_fma<4>(acc, sm.w + 4 * ty * GDN_DK, GDN_DK, 1, sm.S, dv, GDN_DK, tx, dv);
#pragma unroll
            for (int e = 0; e < 16; ++e) {
                const int i = 4 * ty + (e >> 2), c = tx + 32 * (e & 3);
                if (i < C && c < dv) sm.v[i * GDN_MAX_COLS + c] = sub_rn(sm.v[i * GDN_MAX_COLS + c], acc[e >> 2][e & 3]);
            }
        }
        for (int e = tid; e < C * C; e += TILE_THREADS) {
            const int i = e / C, jj = e % C;
            float dot = 0.0f;
            if (jj <= i) {
                for (int d = 0; d < dk; ++d)
                    dot = add_rn(dot, mul_rn(sm.q[i * QK_STRIDE + d], sm.k[jj * QK_STRIDE + d]));
                dot = mul_rn(dot, expf(sub_rn(sm.G[i], sm.G[jj])));
            }
            sm.a[i * WY_CHUNK + jj] = dot;
        }
        __syncthreads();
        // the products' scaled operands, once each (the plain loops scaled them inside): q exp(G_i) for o, k
        // exp(G_last - G_i) for S (q and k are spent but for these)
        const float g_last = sm.G[C - 1], decay = expf(g_last);
        for (int e = tid; e < C * GDN_DK; e += TILE_THREADS) {
            const int i = e / GDN_DK, at = i * QK_STRIDE + e % GDN_DK;
            sm.q[at] = mul_rn(sm.q[at], sm.gexp[i]);
            sm.k[at] = mul_rn(sm.k[at], expf(sub_rn(g_last, sm.G[i])));
        }
        __syncthreads();
        // 5. o = (q exp(G)) S + (q k^T * D) v_new, into w (W is spent)
        {
            float inter[4][4], intra[4][4];
#pragma unroll
            for (int e = 0; e < 16; ++e) inter[e >> 2][e & 3] = intra[e >> 2][e & 3] = 0.0f;
            tile_fma<4>(inter, sm.q + 4 * ty * QK_STRIDE, QK_STRIDE, 1, sm.S, dv, GDN_DK, tx, dv);
            for (int jj = 0; jj <= min(4 * ty + 3, C - 1); ++jj) {
                float vv[4];
#pragma unroll
                for (int b = 0; b < 4; ++b) vv[b] = tx + 32 * b < dv ? sm.v[jj * GDN_MAX_COLS + tx + 32 * b] : 0.0f;
#pragma unroll
                for (int e = 0; e < 16; ++e)
                    if (jj <= 4 * ty + (e >> 2))
                        intra[e >> 2][e & 3] = fma_rn(sm.a[(4 * ty + (e >> 2)) * WY_CHUNK + jj], vv[e & 3],
                                                      intra[e >> 2][e & 3]);
            }
#pragma unroll
            for (int e = 0; e < 16; ++e) {
                const int i = 4 * ty + (e >> 2), c = tx + 32 * (e & 3);
                if (i < C && c < dv) sm.w[i * GDN_DK + c] = add_rn(inter[e >> 2][e & 3], intra[e >> 2][e & 3]);
            }
        }
        __syncthreads();
        // 6. S = S exp(G_last) + (k exp(G_last - G))^T v_new
        {
            float acc[8][4];
#pragma unroll
            for (int e = 0; e < 32; ++e) acc[e >> 2][e & 3] = 0.0f;
            tile_fma<8>(acc, sm.k + 8 * ty, 1, QK_STRIDE, sm.v, GDN_MAX_COLS, C, tx, dv);  // k^T: A(a, i) = k[i][8 ty + a]
#pragma unroll
            for (int e = 0; e < 32; ++e) {
                const int d = 8 * ty + (e >> 2), c = tx + 32 * (e & 3);
                if (c < dv) sm.S[d * dv + c] = add_rn(mul_rn(sm.S[d * dv + c], decay), acc[e >> 2][e & 3]);
            }
        }
        // 7. the gated RMSNorm of bf16(o), a warp a row: bf16(bf16(w bf16(o rsqrt(mean(o^2) + eps))) silu(z))
        for (int row = warp; row < C; row += TILE_WARPS) {
            float ss = 0.0f;
            for (int c = lane; c < dv; c += 32) {
                const float o = round_bf16(sm.w[row * GDN_DK + c]);
                ss = add_rn(ss, mul_rn(o, o));
            }
            const float rn = rsqrt_ref(add_rn(div_rn(warp_sum(ss), static_cast<float>(dv)), eps));
            for (int c = lane; c < dv; c += 32) {
                const float o = round_bf16(sm.w[row * GDN_DK + c]);
                const float t = round_bf16(mul_rn(norm.value(c), round_bf16(mul_rn(o, rn))));
                const float z = bf(*mixed.at<bf16>(c0 + row, conv_dim + j * dv + c));
                *out.at<bf16>(c0 + row, j * dv + c) = to_bf16(mul_rn(t, silu_ref(z)));
            }
        }
        __syncthreads();
        c0 += C;
    }
    for (int e = tid; e < dk * dv; e += TILE_THREADS) state[e] = sm.S[(e % dk) * dv + e / dk];
}

}  // namespace mk
