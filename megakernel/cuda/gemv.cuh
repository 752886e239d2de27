// Block-scaled GEMV on tensor cores: one warp computes 16 output rows of W x over one k-slice, for up
// to 8 input rows at once (the 8 columns of an m16n8k16 mma: column n = input row n, so an input row's
// result never depends on the other rows present).
//
// Numerics (megakernel/plan.py, docs/ISA.md "Sum order"): for each 128-wide k-block, 8 mma steps sum the
// block's products into a fresh fp32 partial; a warp accumulates scale[row / 128, block] x partial over
// every other block of the slice in order (mul_rn, add_rn: no contraction, no flush), its partner warp the
// other blocks, and the two sums are added in a fixed order (gemv_pair_combine); bf16 weights have no
// scale. Inside a block the reduction axis is permuted so that each load instruction of a warp reads
// 64 contiguous bytes per row: lane (g, t) owns the 16-byte chunks at i * 64 + 16t (i = 0, 1 for fp8;
// 0..3 for bf16), and mma step j, element e maps to the matching k; the activations are read in the
// same permuted order, so the products are the true ones.
//
// fp8 e4m3 weights are widened exactly: e4m3 -> f16 (hardware cvt, exact) -> f32 -> bf16 (exact for
// every e4m3 value; e4m3 subnormals are normal in f16, f32 and bf16).
//
// Used by the discrete kernels (discrete/kernels.cu) and, later, the megakernel: one implementation.
#pragma once

#include "common.cuh"

namespace mk {

constexpr int K_BLOCK = 128;
constexpr int ROW_BLOCK = 128;
constexpr int WARP_ROWS = 16;

// Weights are read once per pass: stream them past L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ u32 e4m3x2_to_bf16x2(u32 two_bytes) {
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes & 0xFFFFu), __NV_E4M3);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<const u32*>(&b);
}

// d += a (16 x 16, row-major fragment) x b (16 x 8, column-major fragment), fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One k-block's weights for one lane: rows g and g + 8, 32 elements each (fp8: 2 x 16 bytes per row;
// bf16: 4 x 16 bytes per row).
template <bool FP8>
struct BlockWeights {
    uint4 row_g[FP8 ? 2 : 4];
    uint4 row_g8[FP8 ? 2 : 4];
};

template <bool FP8>
__device__ __forceinline__ void load_block(BlockWeights<FP8>& w, const u8* row_g, const u8* row_g8, int block,
                                           int t) {
    constexpr int ELEM = FP8 ? 1 : 2;
    const size_t offset = static_cast<size_t>(block) * K_BLOCK * ELEM + 16 * t;
#pragma unroll
    for (int i = 0; i < (FP8 ? 2 : 4); ++i) {
        w.row_g[i] = load_stream(row_g + offset + 64 * i);
        w.row_g8[i] = load_stream(row_g8 + offset + 64 * i);
    }
}

// The k index (within the 128-wide block) of element e of mma step j for lane t: fp8 lanes hold 16-element
// chunks at 64 i + 16 t; bf16 lanes hold 8-element chunks at 32 i + 8 t.
template <bool FP8>
__device__ __forceinline__ int element_k(int j, int t) {
    return FP8 ? (j >> 2) * 64 + 16 * t + 4 * (j & 3) : (j >> 1) * 32 + 8 * t + 4 * (j & 1);
}

// The 8 mma steps of one k-block: returns the block's fp32 partial in c (fresh accumulator). x_block: the
// block's index in x_row.
template <bool FP8>
__device__ __forceinline__ void block_partial(float (&c)[4], const BlockWeights<FP8>& w,
                                              const __nv_bfloat16* x_row, bool has_row, int x_block, int t) {
    c[0] = c[1] = c[2] = c[3] = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        u32 a[4];
        const u32* rg = reinterpret_cast<const u32*>(w.row_g);
        const u32* rg8 = reinterpret_cast<const u32*>(w.row_g8);
        if (FP8) {  // elements 4j .. 4j+3 of this lane's 32 are byte-word j
            a[0] = e4m3x2_to_bf16x2(rg[j]);
            a[1] = e4m3x2_to_bf16x2(rg8[j]);
            a[2] = e4m3x2_to_bf16x2(rg[j] >> 16);
            a[3] = e4m3x2_to_bf16x2(rg8[j] >> 16);
        } else {  // bf16: words 2j and 2j + 1
            a[0] = rg[2 * j];
            a[1] = rg8[2 * j];
            a[2] = rg[2 * j + 1];
            a[3] = rg8[2 * j + 1];
        }
        u32 b[2] = {0u, 0u};
        if (has_row) {
            const uint2 xv = *reinterpret_cast<const uint2*>(x_row + x_block * K_BLOCK + element_k<FP8>(j, t));
            b[0] = xv.x;
            b[1] = xv.y;
        }
        mma_16816(c, a, b);
    }
}

// Sums for 16 rows [row0, row0 + 16) of W [rows, k] over the k-blocks first, first + step, ... below b1,
// input rows x [m, x_stride] holding k-blocks x_block0 onwards (m <= 8). Rows at or past row0 + valid
// are not read (the row before them is, and its sums are discarded by the caller). Lane (g, t) returns acc[0..3] =
// (row0 + g, input row 2t), (row0 + g, 2t + 1), (row0 + g + 8, 2t), (row0 + g + 8, 2t + 1). The next
// group of DEPTH blocks is loaded before the current one is multiplied (register double buffer); the
// blocks are still added in increasing order.
template <bool FP8, int DEPTH>
__device__ __forceinline__ void gemv_warp_blocks(float (&acc)[4], const u8* weight, const __nv_bfloat16* scale,
                                                 int k, int row0, int valid, int first, int step, int b1,
                                                 const __nv_bfloat16* x, int x_stride, int x_block0, int m) {
    constexpr int ELEM = FP8 ? 1 : 2;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const u8* row_g = weight + static_cast<size_t>(row0 + min(g, valid - 1)) * k * ELEM;
    const u8* row_g8 = weight + static_cast<size_t>(row0 + min(g + 8, valid - 1)) * k * ELEM;
    const __nv_bfloat16* x_row = x + static_cast<size_t>(g) * x_stride;
    const bool has_row = g < m;
    const __nv_bfloat16* scale_row = FP8 ? scale + static_cast<size_t>(row0 / ROW_BLOCK) * (k / K_BLOCK) : nullptr;
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    const int group = DEPTH * step;
    auto load_group = [&](BlockWeights<FP8> (&w)[DEPTH], int base) {
#pragma unroll
        for (int i = 0; i < DEPTH; ++i)
            if (base + i * step < b1) load_block<FP8>(w[i], row_g, row_g8, base + i * step, t);
    };
    auto multiply_group = [&](const BlockWeights<FP8> (&w)[DEPTH], int base) {
#pragma unroll
        for (int i = 0; i < DEPTH; ++i) {
            const int block = base + i * step;
            if (block < b1) {
                float c[4];
                block_partial<FP8>(c, w[i], x_row, has_row, block - x_block0, t);
                const float s = FP8 ? __bfloat162float(scale_row[block]) : 1.0f;
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[r] = add_rn(acc[r], FP8 ? mul_rn(s, c[r]) : c[r]);
            }
        }
    };
    // Two register buffers, named (not indexed at run time, which would put them in local memory).
    BlockWeights<FP8> w0[DEPTH], w1[DEPTH];
    load_group(w0, first);
    for (int base = first; base < b1; base += 2 * group) {
        load_group(w1, base + group);
        multiply_group(w0, base);
        load_group(w0, base + 2 * group);
        multiply_group(w1, base + group);
    }
}

// Two warps share a 16-row strip, one taking the even blocks of the slice and one the odd: the sum is
// (even) + (odd), in that order. partner_acc: shared memory, 4 floats per lane of the odd warp.
__device__ __forceinline__ void gemv_pair_combine(float (&acc)[4], float* partner_acc, bool odd) {
    const int lane = threadIdx.x & 31;
    if (odd) {
#pragma unroll
        for (int r = 0; r < 4; ++r) partner_acc[4 * lane + r] = acc[r];
    }
    __syncthreads();
    if (!odd) {
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[r] = add_rn(acc[r], partner_acc[4 * lane + r]);
    }
}

}  // namespace mk
