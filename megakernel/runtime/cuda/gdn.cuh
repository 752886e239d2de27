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

constexpr int GDN_MAX_FOLD = 2 * MAX_ROWS;  // a pass's rows and the rows a speculative pass left pending

struct GdnSmem {
    float q[GDN_MAX_FOLD][GDN_DK];
    float k[GDN_MAX_FOLD][GDN_DK];
    float v[GDN_MAX_FOLD][GDN_MAX_COLS];
    float beta[GDN_MAX_FOLD];
    float decay[GDN_MAX_FOLD];  // exp(g)
    float part[GDN_QUARTERS][GDN_MAX_COLS];
};

// The raw input of channel ch at position p: from the conv ring for positions before the pass's
// first row `pos`, from the pass's own projection rows after.
__device__ __forceinline__ float raw_input(const Buffer& mixed, const Buffer& ring, int ch, int pos, int p, int R) {
    return p < pos ? bf(*ring.at<bf16>((p % R + R) % R, ch)) : bf(*mixed.at<bf16>(p - pos, ch));
}

// Causal conv of one channel for the `count` rows at positions start .. start + count - 1 (window from
// start - K + 1): out[r] = bf16(silu(bf16(sum_i window[r + i] * tap[i]))), taps added in order.
__device__ inline void conv_channel(const Buffer& mixed, const Buffer& ring, const Weight& taps, int ch, int pos,
                                    int start, int count, int K, int R, float* out, int out_stride) {
    float window[GDN_MAX_KERNEL + GDN_MAX_FOLD];
    for (int i = 0; i < K - 1 + count; ++i) window[i] = raw_input(mixed, ring, ch, pos, start - K + 1 + i, R);
    for (int r = 0; r < count; ++r) {
        float acc = mul_rn(window[r], taps.value(static_cast<size_t>(ch) * K));
        for (int i = 1; i < K; ++i) acc = add_rn(acc, mul_rn(window[r + i], taps.value(static_cast<size_t>(ch) * K + i)));
        out[r * out_stride] = round_bf16(silu_ref(round_bf16(acc)));
    }
}

__device__ __forceinline__ void store_state(float* column, const float (&s)[GDN_PER_THREAD]) {
#pragma unroll
    for (int i = 0; i < GDN_PER_THREAD; i += 4)
        *reinterpret_cast<float4*>(column + i) = make_float4(s[i], s[i + 1], s[i + 2], s[i + 3]);
}

// Value head j, a group of its value columns: the n rows a speculative pass left pending (ctrl; positions
// pos - n .. pos - 1, raw inputs from the conv and gate rings, no outputs), then the pass's m rows. The
// state is held in registers across the rows (read and written once a pass); the one stored is the state
// after the pass's rows, or after the pending rows only when the pass is speculative (docs/ISA.md
// "Speculative passes").
__device__ inline void gdn_tile(const Ctx& ctx, const Word& w, int tile, GdnSmem& sm) {
    const Weight taps = ctx.weight(w.p(0)), a_log = ctx.weight(w.p(1)), dt_bias = ctx.weight(w.p(2));
    const int hk = w.p(3), hv = w.p(4), dk = w.p(5), dv = w.p(6), K = w.p(7), R = w.p(8), groups = w.p(9);
    const int m = w.rows(), j = tile / groups, group = tile % groups, cols = dv / groups, v0 = group * cols;
    const int per_key = hv / hk, kh = j / per_key, key_dim = hk * dk, b_col = 2 * key_dim + 2 * hv * dv + j;
    const Buffer mixed = ctx.buffer(w.buf_in()), out = ctx.buffer(w.buf_out());
    const Buffer state = ctx.buffer(w.buf_aux0()), ring = ctx.buffer(w.buf_aux1());
    const int* control = ctx.control() + w.ctrl_base();
    const int pos = control[CTRL_POSITION], pending = control[CTRL_PENDING];
    const bool speculative = control[CTRL_SPECULATIVE] != 0;
    const int first = pos - pending, count = pending + m;
    const int tid = threadIdx.x;

    // 1. conv + silu of q, k (key head kh) and this tile's v channels, rows first .. pos + m - 1.
    for (int c = tid; c < 2 * dk + cols; c += TILE_THREADS) {
        if (c < dk) conv_channel(mixed, ring, taps, kh * dk + c, pos, first, count, K, R, &sm.q[0][c], GDN_DK);
        else if (c < 2 * dk) conv_channel(mixed, ring, taps, key_dim + kh * dk + c - dk, pos, first, count, K, R, &sm.k[0][c - dk], GDN_DK);
        else conv_channel(mixed, ring, taps, 2 * key_dim + j * dv + v0 + c - 2 * dk, pos, first, count, K, R, &sm.v[0][c - 2 * dk], GDN_MAX_COLS);
    }
    // gates: beta = bf16(sigmoid(b)), g = -exp(A_log) softplus(a + dt_bias); the state decays by exp(g).
    // b and a of pending rows from the gate ring, of the pass's rows from the projection.
    if (tid < count) {
        const int p = first + tid;
        const Buffer gates = ctx.buffer(w.buf_aux2());
        const float b = p < pos ? bf(*gates.at<bf16>(p % R, j)) : bf(*mixed.at<bf16>(p - pos, b_col));
        const float a = p < pos ? bf(*gates.at<bf16>(p % R, hv + j)) : bf(*mixed.at<bf16>(p - pos, b_col + hv));
        sm.beta[tid] = round_bf16(sigmoid_ref(b));
        const float g = mul_rn(-expf(a_log.value(j)), softplus_ref(add_rn(a, dt_bias.value(j))));
        sm.decay[tid] = expf(g);
    }
    __syncthreads();
    // 2. the pass's raw inputs -> ring rows (pos + r) mod R (after every read of this tile; other tiles
    // read only rows before pos, which the R-row rings keep apart). q/k channels by the key head's first
    // value head, column group 0; a speculative pass's gates by column group 0.
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
    if (speculative && group == 0 && tid < m) {
        const Buffer gates = ctx.buffer(w.buf_aux2());
        *gates.at<bf16>((pos + tid) % R, j) = *mixed.at<bf16>(tid, b_col);
        *gates.at<bf16>((pos + tid) % R, hv + j) = *mixed.at<bf16>(tid, b_col + hv);
    }
    // 3. l2norm of q and k per row; q / sqrt(dk). Warp per (row, q or k).
    const int warp = tid >> 5, lane = tid & 31;
    for (int pair = warp; pair < 2 * count; pair += TILE_WARPS) {
        float* x = pair < count ? sm.q[pair] : sm.k[pair - count];
        float ss = 0.0f;
        for (int i = lane; i < dk; i += 32) ss = add_rn(ss, mul_rn(x[i], x[i]));
        const float r = rsqrt_ref(add_rn(warp_sum(ss), 1e-6f));
        const float root = sqrt_rn(static_cast<float>(dk));
        __syncwarp();
        for (int i = lane; i < dk; i += 32) x[i] = pair < count ? div_rn(mul_rn(x[i], r), root) : mul_rn(x[i], r);
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
    for (int r = 0; r < count; ++r) {
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
        if (r < pending) {  // a kept row of the last speculative pass: no output
            if (r == pending - 1 && speculative && active) store_state(column, s);
            continue;
        }
        if (active) sm.part[quarter][v] = o;
        __syncthreads();
        if (active && quarter == 0) {
            float total = sm.part[0][v];
            for (int q = 1; q < GDN_QUARTERS; ++q) total = add_rn(total, sm.part[q][v]);
            *out.at<bf16>(r - pending, j * dv + v0 + v) = to_bf16(total);
        }
        __syncthreads();
    }
    if (!speculative && active) store_state(column, s);
}

}  // namespace mk
