// Split-KV attention decode tiles (docs/ISA.md "Other ops"): ATTN_SCORES and ATTN_PV run one tile per
// (KV head, partition) for the group of query heads sharing that KV head, ATTN_MERGE one tile per query
// head. Row m of the pass attends to keys [0, position + m] cut into P partitions by
// plan.partition_bounds, so a row's partitioning depends on its own length only.
#pragma once

#include "common.cuh"

namespace mk {

constexpr int ATTN_MAX_GROUP = 8;    // query heads per KV head (Qwen3.5: 6)
constexpr int ATTN_HEAD_DIM = 256;   // the tiles are specialised to head_dim 256: a lane holds 8 dims
constexpr int ATTN_KEY_CHUNK = 64;   // keys whose probabilities ATTN_PV stages in shared memory at once

__device__ __forceinline__ void partition_bounds(int length, int p, int parts, int& lo, int& hi) {
    lo = static_cast<int>(static_cast<long long>(p) * length / parts);
    hi = static_cast<int>(static_cast<long long>(p + 1) * length / parts);
}

// 8 consecutive bf16 (16 bytes) as floats.
__device__ __forceinline__ void load8(const bf16* p, float (&f)[8]) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

// Scores bf16(bf16(q . k) * scale) of the group's heads for the partition's keys -> scores rows
// (head m-major: head * M + row), then (max, sum exp(s - max)) per head -> stats columns 2p, 2p + 1.
__device__ inline void attn_scores_tile(const Ctx& ctx, const Word& w, int tile) {
    const int heads = w.p(0), kv_heads = w.p(1), hd = w.p(2), parts = w.p(3);
    const float scale = w.pf(4);
    const int group = heads / kv_heads, kv = tile / parts, part = tile % parts, m = w.rows();
    const Buffer q = ctx.buffer(w.buf_in()), keys = ctx.buffer(w.buf_aux0());
    const Buffer scores = ctx.buffer(w.buf_out()), stats = ctx.buffer(w.buf_aux1());
    const int pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int row = 0; row < m; ++row) {
        int lo, hi;
        partition_bounds(pos + row + 1, part, parts, lo, hi);
        float qf[ATTN_MAX_GROUP][8];
        for (int h = 0; h < group; ++h) load8(q.at<bf16>(row, (kv * group + h) * hd + 8 * lane), qf[h]);
        for (int t = lo + warp; t < hi; t += TILE_WARPS) {
            float kf[8];
            load8(keys.at<bf16>(t, kv * hd + 8 * lane), kf);
            for (int h = 0; h < group; ++h) {
                float d = mul_rn(qf[h][0], kf[0]);
#pragma unroll
                for (int i = 1; i < 8; ++i) d = add_rn(d, mul_rn(qf[h][i], kf[i]));
                d = warp_sum(d);
                if (lane == 0)
                    *scores.at<bf16>((kv * group + h) * m + row, t) = to_bf16(mul_rn(round_bf16(d), scale));
            }
        }
        __syncthreads();  // the partition's scores are written (and visible to the block)
        if (warp < group) {
            const int srow = (kv * group + warp) * m + row;
            float mx = neg_inf();
            for (int t = lo + lane; t < hi; t += 32) mx = fmaxf(mx, bf(*scores.at<bf16>(srow, t)));
            mx = warp_max(mx);
            float sum = 0.0f;
            for (int t = lo + lane; t < hi; t += 32) sum = add_rn(sum, expf(sub_rn(bf(*scores.at<bf16>(srow, t)), mx)));
            sum = warp_sum(sum);
            if (lane == 0) {
                *stats.at<float>(srow, 2 * part) = mx;
                *stats.at<float>(srow, 2 * part + 1) = sum;
            }
        }
        __syncthreads();
    }
}

// The global (max, sum) of one score row from its P partition statistics, partitions added in order.
__device__ inline void combined_stats(const float* st, int parts, float& mx, float& total) {
    mx = neg_inf();
    for (int p = 0; p < parts; ++p) mx = fmaxf(mx, st[2 * p]);
    total = 0.0f;
    for (int p = 0; p < parts; ++p)
        if (st[2 * p] > neg_inf()) total = add_rn(total, mul_rn(st[2 * p + 1], expf(sub_rn(st[2 * p], mx))));
}

// P = bf16(exp(s - max) / sum) for the partition's keys; fp32 P.V -> partial rows, columns [p hd, (p + 1) hd).
__device__ inline void attn_pv_tile(const Ctx& ctx, const Word& w, int tile) {
    __shared__ float prob[ATTN_MAX_GROUP][ATTN_KEY_CHUNK];
    __shared__ float row_max[ATTN_MAX_GROUP], row_sum[ATTN_MAX_GROUP];
    const int heads = w.p(0), kv_heads = w.p(1), hd = w.p(2), parts = w.p(3);
    const int group = heads / kv_heads, kv = tile / parts, part = tile % parts, m = w.rows();
    const Buffer scores = ctx.buffer(w.buf_in()), values = ctx.buffer(w.buf_aux0());
    const Buffer stats = ctx.buffer(w.buf_aux1()), partial = ctx.buffer(w.buf_out());
    const int pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int d = threadIdx.x % ATTN_HEAD_DIM, first_head = threadIdx.x / ATTN_HEAD_DIM;
    constexpr int HEAD_STEP = TILE_THREADS / ATTN_HEAD_DIM;
    for (int row = 0; row < m; ++row) {
        int lo, hi;
        partition_bounds(pos + row + 1, part, parts, lo, hi);
        if (threadIdx.x < group) {
            float mx, total;
            combined_stats(stats.at<float>((kv * group + threadIdx.x) * m + row, 0), parts, mx, total);
            row_max[threadIdx.x] = mx, row_sum[threadIdx.x] = total;
        }
        float acc[ATTN_MAX_GROUP / HEAD_STEP];
        for (int i = 0; i < ATTN_MAX_GROUP / HEAD_STEP; ++i) acc[i] = 0.0f;
        for (int c0 = lo; c0 < hi; c0 += ATTN_KEY_CHUNK) {
            __syncthreads();  // row_max/row_sum written; the previous chunk's probabilities consumed
            for (int i = threadIdx.x; i < group * ATTN_KEY_CHUNK; i += TILE_THREADS) {
                const int h = i / ATTN_KEY_CHUNK, t = c0 + i % ATTN_KEY_CHUNK;
                if (t < hi) {
                    const float s = bf(*scores.at<bf16>((kv * group + h) * m + row, t));
                    prob[h][i % ATTN_KEY_CHUNK] = round_bf16(div_rn(expf(sub_rn(s, row_max[h])), row_sum[h]));
                }
            }
            __syncthreads();
            const int count = min(ATTN_KEY_CHUNK, hi - c0);
            for (int t = 0; t < count; ++t) {
                const float vv = bf(*values.at<bf16>(c0 + t, kv * hd + d));
                for (int h = first_head, i = 0; h < group; h += HEAD_STEP, ++i) acc[i] = add_rn(acc[i], mul_rn(prob[h][t], vv));
            }
        }
        for (int h = first_head, i = 0; h < group; h += HEAD_STEP, ++i)
            *partial.at<float>((kv * group + h) * m + row, part * hd + d) = acc[i];
        __syncthreads();
    }
}

// Head h: the P partition outputs added in order -> bf16 o; out = bf16(o * bf16(sigmoid(gate))).
__device__ inline void attn_merge_tile(const Ctx& ctx, const Word& w, int tile) {
    const int hd = w.p(1), parts = w.p(2), m = w.rows(), h = tile;
    const Buffer partial = ctx.buffer(w.buf_in()), gate = ctx.buffer(w.buf_aux0()), out = ctx.buffer(w.buf_out());
    for (int i = threadIdx.x; i < m * hd; i += TILE_THREADS) {
        const int row = i / hd, d = i % hd;
        const float* src = partial.at<float>(h * m + row, d);
        float o = src[0];
        for (int p = 1; p < parts; ++p) o = add_rn(o, src[p * hd]);
        const float g = round_bf16(sigmoid_ref(bf(*gate.at<bf16>(row, h * hd + d))));
        *out.at<bf16>(row, h * hd + d) = to_bf16(mul_rn(round_bf16(o), g));
    }
}

}  // namespace mk
