// The GEMV family's tiles (docs/ISA.md "GEMV family"): a tile computes one row group over one k-slice
// (prologue -> tensor-core GEMV -> split-K partials or epilogue); with split-K, the group's last slice to
// arrive adds its S partials in order and applies the epilogue (gemv_finish_last).
//
// Shared memory (dynamic): the fp32 results of the tile's rows (before them, the prologue's reduction
// scratch), the block scales, the prologue's input rows over the slice (bf16, or the f16 operand), then the
// weight ring (gemv.cuh) in whatever remains: the launch gives the tile as much as the device allows.
// Until the passes start, the ring's memory holds what the prologue staged (its inputs, by async copies).
#pragma once

#include "common.cuh"
#include "gemv.cuh"

namespace mk {

constexpr int MAX_TILE_ROWS = 256;  // NORM_GEMV_QKV row groups are one head (head_dim <= 256)
constexpr int Y_FLOATS = 2 * MAX_ROWS * MAX_TILE_ROWS;  // [half (gate, up)][row][output row]
// Bytes of dynamic shared memory before the input rows: Y_FLOATS + MAX_SLICE_BLOCKS floats, then the f16
// operand's exponents (MAX_ROWS x MAX_SLICE_BLOCKS bytes).
constexpr int GEMV_SMEM_FIXED = 19456;
static_assert(GEMV_SMEM_FIXED == 4 * (Y_FLOATS + MAX_SLICE_BLOCKS) + MAX_ROWS * MAX_SLICE_BLOCKS,
              "GEMV_SMEM_FIXED");
// The least weight ring: one k-block per warp, per byte of weight element (x 2 for bf16). The 8-row lm_head
// gets no more than that (its input rows take 80 KB); every M = 1 word gets at least three.
constexpr int GEMV_MIN_RING = 32768;
static_assert(GEMV_MIN_RING == TILE_WARPS * WARP_ROWS * K_BLOCK, "GEMV_MIN_RING");

// Bytes of dynamic shared memory before a GEMV tile's own (GemvSmem's base). The discrete build keeps its
// launch program there (kernels.cu: there, unlike a static array, it left tile_gemv, then capped at 64
// registers, without a spill); the megakernel, nothing.
#ifdef MK_DISCRETE_BUILD
constexpr int GEMV_SMEM_OFFSET = LAUNCH_PROGRAM_BYTES;
#else
constexpr int GEMV_SMEM_OFFSET = 0;
#endif

struct GemvSmem {
    u8* base;
    float* y;
    float* scales;
    signed char* x_p;  // the f16 operand's P per (row, k-block) (gemv.cuh f16_operand)
    bf16* x;
    __device__ explicit GemvSmem(u8* base)
        : base(base),
          y(reinterpret_cast<float*>(base)),
          scales(y + Y_FLOATS),
          x_p(reinterpret_cast<signed char*>(scales + MAX_SLICE_BLOCKS)),
          x(reinterpret_cast<bf16*>(x_p + MAX_ROWS * MAX_SLICE_BLOCKS)) {}
    __device__ float* y_at(int half, int row) const { return y + (half * MAX_ROWS + row) * MAX_TILE_ROWS; }
    // The weight ring: after `x_elems` input elements, 128-byte aligned, to the end of dynamic memory.
    __device__ u8* ring(int x_elems) const {
        const size_t used = reinterpret_cast<const u8*>(x + x_elems) - base;
        return base + ((used + 127) & ~static_cast<size_t>(127));
    }
    __device__ int ring_bytes(int x_elems) const {
        return static_cast<int>(dynamic_smem_bytes() - GEMV_SMEM_OFFSET - (ring(x_elems) - base));
    }
};

struct RowGroup {
    int index, r0, r1, segment, seg_r0;  // output rows [r0, r1) (GATE_UP: intermediate rows) of one segment
};

// Weight segment `seg` of a GEMV word: a weight-table entry, or (NORM_HEAD with FLAG_WORKING_VOCAB) the
// session's working-vocabulary head rows, bf16 without scales (megakernel/model/draft_vocab.py).
__device__ inline Weight gemv_weight(const Ctx& ctx, const Word& w, int seg) {
    if (!(w.flags() & FLAG_WORKING_VOCAB)) return ctx.weight(w.weight_first() + seg);
    const Buffer rows = ctx.buffer(w.buf_aux2());
    return Weight{rows.base, nullptr, rows.rows, rows.cols, DT_BF16, DT_NONE};
}

// One segment of n rows (NORM_GATE_UP: gate and up share the intermediate rows; the working-vocabulary
// head has no weight-table entry): its row groups follow from the word alone, no weight record is read
// (the megakernel computes them several times per tile).
__device__ inline bool single_segment(const Word& w) {
    return w.opcode() == OP_NORM_GATE_UP || w.weight_count() <= 1;
}

__device__ inline int segment_count(const Word& w) { return single_segment(w) ? 1 : w.weight_count(); }

__device__ inline int segment_rows(const Ctx& ctx, const Word& w, int seg) {
    return single_segment(w) ? w.n() : ctx.weight(w.weight_first() + seg).rows;
}

// Row groups: each segment's rows cut into tile_rows (the last may be short), numbered across segments;
// NORM_GATE_UP's cover the intermediate rows of gate and up together (compiler/tiling.py).
// A multi-segment word's row counts are read four records at a time, each batch's loads issued together:
// one dependent round trip a batch rather than one a segment at a tile's start (in_proj has four; D41).
// The record is read here, not through segment_rows, whose single-segment test compiled into more code.
__device__ inline int row_group_count(const Ctx& ctx, const Word& w) {
    const int tr = w.tile_rows();
    if (single_segment(w)) return (w.n() + tr - 1) / tr;
    constexpr int BATCH = 4;
    const int segments = w.weight_count();
    int count = 0;
    for (int s0 = 0; s0 < segments; s0 += BATCH) {
        int rows[BATCH];
#pragma unroll
        for (int i = 0; i < BATCH; ++i) rows[i] = s0 + i < segments ? ctx.weight(w.weight_first() + s0 + i).rows : 0;
#pragma unroll
        for (int i = 0; i < BATCH; ++i) count += (rows[i] + tr - 1) / tr;
    }
    return count;
}

__device__ inline RowGroup row_group(const Ctx& ctx, const Word& w, int g) {
    const int tr = w.tile_rows();
    int start = 0, index = 0;
    for (int seg = 0; seg < segment_count(w); ++seg) {
        const int rows = segment_rows(ctx, w, seg), groups = (rows + tr - 1) / tr;
        if (g < index + groups) {
            const int r0 = start + (g - index) * tr;
            return RowGroup{g, r0, min(start + rows, r0 + tr), seg, start};
        }
        index += groups;
        start += rows;
    }
    return RowGroup{-1, 0, 0, 0, 0};
}

// --- prologues: the GEMV input rows over k-columns [k0, k1) into x (row stride x_stride_of) ---------------
__device__ __forceinline__ float norm_1p_raw(float x, float r, float w) { return mul_rn(mul_rn(x, r), add_rn(1.0f, w)); }
__device__ __forceinline__ float norm_1p(float x, float r, float w) { return round_bf16(norm_1p_raw(x, r, w)); }

// bf16(lo), bf16(hi) packed, by one paired conversion (cvt.rn.bf16x2.f32; each rounded to nearest).
__device__ __forceinline__ u32 bf16x2_rn(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const u32*>(&h);
}

__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&f)[8]) {
    const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

// Eight values rounded to bf16 and packed (unpack_bf16x8's inverse on bf16 values).
__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
    return make_uint4(bf16x2_rn(f[0], f[1]), bf16x2_rn(f[2], f[3]), bf16x2_rn(f[4], f[5]), bf16x2_rn(f[6], f[7]));
}

// RMSNorm1p of a piece of 8 bf16 values with the row's factor rf and the weight's 8 columns w: bf16(norm_1p_raw).
__device__ __forceinline__ uint4 norm_piece(const uint4& v, float rf, const float (&w)[8]) {
    float f[8];
    unpack_bf16x8(v, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = norm_1p_raw(f[e], rf, w[e]);
    return pack_bf16x8(f);
}

// Elements c .. c + 7 (c a multiple of 8) of a bf16 or fp32 norm weight at `base` (shared memory).
__device__ __forceinline__ void weight8(const u8* base, int dtype, int c, float (&f)[8]) {
    if (dtype == DT_F32) {
        const float4 a = reinterpret_cast<const float4*>(base)[c / 4], b = reinterpret_cast<const float4*>(base)[c / 4 + 1];
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    } else {
        unpack_bf16x8(reinterpret_cast<const uint4*>(base)[c / 8], f);
    }
}

// The RMSNorm1p factors rsqrt(mean(x^2) + eps) of m rows of k values, piece(r, c) row r's values 8 c .. 8 c + 7
// (a uint4 of bf16): thread i sums the squares of pieces i, i + TILE_THREADS, .. of each row, then the block adds
// the threads' sums in a fixed tree, so a row's bits never depend on m or on where the rows are read from. scratch:
// (TILE_WARPS + 1) x MAX_ROWS floats; returns the factors (its last MAX_ROWS). All threads; ends synced.
template <class Piece>
__device__ inline const float* row_factors(Piece piece, int m, int k, float eps, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float ss[MAX_ROWS];
#pragma unroll
    for (int r = 0; r < MAX_ROWS; ++r) ss[r] = 0.0f;
    for (int c = threadIdx.x; c < k / 8; c += TILE_THREADS) {
#pragma unroll
        for (int r = 0; r < MAX_ROWS; ++r) {
            if (r >= m) break;
            float f[8];
            unpack_bf16x8(piece(r, c), f);
#pragma unroll
            for (int e = 0; e < 8; ++e) ss[r] = add_rn(ss[r], mul_rn(f[e], f[e]));
        }
    }
#pragma unroll
    for (int r = 0; r < MAX_ROWS; ++r) {
        if (r >= m) break;
        const float s = warp_sum(ss[r]);
        if (lane == 0) scratch[warp * MAX_ROWS + r] = s;
    }
    __syncthreads();
    float* factor = scratch + TILE_WARPS * MAX_ROWS;
    if (warp < m) {
        const float s = warp_sum(lane < TILE_WARPS ? scratch[lane * MAX_ROWS + warp] : 0.0f);
        if (lane == 0) factor[warp] = rsqrt_ref(add_rn(div_rn(s, static_cast<float>(k)), eps));
    }
    __syncthreads();
    return factor;
}

// RMSNorm1p of m rows of k values each: dst(r)[c - c0] = bf16(x * rsqrt(mean(x^2) + eps) * (1 + w[c])) for
// the columns [c0, c1) (k, c0, c1 multiples of 8; src(r), dst(r): 16-byte aligned row pointers). The rows
// and the weight's columns [c0, c1) are staged at `stage` first (m k bf16, then the weight: the
// prologue's staging area, gemv_word_smem in megakernel/runtime/cuda_build.py sizes it), the factors by
// row_factors (the order is the GPU's own; the reference's np.mean agrees to fp32 rounding). With x_p (fp8
// tiles, c0 and c1 multiples of 128) the rows go to dst as the f16 operand instead, P per (row, k-block of the
// slice) in x_p (f16_operand's rule: the same values): a half-warp normalises the 16 pieces of one k-block.
// scratch: (TILE_WARPS + 1) x MAX_ROWS floats. All threads; ends synced.
template <class Src, class Dst>
__device__ inline void norm_rows(Src src, Dst dst, int m, int k, const Weight& nw, float eps, int c0, int c1,
                                 float* scratch, u8* stage, signed char* x_p = nullptr) {
    bf16* rows = reinterpret_cast<bf16*>(stage);
    u8* weight = stage + static_cast<size_t>(m) * k * 2;
    tile_stamp(8);
    for (int r = 0; r < m; ++r) stage_bytes(src(r), reinterpret_cast<u8*>(rows + r * k), 2 * k);
    stage_bytes(nw.base + static_cast<size_t>(c0) * weight_bytes(nw), weight, (c1 - c0) * weight_bytes(nw));
    stage_wait();
    tile_stamp(9);
    const float* factor =
        row_factors([&](int r, int c) { return reinterpret_cast<const uint4*>(rows + r * k)[c]; }, m, k, eps, scratch);
    for (int c = c0 / 8 + threadIdx.x; c < c1 / 8; c += TILE_THREADS) {
        float w[8];
        weight8(weight, nw.dtype, 8 * c - c0, w);
        for (int r = 0; r < m; ++r) {
            uint4 out = norm_piece(reinterpret_cast<const uint4*>(rows + r * k)[c], factor[r], w);
            if (x_p != nullptr) {  // f16_operand's rule: the half-warp holds this k-block's 16 pieces
                const int P = block_p(piece_top(out), 0xFFFFu << (threadIdx.x & 16));
                out = f16_piece(out, two_to(P));
                if ((threadIdx.x & 15) == 0) x_p[r * MAX_SLICE_BLOCKS + (c - c0 / 8) / 16] = static_cast<signed char>(P);
            }
            reinterpret_cast<uint4*>(dst(r))[c - c0 / 8] = out;
        }
    }
    __syncthreads();
}

// The input rows over k-columns [k0, k1) into x [m][x_stride_of(k1 - k0, m)] (gemv.cuh): RMSNorm1p of the
// residual rows, MTP_FC's two norms, or (GEMV_RESIDUAL) the rows as they are. The residual-row norms write the f16
// operand with its P in x_p where x_p is given (fp8 tiles; fuses_operand), the others bf16. scratch:
// norm_rows's (TILE_WARPS + 1) x MAX_ROWS floats; stage: the staging area (the weight ring's memory, free
// until the passes).
__device__ __forceinline__ bool fuses_operand(int op) {
    return op == OP_NORM_GEMV || op == OP_NORM_GEMV_QKV || op == OP_NORM_GATE_UP || op == OP_NORM_HEAD;
}

__device__ inline void gemv_prologue(const Ctx& ctx, const Word& w, int k0, int k1, bf16* x, float* scratch,
                                     u8* stage, signed char* x_p) {
    const int op = w.opcode(), m = w.rows(), width = k1 - k0, k = w.k(), stride = x_stride_of(width, m);
    const Buffer in = ctx.buffer(w.buf_in());
    if (op == OP_GEMV_RESIDUAL) {  // (k0 and width are multiples of 128)
        tile_stamp(8);
        stage_rows(in.at<bf16>(0, k0), in.cols, x, stride, m, width);
        stage_wait();
        tile_stamp(9);
        return;
    }
    if (op == OP_MTP_FC) {
        // concat[RMSNorm1p(embed(token)), RMSNorm1p(hidden row 8 - m + row)], the embedding half first.
        const Weight embed = ctx.weight(w.p(0));
        const float eps = w.pf(3);
        const int h = k / 2;
        const int* tokens = ctx.control() + w.ctrl_base() + CTRL_TOKENS_IN;
        if (k0 < h)
            norm_rows([&](int r) { return reinterpret_cast<const bf16*>(embed.base) + static_cast<size_t>(tokens[r]) * h; },
                      [&](int r) { return x + r * stride; }, m, h, ctx.weight(w.p(1)), eps, k0, min(k1, h), scratch,
                      stage);
        if (k1 > h)
            norm_rows([&](int r) { return in.at<bf16>(MAX_ROWS - m + r, 0); },
                      [&](int r) { return x + r * stride + max(h - k0, 0); }, m, h, ctx.weight(w.p(2)), eps,
                      max(k0, h) - h, k1 - h, scratch, stage);
        return;
    }
    // NORM_GEMV, NORM_GEMV_QKV, NORM_GATE_UP, NORM_HEAD: RMSNorm1p of the whole residual rows.
    norm_rows([&](int r) { return in.at<bf16>(r, 0); }, [&](int r) { return x + r * stride; }, m, k,
              ctx.weight(w.p(0)), w.pf(1), k0, k1, scratch, stage, x_p);
}

// NORM_HEAD's main tile 0 keeps the normalised rows for the MTP head: `hidden` rows [8 - m, 8). Called,
// not inlined: it runs once a step, and inlined it pushed tile_gemv (then capped at 64 registers) into spilling.
__device__ __noinline__ void keep_hidden(const Ctx& ctx, const Word& w, float* scratch, u8* stage) {
    const Buffer in = ctx.buffer(w.buf_in()), out = ctx.buffer(w.buf_aux1());
    const int m = w.rows();
    norm_rows([&](int r) { return in.at<bf16>(r, 0); }, [&](int r) { return out.at<bf16>(MAX_ROWS - m + r, 0); }, m,
              w.k(), ctx.weight(w.p(0)), w.pf(1), 0, w.k(), scratch, stage);
}

// --- the GEMV proper ------------------------------------------------------------------------------------
// fp32 sums of `rows` (<= 128) rows from local row `row0` of weight W over k-blocks [b0, b1), for the m
// input rows in sm.x -> y[row * MAX_TILE_ROWS + i]. fp8 and bf16 segments take the same path (gemv.cuh).
__device__ inline void gemv_rows(const GemvSmem& sm, const Weight& W, int k, int row0, int rows, int b0, int b1,
                                 int x_stride, int m, float* y, bool primed = false, int part = WHOLE_RING) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
    float acc[4];
    gemv_block_rows(acc, W.dtype == DT_FP8, W.base, reinterpret_cast<const bf16*>(W.scale), k, row0, rows, b0, b1, sm.x,
                    sm.x_p, x_stride, m, sm.ring(m * x_stride), sm.ring_bytes(m * x_stride), sm.scales, primed,
                    part);
    if (warp * WARP_ROWS < rows) {  // phase 0 of strip `warp` holds the strip's sums
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int i = warp * WARP_ROWS + g + 8 * (q >> 1), input = 2 * t + (q & 1);
            if (i < rows && input < m) y[input * MAX_TILE_ROWS + i] = acc[q];
        }
    }
    __syncthreads();  // y complete; the ring free for the next pass
}

// --- epilogues ---------------------------------------------------------------------------------------
__device__ inline void head_epilogue(const Ctx& ctx, const Word& w, const RowGroup& rg, const GemvSmem& sm) {
    const int m = w.rows(), rows = rg.r1 - rg.r0, defined = w.p(2);
    if (w.flags() & FLAG_DEBUG_LOGITS) {
        const Buffer logits = ctx.buffer(w.buf_aux0());
        for (int i = threadIdx.x; i < m * rows; i += TILE_THREADS)
            *logits.at<float>(i / rows, rg.r0 + i % rows) = sm.y_at(0, i / rows)[i % rows];
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < m) {
        float best = neg_inf();
        int best_id = -1;
        for (int i = lane; i < rows; i += 32) {
            const int id = rg.r0 + i;
            const float v = sm.y_at(0, warp)[i];
            if (id < defined && better(v, id, best, best_id)) best = v, best_id = id;
        }
        warp_best(best, best_id);
        if (lane == 0) {
            int* cand = ctx.buffer(w.buf_out()).at<int>(warp, 2 * rg.index);
            cand[0] = best_id < 0 ? __float_as_int(neg_inf()) : __float_as_int(best);
            cand[1] = best_id;
        }
    }
}

// RoPE's bf16 cos and sin of frequency j < rot / 2 at `position`, from an fp32 angle (HF computes, then casts).
__device__ __forceinline__ void rope_cos_sin(int position, int j, int rot, float theta, float& c, float& s) {
    const float inv_freq = div_rn(1.0f, powf(theta, div_rn(static_cast<float>(2 * j), static_cast<float>(rot))));
    const float angle = mul_rn(static_cast<float>(position), inv_freq);
    c = round_bf16(cosf(angle));
    s = round_bf16(sinf(angle));
}

// A linear's epilogues on its fp32 sums (the GEMV family's and the prompt GEMMs'): SwiGLU bf16(bf16(silu(g)) u)
// and the residual add bf16(x_in + bf16(y)), before the final bf16 rounding.
__device__ __forceinline__ float swiglu_rn(float gate, float up) {
    return mul_rn(round_bf16(silu_ref(round_bf16(gate))), round_bf16(up));
}
__device__ __forceinline__ float residual_rn(bf16 x_in, float y) { return add_rn(bf(x_in), round_bf16(y)); }

// NORM_GEMV_QKV (one head per row group): q -> q_norm, RoPE -> out; gate half -> aux0; k -> k_norm, RoPE
// -> K cache rows [position, position + m); v -> V cache.
constexpr int QK_MAX_PIECES = MAX_TILE_ROWS / 32;  // warp-wide pieces of a head (qkv_epilogue)
static_assert(MAX_ROWS * QK_MAX_PIECES + MAX_ROWS <= MAX_SLICE_BLOCKS, "qkv_epilogue's scratch in scales");
__device__ inline void qkv_epilogue(const Ctx& ctx, const Word& w, const RowGroup& rg, const GemvSmem& sm) {
    const int m = w.rows(), hd = w.p(6), rot = w.p(7), capacity = w.p(9);
    const int local = rg.r0 - rg.seg_r0, pos = ctx.control()[w.ctrl_base() + CTRL_POSITION];
    const bool in_capacity = pos >= 0 && pos + m <= capacity;  // the host refuses passes past capacity
    if (rg.segment == 0 && (local / hd) % 2 == 1) {
        const Buffer gate = ctx.buffer(w.buf_aux0());
        for (int i = threadIdx.x; i < m * hd; i += TILE_THREADS)
            *gate.at<bf16>(i / hd, (local / (2 * hd)) * hd + i % hd) = to_bf16(sm.y_at(0, i / hd)[i % hd]);
        return;
    }
    if (rg.segment == 2) {
        const Buffer v = ctx.buffer(w.buf_aux2());
        for (int i = threadIdx.x; i < m * hd && in_capacity; i += TILE_THREADS)
            *v.at<bf16>(pos + i / hd, local + i % hd) = to_bf16(sm.y_at(0, i / hd)[i % hd]);
        return;
    }
    if (rg.segment == 1 && !in_capacity) return;  // k rows past the cache: none written (all threads leave)
    // q or k: RMSNorm1p over the head, then RoPE on its first `rot` elements, every warp at work whatever m:
    // warp-sized pieces (row, 32 elements) dealt round the warps. A row's sum of squares is its pieces'
    // warp sums added in piece order, the same whatever m (an M-row pass = M one-row passes). scratch: the
    // scales' shared memory (free after the passes).
    const Weight nw = ctx.weight(rg.segment == 0 ? w.p(2) : w.p(3));
    const float eps = w.pf(1), theta = w.pf(8);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = rot / 2, pieces = hd / 32;
    float* piece_sums = sm.scales;  // [row][piece]
    // RoPE's bf16 cos and sin of each row and frequency j < rot / 2, once a tile, into y's second half (gate_up's
    // alone: free here) as [row][j] cos, [row][MAX_TILE_ROWS / 2 + j] sin. Computed per element, every j twice
    // and by the few warps that hold a row's first rot elements, they bounded the finish at M = 8 (D59).
    for (int e = threadIdx.x; e < m * half; e += TILE_THREADS) {
        const int row = e / half, j = e % half;
        float* rope = sm.y_at(1, row);
        rope_cos_sin(pos + row, j, rot, theta, rope[j], rope[MAX_TILE_ROWS / 2 + j]);
    }
    for (int q = warp; q < m * pieces; q += TILE_WARPS) {
        const float v = round_bf16(sm.y_at(0, q / pieces)[32 * (q % pieces) + lane]);
        const float s = warp_sum(mul_rn(v, v));
        if (lane == 0) piece_sums[q] = s;
    }
    __syncthreads();
    float* factor = piece_sums + MAX_ROWS * QK_MAX_PIECES;
    if (threadIdx.x < m) {
        float ss = 0.0f;
        for (int p = 0; p < pieces; ++p) ss = add_rn(ss, piece_sums[threadIdx.x * pieces + p]);
        factor[threadIdx.x] = rsqrt_ref(add_rn(div_rn(ss, static_cast<float>(hd)), eps));
    }
    __syncthreads();
    for (int q = warp; q < m * pieces; q += TILE_WARPS) {
        float* y = sm.y_at(0, q / pieces);
        const int i = 32 * (q % pieces) + lane;
        y[i] = norm_1p(round_bf16(y[i]), factor[q / pieces], nw.value(i));
    }
    __syncthreads();  // RoPE reads the other half's elements, normalised by other warps
    for (int q = warp; q < m * pieces; q += TILE_WARPS) {
        const int row = q / pieces, i = 32 * (q % pieces) + lane;
        const float* y = sm.y_at(0, row);
        float out = y[i];
        if (i < rot) {
            const float* rope = sm.y_at(1, row);
            const float c = rope[i % half], s = rope[MAX_TILE_ROWS / 2 + i % half];
            const float rotated = i < half ? -y[i + half] : y[i - half];
            out = round_bf16(add_rn(round_bf16(mul_rn(y[i], c)), round_bf16(mul_rn(rotated, s))));
        }
        bf16* dst = rg.segment == 0 ? ctx.buffer(w.buf_out()).at<bf16>(row, (local / (2 * hd)) * hd)
                                    : ctx.buffer(w.buf_aux1()).at<bf16>(pos + row, local);
        dst[i] = to_bf16(out);
    }
}

__device__ inline void gemv_epilogue(const Ctx& ctx, const Word& w, const RowGroup& rg, const GemvSmem& sm) {
    const int op = w.opcode(), m = w.rows(), rows = rg.r1 - rg.r0;
    if (op == OP_NORM_HEAD) return head_epilogue(ctx, w, rg, sm);
    if (op == OP_NORM_GEMV_QKV) return qkv_epilogue(ctx, w, rg, sm);
    const Buffer out = ctx.buffer(w.buf_out());
    for (int i = threadIdx.x; i < m * rows; i += TILE_THREADS) {
        const int row = i / rows, c = rg.r0 + i % rows;
        const float y = sm.y_at(0, row)[i % rows];
        float v;
        if (op == OP_NORM_GATE_UP)
            v = swiglu_rn(y, sm.y_at(1, row)[i % rows]);
        else if (op == OP_GEMV_RESIDUAL)
            v = residual_rn(*ctx.buffer(w.buf_aux0()).at<bf16>(row, c), y);
        else  // NORM_GEMV, MTP_FC
            v = y;
        *out.at<bf16>(row, c) = to_bf16(v);
    }
}

// --- split-K finished by its last slice (both builds) ---------------------------------------------------
// A split-K word's main tile, once its partials are in scratch, counts itself on its row group's arrival
// counter (counters[(arrival_base + group) * COUNTER_STRIDE]: the megakernel's counter array, the discrete
// launcher's array of the same layout); the tile that brings the count to S adds the group's S partials in
// order (the same bits whichever tile it is), zeroes the counter for the next step and applies the epilogue.
// No tile waits on an arrival counter, so no schedule can deadlock; the compiler's validator checks the
// finish as if it ran on each of the group's S slice tiles (compiler/hb.py).
__device__ __forceinline__ u32 arrive_acq_rel(u32* counter) {
#ifdef MK_HOST_SIMT  // tests/simt/simt.h: one block runs at a time
    return (*counter)++;
#else
    u32 old;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
    return old;
#endif
}

// Input row `row`'s S partials of scratch column `col` (read from L2: other blocks wrote them), added in
// slice order: the one sum order of a split-K group (sum_partials, residual_finish_last).
__device__ __forceinline__ float partials_sum(const Buffer& scratch, int m, int S, int row, int col) {
    float acc = __ldcg(scratch.at<float>(row, col));
    for (int s = 1; s < S; ++s) acc = add_rn(acc, __ldcg(scratch.at<float>(s * m + row, col)));
    return acc;
}

// The group's S partials added in order into y.
__device__ inline void sum_partials(const Ctx& ctx, const Word& w, const RowGroup& rg, const GemvSmem& sm) {
    const Buffer scratch = ctx.buffer(w.buf_scratch());
    const int m = w.rows(), rows = rg.r1 - rg.r0, S = w.k_slices(), n = w.n();
    const int halves = w.opcode() == OP_NORM_GATE_UP ? 2 : 1;
    for (int i = threadIdx.x; i < halves * m * rows; i += TILE_THREADS) {
        const int half = i / (m * rows), row = i / rows % m, j = i % rows;
        sm.y_at(half, row)[j] = partials_sum(scratch, m, S, row, half * n + rg.r0 + j);
    }
    __syncthreads();
}

// All threads, after the tile's partials are written: whether this tile is its group's last slice to arrive.
__device__ inline bool arrived_last(const Word& w, const RowGroup& rg, u32* arrivals) {
    __syncthreads();  // every partial of this tile written (thread 0's release covers them)
    bool last = false;
    if (threadIdx.x == 0) {
        u32* counter = arrivals + static_cast<size_t>(w.arrival_base() + rg.index) * COUNTER_STRIDE;
        last = arrive_acq_rel(counter) == static_cast<u32>(w.k_slices() - 1);
        if (last) *counter = 0;  // no tile of this word counts again before this one's epilogue is done
    }
    // thread 0's answer to every thread (tile_gemv may take all the shared memory the device allows as
    // dynamic memory: it can have no static shared variable)
    return __syncthreads_or(last);
}

// All threads, after the tile's partials are written: whether this tile finishes the group (y then holds
// the group's sums).
__device__ inline bool gemv_finish_last(const Ctx& ctx, const Word& w, const RowGroup& rg, const GemvSmem& sm,
                                        u32* arrivals) {
    if (!arrived_last(w, rg, arrivals)) return false;
    sum_partials(ctx, w, rg, sm);
    return true;
}

// GEMV_RESIDUAL's split-K finish. Every slice tile asks for its group's residual values before it counts
// itself, so that in the slice that lands last they come back beside the arrival's round trip; that slice
// then adds the partials in order and the residual as sum_partials and gemv_epilogue do (the same bits), a
// thread its own (row, output row) pairs with no barrier between: one dependent round trip after the arrival
// where the two functions take two (D59). All threads; true for the slice that finished the group.
constexpr int RESIDUAL_PAIRS = MAX_ROWS * MAX_TILE_ROWS / TILE_THREADS;  // (row, output row) pairs a thread
__device__ inline bool residual_finish_last(const Ctx& ctx, const Word& w, const RowGroup& rg, u32* arrivals) {
    const int m = w.rows(), rows = rg.r1 - rg.r0, S = w.k_slices();
    const Buffer residual = ctx.buffer(w.buf_aux0());
    float res[RESIDUAL_PAIRS];
#pragma unroll
    for (int p = 0; p < RESIDUAL_PAIRS; ++p) {
        const int i = threadIdx.x + p * TILE_THREADS;
        res[p] = i < m * rows ? bf(*residual.at<bf16>(i / rows, rg.r0 + i % rows)) : 0.0f;
    }
    if (!arrived_last(w, rg, arrivals)) return false;
    const Buffer scratch = ctx.buffer(w.buf_scratch()), out = ctx.buffer(w.buf_out());
#pragma unroll
    for (int p = 0; p < RESIDUAL_PAIRS; ++p) {
        const int i = threadIdx.x + p * TILE_THREADS, row = i / rows, c = rg.r0 + i % rows;
        if (i >= m * rows) break;
        *out.at<bf16>(row, c) = to_bf16(add_rn(res[p], round_bf16(partials_sum(scratch, m, S, row, c))));
    }
    return true;
}

// --- tiles ---------------------------------------------------------------------------------------------
// A tile in two parts that share nothing but (ctx, w, tile): the input rows (prologue, then for
// fp8 weights the f16 operand), and the GEMV passes with their epilogue. Few values live across the seam
// keeps the megakernel within its 128 registers.
struct MainTile {
    int groups, s, S, k, m, b0, b1, width;
    bool gate_up;
    __device__ MainTile(const Ctx& ctx, const Word& w, int tile)
        : groups(row_group_count(ctx, w)), s(tile / groups), S(w.k_slices()), k(w.k()), m(w.rows()),
          b0(s * (k / K_BLOCK) / S), b1((s + 1) * (k / K_BLOCK) / S), width((b1 - b0) * K_BLOCK),
          gate_up(w.opcode() == OP_NORM_GATE_UP) {}
};

// Where a tile primes its first pass's ring (gemv.cuh prime_ring: its block scales, then its first k-blocks),
// and how much of it. Weights depend on nothing an earlier word writes, so a tile primes before it waits for
// its inputs and they stream while it waits and while its prologue runs: the megakernel's tile before its
// block waits for the tile's input counters (megakernel.cu interpret), the discrete build's before
// griddepcontrol.wait (kernels.cu tile_gemv; D57). There fp8 GEMV_RESIDUAL primes the whole ring (its rows
// go straight to x); NORM_GEMV, NORM_GEMV_QKV and NORM_GATE_UP the ring less what their prologue stages at
// its end (norm_rows: the m input rows and the norm weight's slice). A megakernel tile whose inputs are met
// when its block reaches it does not prime (D51): its rows would queue behind the primed copies, ~5 us of
// issue on the word's latest blocks.

// The bytes at the ring's start that a tile primes, or -1 where it primes nothing.
__device__ inline int primed_bytes(const Ctx& ctx, const Word& w, const MainTile& mt, const GemvSmem& sm, bool fp8) {
    const int op = w.opcode();
    if (!fp8) return -1;
    const int ring = sm.ring_bytes(mt.m * x_stride_of(mt.width, mt.m));
    if (op == OP_GEMV_RESIDUAL) return ring;
    if (op != OP_NORM_GEMV && op != OP_NORM_GEMV_QKV && op != OP_NORM_GATE_UP) return -1;
    const int staged = 2 * mt.m * mt.k + mt.width * weight_bytes(ctx.weight(w.p(0)));
    return (ring - staged) & ~127;  // >= 0: the launch gives the ring at least what the prologue stages
}

// The first pass's weight and rows of a main tile (gate_up: its gate half).
struct FirstPass {
    Weight weight;
    int local0, rows;
    __device__ FirstPass(const Ctx& ctx, const Word& w, const MainTile& mt, int tile) {
        const RowGroup rg = row_group(ctx, w, tile % mt.groups);
        weight = gemv_weight(ctx, w, mt.gate_up ? 0 : rg.segment);
        local0 = rg.r0 - rg.seg_r0;
        rows = min(rg.r1 - rg.r0, ROW_BLOCK - local0 % ROW_BLOCK);
    }
};

// All threads, before the tile's inputs are ready: its first pass's scales and primed ring (primed_bytes).
// Reads weights alone (and the word, its records and the weights' addresses from the Program).
__device__ inline void gemv_main_weights(const Ctx& ctx, const Word& w, int tile, u8* smem) {
    const GemvSmem sm(smem);
    const MainTile mt(ctx, w, tile);
    const FirstPass first(ctx, w, mt, tile);
    const int primed = primed_bytes(ctx, w, mt, sm, first.weight.dtype == DT_FP8);
    if (primed < 0) return;
    const int x_elems = mt.m * x_stride_of(mt.width, mt.m);
    stage_pass_scales(reinterpret_cast<const bf16*>(first.weight.scale), mt.k, first.local0, mt.b0, mt.b1, sm.scales);
    copies_commit();
    prime_ring(first.weight.base, mt.k, first.local0, first.rows, mt.b0, mt.b1, sm.ring(x_elems), sm.ring_bytes(x_elems),
               primed);
}

// All threads, once the tile's inputs are ready: the input rows (prologue, then for fp8 weights the f16
// operand). `primed_ahead`: the tile primed its ring (gemv_main_weights), and the prologue then stages its
// inputs past what is primed.
__device__ inline void gemv_main_input(const Ctx& ctx, const Word& w, int tile, u8* smem, bool primed_ahead) {
    const GemvSmem sm(smem);
    const MainTile mt(ctx, w, tile);
    const int stride = x_stride_of(mt.width, mt.m), x_elems = mt.m * stride;
    // one dtype per tile (a row group lies in one segment; gate and up are both fp8)
    const FirstPass first(ctx, w, mt, tile);
    const bool fp8 = first.weight.dtype == DT_FP8;
    const int primed = primed_ahead ? primed_bytes(ctx, w, mt, sm, fp8) : -1;
    u8* stage = sm.ring(x_elems) + max(primed, 0);
    if (w.opcode() == OP_NORM_HEAD && tile == 0 && w.buf_aux1() != NO_BUFFER) keep_hidden(ctx, w, sm.y, stage);
    // y: free until the passes
    gemv_prologue(ctx, w, mt.b0 * K_BLOCK, mt.b1 * K_BLOCK, sm.x, sm.y, stage, fp8 ? sm.x_p : nullptr);
    __syncthreads();
    if (fp8 && !fuses_operand(w.opcode())) f16_operand(sm.x, stride, sm.x, stride, mt.m, mt.b1 - mt.b0, sm.x_p);
}

// arrivals: the split-K arrival counters (gemv_finish_last); primed_ahead: the tile primed its ring
// (gemv_main_weights). True when the tile's row group is done (its epilogue applied): always without
// split-K, else for the slice that landed last.
__device__ inline bool gemv_main_passes(const Ctx& ctx, const Word& w, int tile, u8* smem, u32* arrivals,
                                        bool primed_ahead) {
    const GemvSmem sm(smem);
    const MainTile mt(ctx, w, tile);
    const RowGroup rg = row_group(ctx, w, tile % mt.groups);
    const int S = mt.S, k = mt.k, m = mt.m, b0 = mt.b0, b1 = mt.b1, stride = x_stride_of(mt.width, m), s = mt.s;
    const bool gate_up = mt.gate_up;
    const int rows = rg.r1 - rg.r0, local0 = rg.r0 - rg.seg_r0;
    // Passes of at most 128 rows, cut where a 128-row scale block ends (a 144-row group is two passes);
    // gate_up makes the same passes over gate, then over up.
    for (int half = 0; half < (gate_up ? 2 : 1); ++half) {
        const Weight W = gemv_weight(ctx, w, gate_up ? half : rg.segment);
        for (int a = 0; a < rows;) {
            const int first = local0 + a, prows = min(rows - a, ROW_BLOCK - first % ROW_BLOCK);
            // the first pass may be primed (primed_bytes)
            const int part = primed_ahead && half == 0 && a == 0 ? primed_bytes(ctx, w, mt, sm, W.dtype == DT_FP8) : -1;
            gemv_rows(sm, W, k, first, prows, b0, b1, stride, m, sm.y_at(half, 0) + a, part >= 0, part);
            a += prows;
        }
    }
    tile_stamp(3);
    if (S > 1) {  // this slice's sums -> scratch rows [s m, (s + 1) m); the last slice finishes the group
        const Buffer scratch = ctx.buffer(w.buf_scratch());
        const int halves = gate_up ? 2 : 1, n = w.n();
        for (int i = threadIdx.x; i < halves * m * rows; i += TILE_THREADS) {
            const int half = i / (m * rows), row = i / rows % m, j = i % rows;
            *scratch.at<float>(s * m + row, half * n + rg.r0 + j) = sm.y_at(half, row)[j];
        }
        if (w.opcode() == OP_GEMV_RESIDUAL) return residual_finish_last(ctx, w, rg, arrivals);
        if (!gemv_finish_last(ctx, w, rg, sm, arrivals)) return false;
    }
    gemv_epilogue(ctx, w, rg, sm);
    return true;
}

// The discrete build's tile, once gemv_main_weights has primed its ring and the previous launch is done.
__device__ inline void gemv_main_tile(const Ctx& ctx, const Word& w, int tile, u8* smem, u32* arrivals) {
    tile_stamp(0, true);
    gemv_main_input(ctx, w, tile, smem, true);
    tile_stamp(1);
    gemv_main_passes(ctx, w, tile, smem, arrivals, true);
    tile_stamp(4, true);
}

}  // namespace mk
