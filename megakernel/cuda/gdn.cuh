// GDN_CORE tile (docs/ISA.md "Other ops"): value head j, a group of its value columns, all m rows of the
// pass: causal conv over the ring + the pass's rows, silu, l2norm of q and k, the gates, and the fp32
// delta-rule recurrence with the state held in registers across the rows (read and written once a pass).
//
// Threads: column v = tid % 128 of the tile's columns, quarter q = tid / 128 holds state rows
// [32 q, 32 q + 32) of dk = 128 (layout [dv, dk] in the state buffer: a column's dk values are
// contiguous). The sums over dk are four quarter sums added in order 0..3.
#pragma once

#include "common.cuh"

namespace mk {

constexpr int GDN_DK = 128;       // key head dim (Qwen3.5: 128); the tile function is specialised to it
constexpr int GDN_MAX_COLS = 128; // value columns of one tile
constexpr int GDN_MAX_KERNEL = 8; // conv kernel taps supported
constexpr int GDN_QUARTERS = TILE_THREADS / GDN_MAX_COLS;
constexpr int GDN_PER_THREAD = GDN_DK / GDN_QUARTERS;

struct GdnSmem {
    float q[MAX_ROWS][GDN_DK];
    float k[MAX_ROWS][GDN_DK];
    float v[MAX_ROWS][GDN_MAX_COLS];
    float beta[MAX_ROWS];
    float decay[MAX_ROWS];  // exp(g)
    float part[GDN_QUARTERS][GDN_MAX_COLS];
};

// Causal conv of one channel over positions pos - K + 1 .. pos + m - 1 (ring rows, then the pass's own
// raw inputs): out[r] = bf16(silu(bf16(sum_i window[r + i] * tap[i]))), taps added in order.
__device__ inline void conv_channel(const Buffer& mixed, const Buffer& ring, const Weight& taps, int ch, int pos,
                                    int m, int K, int R, float* out, int out_stride) {
    float window[GDN_MAX_KERNEL + MAX_ROWS];
    for (int i = 0; i < K - 1; ++i) window[i] = bf(*ring.at<bf16>(((pos - K + 1 + i) % R + R) % R, ch));
    for (int r = 0; r < m; ++r) window[K - 1 + r] = bf(*mixed.at<bf16>(r, ch));
    for (int r = 0; r < m; ++r) {
        float acc = mul_rn(window[r], taps.value(static_cast<size_t>(ch) * K));
        for (int i = 1; i < K; ++i) acc = add_rn(acc, mul_rn(window[r + i], taps.value(static_cast<size_t>(ch) * K + i)));
        out[r * out_stride] = round_bf16(silu_ref(round_bf16(acc)));
    }
}

__device__ inline void gdn_tile(const Ctx& ctx, const Word& w, int tile, GdnSmem& sm) {
    const Weight taps = ctx.weight(w.p(0)), a_log = ctx.weight(w.p(1)), dt_bias = ctx.weight(w.p(2));
    const int hk = w.p(3), hv = w.p(4), dk = w.p(5), dv = w.p(6), K = w.p(7), R = w.p(8), groups = w.p(9);
    const int m = w.rows(), j = tile / groups, group = tile % groups, cols = dv / groups, v0 = group * cols;
    const int per_key = hv / hk, kh = j / per_key, key_dim = hk * dk;
    const Buffer mixed = ctx.buffer(w.buf_in()), out = ctx.buffer(w.buf_out());
    const Buffer state = ctx.buffer(w.buf_aux0()), ring = ctx.buffer(w.buf_aux1());
    const int pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int tid = threadIdx.x;

    // 1. conv + silu of q, k (key head kh) and this tile's v channels.
    for (int c = tid; c < 2 * dk + cols; c += TILE_THREADS) {
        if (c < dk) conv_channel(mixed, ring, taps, kh * dk + c, pos, m, K, R, &sm.q[0][c], GDN_DK);
        else if (c < 2 * dk) conv_channel(mixed, ring, taps, key_dim + kh * dk + c - dk, pos, m, K, R, &sm.k[0][c - dk], GDN_DK);
        else conv_channel(mixed, ring, taps, 2 * key_dim + j * dv + v0 + c - 2 * dk, pos, m, K, R, &sm.v[0][c - 2 * dk], GDN_MAX_COLS);
    }
    // gates: beta = bf16(sigmoid(b)), g = -exp(A_log) softplus(a + dt_bias); the state decays by exp(g)
    if (tid < m) {
        const int b_col = 2 * key_dim + 2 * hv * dv + j;
        const float b = bf(*mixed.at<bf16>(tid, b_col)), a = bf(*mixed.at<bf16>(tid, b_col + hv));
        sm.beta[tid] = round_bf16(sigmoid_ref(b));
        const float g = mul_rn(-expf(a_log.value(j)), softplus_ref(add_rn(a, dt_bias.value(j))));
        sm.decay[tid] = expf(g);
    }
    __syncthreads();
    // 2. the pass's raw inputs -> ring rows (pos + r) mod R (after every read of this tile; other tiles
    // read only older rows). q/k channels by the key head's first value head, column group 0.
    for (int c = tid; c < 2 * dk + cols; c += TILE_THREADS) {
        int ch;
        if (c < 2 * dk) {
            if (j % per_key != 0 || group != 0) continue;
            ch = (c < dk ? kh * dk + c : key_dim + kh * dk + c - dk);
        } else {
            ch = 2 * key_dim + j * dv + v0 + c - 2 * dk;
        }
        for (int r = 0; r < m; ++r) *ring.at<bf16>((pos + r) % R, ch) = *mixed.at<bf16>(r, ch);
    }
    // 3. l2norm of q and k per row; q / sqrt(dk). Warp per (row, q or k).
    const int warp = tid >> 5, lane = tid & 31;
    for (int pair = warp; pair < 2 * m; pair += TILE_WARPS) {
        float* x = pair < m ? sm.q[pair] : sm.k[pair - m];
        float ss = 0.0f;
        for (int i = lane; i < dk; i += 32) ss = add_rn(ss, mul_rn(x[i], x[i]));
        const float r = rsqrt_ref(add_rn(warp_sum(ss), 1e-6f));
        const float root = sqrt_rn(static_cast<float>(dk));
        __syncwarp();
        for (int i = lane; i < dk; i += 32) x[i] = pair < m ? div_rn(mul_rn(x[i], r), root) : mul_rn(x[i], r);
    }
    __syncthreads();
    // 4. the recurrence, row by row, state in registers.
    const int v = tid % GDN_MAX_COLS, quarter = tid / GDN_MAX_COLS, i0 = quarter * GDN_PER_THREAD;
    const bool active = v < cols;
    float s[GDN_PER_THREAD];
    float* column = active ? state.at<float>(j, (v0 + v) * dk + i0) : nullptr;
    if (active) {
#pragma unroll
        for (int i = 0; i < GDN_PER_THREAD; i += 4) {
            const float4 f = *reinterpret_cast<const float4*>(column + i);
            s[i] = f.x, s[i + 1] = f.y, s[i + 2] = f.z, s[i + 3] = f.w;
        }
    }
    for (int r = 0; r < m; ++r) {
        float mem = 0.0f;
        if (active) {
#pragma unroll
            for (int i = 0; i < GDN_PER_THREAD; ++i) {
                s[i] = mul_rn(s[i], sm.decay[r]);
                mem = add_rn(mem, mul_rn(s[i], sm.k[r][i0 + i]));
            }
            sm.part[quarter][v] = mem;
        }
        __syncthreads();
        float o = 0.0f;
        if (active) {
            float total = sm.part[0][v];
            for (int q = 1; q < GDN_QUARTERS; ++q) total = add_rn(total, sm.part[q][v]);
            const float delta = mul_rn(sub_rn(sm.v[r][v], total), sm.beta[r]);
#pragma unroll
            for (int i = 0; i < GDN_PER_THREAD; ++i) {
                s[i] = add_rn(s[i], mul_rn(sm.k[r][i0 + i], delta));
                o = add_rn(o, mul_rn(s[i], sm.q[r][i0 + i]));
            }
        }
        __syncthreads();  // every thread has read part[.][v]
        if (active) sm.part[quarter][v] = o;
        __syncthreads();
        if (active && quarter == 0) {
            float total = sm.part[0][v];
            for (int q = 1; q < GDN_QUARTERS; ++q) total = add_rn(total, sm.part[q][v]);
            *out.at<bf16>(r, j * dv + v0 + v) = to_bf16(total);
        }
        __syncthreads();
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < GDN_PER_THREAD; i += 4)
            *reinterpret_cast<float4*>(column + i) = make_float4(s[i], s[i + 1], s[i + 2], s[i + 3]);
    }
}

}  // namespace mk
