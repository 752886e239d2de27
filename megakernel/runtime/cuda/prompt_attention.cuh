// ATTN_CAUSAL on Hopper's warpgroup products (docs/ISA.md "Prompt programs"; the prompt path's attention,
// NUMERICS.md): tile (query head h, CAUSAL_ROWS query rows [q0, q1) of the chunk), the longest rows' tiles first
// (tiling.query_tile); two warpgroups of 64 rows each, a warp 16 of them. Row i attends to keys [0, pos + i + 1).
//
// The keys stream through shared memory in tiles of CAUSAL_KEY_TILE from key 0 (two slots, async copies), read
// once per tile for the block's 128 rows; the values likewise in the second pass. Queries, keys and values sit in
// wgmma's no-swizzle core-matrix layout (core_offset: 8 rows x 16 bytes a core matrix, a row's 32 pieces 128 bytes
// apart), which a staging thread's 16-byte copy fills at 16 x its index.
//   pass 1: r = bf16(q.k) (q.k by wgmma m64n64k16 over the 256 dims, both operands from shared memory), masked
//           past the row's length; each key tile's (max, sum of exp(s - max)) folded into the row's running
//           (m, l) in key order (ops.online_stats: m' = max(m, m_t), l' = l exp(m - m') + l_t exp(m_t - m'));
//   pass 2: the scores again, P = bf16(exp(s - m) x (1 / l)) (0 past the row's length) as the register A operand
//           of P.V by wgmma m64n128k16 (the values MN-major), fp32 over all of the row's keys; then
//           bf16(bf16(o) x bf16(sigmoid(gate))).
// The reference's s is bf16(bf16(q.k) x scale); the scale is 256^-0.5 = 2^-4 (the tiles are specialised to
// head_dim 256), so s = r x scale exactly and the statistics are kept in r's units (exp(s - m) = exp((r - m_r) x
// scale), the same argument); the scores round to bf16 two by two; only a tile reaching past its warpgroup's first
// row's length masks; P multiplies by the row's 1 / l (D72). The rounding points are the reference's; the
// reciprocal and the sums (q.k, a tile's sum, P.V, run in the tensor cores' and the quad shuffles' order) are not
// NumPy's to the last bit: the per-word GPU test compares within the bf16 tolerance. (exp2 with the scale folded
// failed that comparison on the CPU, D72.) A row's results depend on its own length only (a warpgroup skips the
// key tiles past its longest row, which would fold (-inf, 0) and add exact zeros), so any chunking on 64-row
// boundaries gives the same bits. The mma.sync form it replaces ran 6 warps an SM at 242 registers, latency-bound
// (tensor pipe 28 %, ncu: D75).
#pragma once

#include "attention.cuh"  // copy_async16_or_zero, ATTN_HEAD_DIM
#include "prompt_ops.cuh"
#include "wgmma.cuh"

namespace mk {

constexpr int CAUSAL_KEY_TILE = 64;                              // plan.PROMPT_KEY_TILE (the word's p3)
constexpr int CAUSAL_ROWS = 128;                                 // plan.PROMPT_ATTN_ROWS: two warpgroups' 64 rows
constexpr int CAUSAL_THREADS = 256;
constexpr int CAUSAL_N_TILES = CAUSAL_KEY_TILE / 8;             // a key tile's 8-key column groups (q.k)
constexpr int CAUSAL_ROW_BYTES = 2 * ATTN_HEAD_DIM;              // a row's 32 pieces of 16 bytes
constexpr int CAUSAL_GROUP_BYTES = 8 * CAUSAL_ROW_BYTES;         // 8 rows' core matrices
constexpr int CAUSAL_Q_BYTES = CAUSAL_ROWS * CAUSAL_ROW_BYTES;
constexpr int CAUSAL_KEYS_BYTES = CAUSAL_KEY_TILE * CAUSAL_ROW_BYTES;
// Dynamic shared memory: the tile's query rows, two slots of a key tile's keys, two of its values
// (megakernel/runtime/cuda_build.py prompt_word_smem).
constexpr int CAUSAL_SMEM = 196608;
static_assert(CAUSAL_SMEM == CAUSAL_Q_BYTES + 4 * CAUSAL_KEYS_BYTES, "CAUSAL_SMEM");
static_assert(ATTN_HEAD_DIM == 256, "the tiles are specialised to head_dim 256");

// a and b rounded to bf16 by one paired conversion (the same bits as two round_bf16)
__device__ __forceinline__ void round_bf16_pair(float& a, float& b) {
    const u32 v = bf16x2_rn(a, b);
    a = __uint_as_float(v << 16), b = __uint_as_float(v & 0xFFFF0000u);
}

// Staging index i (0 .. rows x 32) -> (row, piece): 8 consecutive threads take one piece of 8 consecutive rows,
// one core matrix's 128 bytes, so that the copy's destination is 16 i (core_offset) and its banks distinct.
__device__ __forceinline__ int staged_row(int i) { return 8 * (i >> 8) + (i & 7); }
__device__ __forceinline__ int staged_piece(int i) { return (i >> 3) & 31; }

__device__ inline void attn_causal_tile(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    const int heads = w.p(0), group = heads / w.p(1);
    const float scale = w.pf(4);
    const int r = chunk_rows_now(ctx, w), pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const int query_tiles = (w.chunk_rows() + w.tile_rows() - 1) / w.tile_rows();
    const int h = tile % heads, kv = h / group, q0 = (query_tiles - 1 - tile / heads) * w.tile_rows();
    const int q1 = min(r, q0 + w.tile_rows());
    if (q0 >= q1) return;  // past this chunk's rows
    const Buffer q_in = ctx.buffer(w.buf_in()), keys = ctx.buffer(w.buf_aux0()), values = ctx.buffer(w.buf_aux1());
    const Buffer gate = ctx.buffer(w.buf_aux2()), out = ctx.buffer(w.buf_out());
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2,
              t4 = lane & 3;
    const u32 qs = smem_addr(smem), ks = qs + CAUSAL_Q_BYTES, vs = ks + 2 * CAUSAL_KEYS_BYTES;
    // the tile's query rows, rows past q1 zeros
    for (int i = threadIdx.x; i < CAUSAL_ROWS * 32; i += CAUSAL_THREADS) {
        const int qi = q0 + staged_row(i);
        copy_async16_or_zero(qs + 16 * i, q_in.at<bf16>(qi < q1 ? qi : q0, h * ATTN_HEAD_DIM + 8 * staged_piece(i)),
                             qi < q1);
    }
    copies_commit();
    // key tile kt of `cache` into slot kt & 1 of `slots`; keys past the last row's length are zeros
    const int length_max = pos + q1, tiles = (length_max + CAUSAL_KEY_TILE - 1) / CAUSAL_KEY_TILE;
    const auto stage = [&](const Buffer& cache, u32 slots, int kt) {
        const u32 slot = slots + (kt & 1) * CAUSAL_KEYS_BYTES;
        for (int i = threadIdx.x; i < CAUSAL_KEY_TILE * 32; i += CAUSAL_THREADS) {
            const int key = kt * CAUSAL_KEY_TILE + staged_row(i);
            copy_async16_or_zero(slot + 16 * i,
                                 cache.at<bf16>(key < length_max ? key : 0, kv * ATTN_HEAD_DIM + 8 * staged_piece(i)),
                                 key < length_max);
        }
    };
    // this warpgroup's rows [row0, row0 + 64): busy if any is in the chunk; its key tiles: its longest row's
    const int row0 = q0 + 64 * wg;
    const bool busy = row0 < q1;
    const int own_tiles = min(tiles, (pos + row0 + 64 + CAUSAL_KEY_TILE - 1) / CAUSAL_KEY_TILE);
    // this lane's rows of the warp's 16: g (elements 0, 1) and g + 8 (2, 3); their lengths
    const int length[2] = {pos + row0 + 16 * warp + g + 1, pos + row0 + 16 * warp + g + 9};
    // s[4 nt + e]: row g + 8 (e >> 1), key kt x 64 + 8 nt + 2 t4 + (e & 1): r = bf16(q.k), or -inf past the row's
    // length (only a tile past the warpgroup's first row's length masks)
    const u32 q_rows = qs + 64 * wg * CAUSAL_ROW_BYTES;
    const auto scores = [&](float (&s)[4 * CAUSAL_N_TILES], u32 slot, int kt) {
        WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
#pragma unroll
        for (int step = 0; step < ATTN_HEAD_DIM / 16; ++step)  // dims 16 step ..: two 16-byte pieces, 256 bytes
            wgmma_ss_m64n64k16_bf16(s, smem_desc(q_rows + 256 * step, 128, CAUSAL_GROUP_BYTES),
                                    smem_desc(slot + 256 * step, 128, CAUSAL_GROUP_BYTES), step);
        WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
        wait_groups<0>();
        fence_all(s);
#pragma unroll
        for (int e = 0; e < 4 * CAUSAL_N_TILES; e += 2) round_bf16_pair(s[e], s[e + 1]);
        if ((kt + 1) * CAUSAL_KEY_TILE <= pos + row0 + 1) return;  // every key of the tile is in every row's length
#pragma unroll
        for (int nt = 0; nt < CAUSAL_N_TILES; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (kt * CAUSAL_KEY_TILE + 8 * nt + 2 * t4 + (e & 1) >= length[e >> 1]) s[4 * nt + e] = neg_inf();
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
        fence_proxy_async();
        __syncthreads();
        if (busy && kt < own_tiles) {
            float s[4 * CAUSAL_N_TILES];
            scores(s, ks + (kt & 1) * CAUSAL_KEYS_BYTES, kt);
#pragma unroll
            for (int sel = 0; sel < 2; ++sel) {
                float tm = neg_inf();
#pragma unroll
                for (int nt = 0; nt < CAUSAL_N_TILES; ++nt)
                    tm = fmaxf(tm, fmaxf(s[4 * nt + 2 * sel], s[4 * nt + 2 * sel + 1]));
                tm = quad_max(tm);
                float ts = 0.0f;
#pragma unroll
                for (int nt = 0; nt < CAUSAL_N_TILES; ++nt)
#pragma unroll
                    for (int e = 2 * sel; e < 2 * sel + 2; ++e) ts = add_rn(ts, exp_of(s[4 * nt + e], tm));
                ts = quad_sum(ts);
                if (tm > neg_inf()) {  // a tile past the row's keys is not one of its tiles
                    const float next = fmaxf(m[sel], tm);
                    l[sel] = add_rn(mul_rn(l[sel], exp_of(m[sel], next)), mul_rn(ts, exp_of(tm, next)));
                    m[sel] = next;
                }
            }
        }
        __syncthreads();  // slot kt & 1 free for tile kt + 2
    }

    // pass 2: P.V over the same tiles; o[c][4 j + e]: row g + 8 (e >> 1), dim 128 c + 8 j + 2 t4 + (e & 1)
    float o[2][64];
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int e = 0; e < 64; ++e) o[c][e] = 0.0f;
    const float inverse[2] = {div_rn(1.0f, l[0]), div_rn(1.0f, l[1])};
    const auto p_pair = [&](float r0, float r1, int sel) {  // two keys' P, rounded to bf16 by the packing
        return bf16x2_rn(mul_rn(exp_of(r0, m[sel]), inverse[sel]), mul_rn(exp_of(r1, m[sel]), inverse[sel]));
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
        fence_proxy_async();
        __syncthreads();
        if (busy && kt < own_tiles) {
            float s[4 * CAUSAL_N_TILES];
            scores(s, ks + (kt & 1) * CAUSAL_KEYS_BYTES, kt);
            u32 pa[CAUSAL_KEY_TILE / 16][4];  // keys 16 j .. 16 j + 15: one k-step's A fragment
#pragma unroll
            for (int j = 0; j < CAUSAL_KEY_TILE / 16; ++j) {
                pa[j][0] = p_pair(s[8 * j], s[8 * j + 1], 0), pa[j][1] = p_pair(s[8 * j + 2], s[8 * j + 3], 1);
                pa[j][2] = p_pair(s[8 * j + 4], s[8 * j + 5], 0), pa[j][3] = p_pair(s[8 * j + 6], s[8 * j + 7], 1);
            }
            // the values MN-major: (key, dim) at core_offset(key, dim / 8) + 2 (dim % 8): 8 keys a leading step
            // (CAUSAL_GROUP_BYTES), 8 dims a stride step (128 bytes)
            const u32 vslot = vs + (kt & 1) * CAUSAL_KEYS_BYTES;
            WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
#pragma unroll
            for (int j = 0; j < CAUSAL_KEY_TILE / 16; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {  // keys 16 j ..: two leading steps; dims 128 c ..: 16 stride steps
                    const u32 at = vslot + 2 * j * CAUSAL_GROUP_BYTES + 16 * c * 128;
                    wgmma_rs_m64n128k16_bf16_mn(o[c], pa[j], smem_desc(at, CAUSAL_GROUP_BYTES, 128), 1);
                }
            WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
            wait_groups<0>();
            fence_all(o[0]);
            fence_all(o[1]);
            fence_all(pa);
        }
        __syncthreads();
    }

    // the gated output of head h's rows
    if (!busy) return;
#pragma unroll
    for (int sel = 0; sel < 2; ++sel) {
        const int i = row0 + 16 * warp + g + 8 * sel;
        if (i >= q1) continue;
#pragma unroll
        for (int c = 0; c < 2; ++c)
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                const int col = h * ATTN_HEAD_DIM + 128 * c + 8 * j + 2 * t4;
                const __nv_bfloat162 gv = *reinterpret_cast<const __nv_bfloat162*>(gate.at<bf16>(i, col));
                const float g0 = round_bf16(sigmoid_ref(__low2float(gv)));
                const float g1 = round_bf16(sigmoid_ref(__high2float(gv)));
                const float y0 = mul_rn(round_bf16(o[c][4 * j + 2 * sel]), g0);
                const float y1 = mul_rn(round_bf16(o[c][4 * j + 2 * sel + 1]), g1);
                *reinterpret_cast<u32*>(out.at<bf16>(i, col)) = bf16x2_rn(y0, y1);
            }
    }
}

}  // namespace mk
