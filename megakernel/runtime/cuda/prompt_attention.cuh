// ATTN_CAUSAL on tensor cores (docs/ISA.md "Prompt programs"; the prompt path's attention, NUMERICS.md): tile
// (KV head kv, CAUSAL_ROWS query rows [q0, q1) of the chunk), the longest rows' tiles first (tiling.query_tile);
// one warp per query head of the group, its 16 rows one m16 fragment. Row i attends to keys [0, pos + i + 1).
//
// The keys stream through shared memory in tiles of CAUSAL_KEY_TILE from key 0 (two slots, async copies), read
// once per tile for the whole group; the values likewise in the second pass.
//   pass 1: r = bf16(q.k) (q.k by mma.sync over the 256 dims), masked past the row's length; each key tile's
//           (max, sum of exp(s - max)) folded into the row's running (m, l) in key order
//           (ops.online_stats: m' = max(m, m_t), l' = l exp(m - m') + l_t exp(m_t - m'));
//   pass 2: the scores again, P = bf16(exp(s - m) x (1 / l)) (0 past the row's length) as the A operand of P.V
//           by mma.sync over the tile's keys, fp32 over all of the row's keys; then bf16(bf16(o) x
//           bf16(sigmoid(gate))).
// The reference's s is bf16(bf16(q.k) x scale); the scale is 256^-0.5 = 2^-4 (the tiles are specialised to
// head_dim 256), so s = r x scale exactly and the statistics are kept in r's units (exp(s - m) = exp((r - m_r) x
// scale), the same argument); the scores round to bf16 two by two; only a tile reaching past its first row's
// length masks; P multiplies by the row's 1 / l where a division costs ten instructions and a branch (D72: of a
// warp's 2,788 instructions a key tile, 2,180 were this scalar work, SASS count). The rounding points are the
// reference's; the reciprocal and the sums (q.k, a tile's sum, P.V, run in the tensor cores' and the quad
// shuffles' order) are not NumPy's to the last bit: the per-word GPU test compares within the bf16 tolerance.
// (exp2 with the scale folded, one MUFU.EX2 for expf's eight instructions, failed that comparison on the CPU:
// its argument's rounding moved 0.16 % of the outputs beyond 2 ulps, the test allowing 0.1 %, D72.) A row's
// results depend on its own length only (an extra key tile past it folds (-inf, 0) and adds exact zeros), so
// any chunking on 64-row boundaries gives the same bits. Written without a GPU (D69).
#pragma once

#include "attention.cuh"  // ldmatrix, copy_async16_or_zero, ATTN_ROW_BYTES, ATTN_HEAD_DIM, ATTN_MAX_GROUP
#include "prompt_ops.cuh"

namespace mk {

constexpr int CAUSAL_KEY_TILE = 64;                      // plan.PROMPT_KEY_TILE (the word's p3)
constexpr int CAUSAL_ROWS = 16;                          // plan.PROMPT_ATTN_ROWS: one m16 fragment a head
constexpr int CAUSAL_THREADS = 32 * ATTN_MAX_GROUP;     // the bound; launched with 32 x the group's heads
constexpr int CAUSAL_N_TILES = CAUSAL_KEY_TILE / 8;     // a key tile's 8-key n-tiles (q.k)
constexpr int CAUSAL_D_TILES = ATTN_HEAD_DIM / 8;       // a head's 8-dim n-tiles (P.V)
constexpr int CAUSAL_Q_BYTES = ATTN_MAX_GROUP * CAUSAL_ROWS * ATTN_ROW_BYTES;
constexpr int CAUSAL_KEYS_BYTES = CAUSAL_KEY_TILE * ATTN_ROW_BYTES;
// Dynamic shared memory: the group's query rows, two slots of a key tile's keys, two of its values
// (megakernel/runtime/cuda_build.py prompt_word_smem).
constexpr int CAUSAL_SMEM = 202752;
static_assert(CAUSAL_SMEM == CAUSAL_Q_BYTES + 4 * CAUSAL_KEYS_BYTES, "CAUSAL_SMEM");

__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const u32*>(&v);
}

// a and b rounded to bf16 by one paired conversion (the same bits as two round_bf16)
__device__ __forceinline__ void round_bf16_pair(float& a, float& b) {
    const u32 v = pack_bf16x2(a, b);
    a = __uint_as_float(v << 16), b = __uint_as_float(v & 0xFFFF0000u);
}

__device__ inline void attn_causal_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    const int kv_heads = w.p(1), group = w.p(0) / kv_heads;
    const float scale = w.pf(4);
    const int r = chunk_rows_now(ctx, w), pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int query_tiles = (w.chunk_rows() + w.tile_rows() - 1) / w.tile_rows();
    const int kv = tile % kv_heads, q0 = (query_tiles - 1 - tile / kv_heads) * w.tile_rows();
    const int q1 = min(r, q0 + w.tile_rows());
    if (q0 >= q1) return;  // past this chunk's rows
    const Buffer q_in = ctx.buffer(w.buf_in()), keys = ctx.buffer(w.buf_aux0()), values = ctx.buffer(w.buf_aux1());
    const Buffer gate = ctx.buffer(w.buf_aux2()), out = ctx.buffer(w.buf_out());
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const u32 qs = smem_addr(smem), ks = qs + CAUSAL_Q_BYTES, vs = ks + 2 * CAUSAL_KEYS_BYTES;
    // the group's query rows: head h's rows at h x CAUSAL_ROWS, rows past q1 zeros
    for (int i = threadIdx.x; i < group * CAUSAL_ROWS * 32; i += blockDim.x) {
        const int row = i >> 5, piece = i & 31, qi = q0 + row % CAUSAL_ROWS, h = kv * group + row / CAUSAL_ROWS;
        copy_async16_or_zero(qs + row * ATTN_ROW_BYTES + 16 * piece,
                             q_in.at<bf16>(qi < q1 ? qi : q0, h * ATTN_HEAD_DIM + 8 * piece), qi < q1);
    }
    copies_commit();
    // key tile kt of `cache` into slot kt & 1 of `slots`; keys past the last row's length are zeros
    const int length_max = pos + q1, tiles = (length_max + CAUSAL_KEY_TILE - 1) / CAUSAL_KEY_TILE;
    const auto stage = [&](const Buffer& cache, u32 slots, int kt) {
        const u32 slot = slots + (kt & 1) * CAUSAL_KEYS_BYTES;
        for (int i = threadIdx.x; i < CAUSAL_KEY_TILE * 32; i += blockDim.x) {
            const int row = i >> 5, piece = i & 31, key = kt * CAUSAL_KEY_TILE + row;
            copy_async16_or_zero(slot + row * ATTN_ROW_BYTES + 16 * piece,
                                 cache.at<bf16>(key < length_max ? key : 0, kv * ATTN_HEAD_DIM + 8 * piece),
                                 key < length_max);
        }
    };
    // this lane's rows of the warp's fragment: g (c0, c1) and g + 8 (c2, c3); their lengths
    const int length[2] = {pos + q0 + g + 1, pos + q0 + g + 9};
    // ldmatrix addresses: the fragment's query rows (a0..a3), a key n-tile pair's B fragments (keys 8 (j >> 1) +
    // lane & 7, dims + 8 (j & 1), j = lane >> 3), a value k-step's transposed B fragments (keys 8 (j & 1) +
    // lane & 7, dims + 8 (j >> 1))
    const u32 qa = qs + (warp * CAUSAL_ROWS + (lane & 15)) * ATTN_ROW_BYTES + 16 * (lane >> 4);
    const u32 kb = (8 * (lane >> 4) + (lane & 7)) * ATTN_ROW_BYTES + 16 * ((lane >> 3) & 1);
    const u32 vb = (8 * ((lane >> 3) & 1) + (lane & 7)) * ATTN_ROW_BYTES + 16 * (lane >> 4);
    // s[nt][e]: row g + 8 (e >> 1), key kt x 64 + 8 nt + 2 t4 + (e & 1): r = bf16(q.k), or -inf past the row's
    // length (only a tile past the tile's first row's length masks: the same test for every warp)
    const auto scores = [&](float (&s)[CAUSAL_N_TILES][4], u32 slot, int kt) {
#pragma unroll
        for (int nt = 0; nt < CAUSAL_N_TILES; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int step = 0; step < ATTN_HEAD_DIM / 16; ++step) {
            u32 a[4];
            ldmatrix_x4(a, qa + 32 * step);
#pragma unroll
            for (int np = 0; np < CAUSAL_N_TILES / 2; ++np) {
                u32 b[4];
                ldmatrix_x4(b, slot + kb + 16 * np * ATTN_ROW_BYTES + 32 * step);
                mma_16816<false>(s[2 * np], a, {b[0], b[1]});
                mma_16816<false>(s[2 * np + 1], a, {b[2], b[3]});
            }
        }
#pragma unroll
        for (int nt = 0; nt < CAUSAL_N_TILES; ++nt) {
            round_bf16_pair(s[nt][0], s[nt][1]);
            round_bf16_pair(s[nt][2], s[nt][3]);
        }
        if ((kt + 1) * CAUSAL_KEY_TILE <= pos + q0 + 1) return;  // every key of the tile is in every row's length
#pragma unroll
        for (int nt = 0; nt < CAUSAL_N_TILES; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (kt * CAUSAL_KEY_TILE + 8 * nt + 2 * t4 + (e & 1) >= length[e >> 1]) s[nt][e] = neg_inf();
    };
    // exp(s - m) from r and m in r's units: (r - m) x scale is s - m exactly (exp(-inf) = 0)
    const auto exp_of = [&](float r, float m) { return expf(mul_rn(sub_rn(r, m), scale)); };
    const auto quad_max = [](float v) {
        v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
        return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
    };
    const auto quad_sum = [](float v) {
        v = add_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
        return add_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, 2));
    };

    // pass 1: the rows' softmax statistics (m in r's units), key tile by key tile
    float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.0f, 0.0f};
    stage(keys, ks, 0);
    copies_commit();
    for (int kt = 0; kt < tiles; ++kt) {
        if (kt + 1 < tiles) stage(keys, ks, kt + 1);
        copies_commit();  // (empty past the last tile)
        copies_wait(1);   // the queries and tile kt have landed
        __syncthreads();
        float s[CAUSAL_N_TILES][4];
        scores(s, ks + (kt & 1) * CAUSAL_KEYS_BYTES, kt);
#pragma unroll
        for (int sel = 0; sel < 2; ++sel) {
            float tm = neg_inf();
#pragma unroll
            for (int nt = 0; nt < CAUSAL_N_TILES; ++nt) tm = fmaxf(tm, fmaxf(s[nt][2 * sel], s[nt][2 * sel + 1]));
            tm = quad_max(tm);
            float ts = 0.0f;
#pragma unroll
            for (int nt = 0; nt < CAUSAL_N_TILES; ++nt)
#pragma unroll
                for (int e = 2 * sel; e < 2 * sel + 2; ++e) ts = add_rn(ts, exp_of(s[nt][e], tm));
            ts = quad_sum(ts);
            if (tm > neg_inf()) {  // a tile past the row's keys is not one of its tiles
                const float next = fmaxf(m[sel], tm);
                l[sel] = add_rn(mul_rn(l[sel], exp_of(m[sel], next)), mul_rn(ts, exp_of(tm, next)));
                m[sel] = next;
            }
        }
        __syncthreads();  // slot kt & 1 free for tile kt + 2
    }

    // pass 2: P.V over the same tiles
    float o[CAUSAL_D_TILES][4];
#pragma unroll
    for (int dt = 0; dt < CAUSAL_D_TILES; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    const float inverse[2] = {div_rn(1.0f, l[0]), div_rn(1.0f, l[1])};
    const auto p_pair = [&](float r0, float r1, int sel) {  // two keys' P, rounded to bf16 by the packing
        return pack_bf16x2(mul_rn(exp_of(r0, m[sel]), inverse[sel]), mul_rn(exp_of(r1, m[sel]), inverse[sel]));
    };
    stage(keys, ks, 0);
    stage(values, vs, 0);
    copies_commit();
    for (int kt = 0; kt < tiles; ++kt) {
        if (kt + 1 < tiles) {
            stage(keys, ks, kt + 1);
            stage(values, vs, kt + 1);
        }
        copies_commit();
        copies_wait(1);
        __syncthreads();
        float s[CAUSAL_N_TILES][4];
        scores(s, ks + (kt & 1) * CAUSAL_KEYS_BYTES, kt);
        const u32 vslot = vs + (kt & 1) * CAUSAL_KEYS_BYTES + vb;
#pragma unroll
        for (int j = 0; j < CAUSAL_KEY_TILE / 16; ++j) {  // keys 16 j .. 16 j + 15 of the tile: one k-step
            const u32 pa[4] = {p_pair(s[2 * j][0], s[2 * j][1], 0), p_pair(s[2 * j][2], s[2 * j][3], 1),
                               p_pair(s[2 * j + 1][0], s[2 * j + 1][1], 0), p_pair(s[2 * j + 1][2], s[2 * j + 1][3], 1)};
#pragma unroll
            for (int dp = 0; dp < CAUSAL_D_TILES / 2; ++dp) {
                u32 b[4];
                ldmatrix_x4_trans(b, vslot + 16 * j * ATTN_ROW_BYTES + 32 * dp);
                mma_16816<false>(o[2 * dp], pa, {b[0], b[1]});
                mma_16816<false>(o[2 * dp + 1], pa, {b[2], b[3]});
            }
        }
        __syncthreads();
    }

    // the gated output: o[dt][e] is row g + 8 (e >> 1), dim 8 dt + 2 t4 + (e & 1) of head kv x group + warp
#pragma unroll
    for (int sel = 0; sel < 2; ++sel) {
        const int i = q0 + g + 8 * sel;
        if (i >= q1) continue;
#pragma unroll
        for (int dt = 0; dt < CAUSAL_D_TILES; ++dt) {
            const int c = (kv * group + warp) * ATTN_HEAD_DIM + 8 * dt + 2 * t4;
            const __nv_bfloat162 gv = *reinterpret_cast<const __nv_bfloat162*>(gate.at<bf16>(i, c));
            const float g0 = round_bf16(sigmoid_ref(__low2float(gv))), g1 = round_bf16(sigmoid_ref(__high2float(gv)));
            *reinterpret_cast<u32*>(out.at<bf16>(i, c)) =
                pack_bf16x2(mul_rn(round_bf16(o[dt][2 * sel]), g0), mul_rn(round_bf16(o[dt][2 * sel + 1]), g1));
        }
    }
}

}  // namespace mk
