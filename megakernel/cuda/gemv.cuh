// Block-scaled GEMV on tensor cores: one warp computes 16 output rows of W x over one k-slice, for up
// to 8 input rows at once (the 8 columns of an m16n8k16 mma: column n = input row n, so an input row's
// result never depends on the other rows present).
//
// Numerics (megakernel/plan.py, docs/ISA.md "Sum order"): for each 128-wide k-block, 8 mma steps sum the
// block's products into a fresh fp32 partial; a warp accumulates scale[row / 128, block] x partial over
// every other block of the slice in order (mul_rn, add_rn: no contraction, no flush), its partner warp the
// other blocks, and the two sums are added in a fixed order (gemv_pair_combine); bf16 weights have no
// scale. Inside a block the reduction axis is permuted so that each load instruction of a warp reads
// 64 contiguous bytes per row: lane (g, t) owns the 16-byte pieces at i * 64 + 16t (i = 0, 1 for fp8;
// 0..3 for bf16), and mma step j, element e maps to the matching k; the activations are read in the
// same permuted order, so the products are the true ones.
//
// fp8 e4m3 weights are widened exactly: e4m3 -> f16 (hardware cvt, exact) -> f32 -> bf16 (exact for
// every e4m3 value; e4m3 subnormals are normal in f16, f32 and bf16).
//
// Used by the discrete kernels (discrete/kernels.cu) and the megakernel (megakernel.cu): one implementation.
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

// --- weights staged through shared memory ------------------------------------------------------------
// A tile's weights stream through a ring of slots in shared memory, one k-block of its (up to) 128 rows
// per slot: every thread copies 16-byte pieces with cp.async, and an mbarrier per slot completes when all
// of a slot's copies have landed. Bytes in flight then cost no registers (the register-buffered v2 held
// 64 per thread, which the megakernel cannot afford next to the other ops), and the compute warps read
// shared memory, not DRAM latency. Within a slot, row r's 16-byte piece c sits at piece c ^ 4 (r & 1),
// so that the two rows a quarter-warp reads at once use all 32 banks.
constexpr int PIECE = 16;
constexpr int MAX_SLOTS = 12;
constexpr int MAX_SLICE_BLOCKS = 256;  // k-blocks of one k-slice (k <= 32768)

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}

// The slot's barrier completes when every copy this thread issued so far has landed (one arrival per thread).
__device__ __forceinline__ void copies_arrive(u64* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void barrier_init(u64* bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void barrier_inval(u64* bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void barrier_wait(u64* bar, u32 parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ int swizzled(int piece, int row) {
    return piece ^ ((row & 1) << 2);
}

// A lane's 2 x 16 bytes of rows g and g + 8 of one 128-byte chunk of a k-block (fp8: the block; bf16:
// half h of it), at bytes 64 i + 16 t of the chunk.
struct Chunk {
    uint4 row_g[2];
    uint4 row_g8[2];
};

__device__ __forceinline__ void read_chunk(Chunk& w, const u8* slot, int row_bytes, int r, int h, int t) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int piece = 8 * h + 4 * i + t;
        w.row_g[i] = *reinterpret_cast<const uint4*>(slot + r * row_bytes + PIECE * swizzled(piece, r));
        w.row_g8[i] = *reinterpret_cast<const uint4*>(slot + (r + 8) * row_bytes + PIECE * swizzled(piece, r + 8));
    }
}

// The k index (within the 128-wide block) of element e of mma step j (0..7) for lane t: fp8 lanes hold
// 16-element runs at 64 i + 16 t of the block; bf16 lanes 8-element runs at 32 i + 8 t.
__device__ __forceinline__ int element_k(bool fp8, int j, int t) {
    return fp8 ? (j >> 2) * 64 + 16 * t + 4 * (j & 3) : (j >> 1) * 32 + 8 * t + 4 * (j & 1);
}

// The mma steps of one chunk into the block partial c: fp8, steps 0..7 of its block; bf16, steps
// 4 h .. 4 h + 3 of its block.
__device__ __forceinline__ void chunk_steps(float (&c)[4], const Chunk& w, bool fp8, int h,
                                            const __nv_bfloat16* x_row, bool has_row, int x_block, int t) {
    const u32* rg = reinterpret_cast<const u32*>(w.row_g);
    const u32* rg8 = reinterpret_cast<const u32*>(w.row_g8);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (!fp8 && j >= 4) break;
        u32 a[4];
        if (fp8) {  // elements 4j .. 4j+3 of this lane's 32 are byte-word j
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
            const int k = element_k(fp8, fp8 ? j : 4 * h + j, t);
            const uint2 xv = *reinterpret_cast<const uint2*>(x_row + x_block * K_BLOCK + k);
            b[0] = xv.x;
            b[1] = xv.y;
        }
        mma_16816(c, a, b);
    }
}

// The block's threads copy k-block `block` of rows [row0, row0 + rows) into `slot` (up to the strip's end,
// rows past the last valid one repeating it), then arrive on the slot's barrier.
__device__ __forceinline__ void stage_block(u8* slot, u64* bar, const u8* weight, size_t row_bytes_global,
                                            int row_bytes, int row0, int rows, int block) {
    const int per_row = row_bytes / PIECE, pieces = ((rows + WARP_ROWS - 1) / WARP_ROWS) * WARP_ROWS * per_row;
    for (int q = threadIdx.x; q < pieces; q += TILE_THREADS) {
        const int r = q / per_row, c = q % per_row;
        const u8* src = weight + static_cast<size_t>(row0 + min(r, rows - 1)) * row_bytes_global +
                        static_cast<size_t>(block) * row_bytes + PIECE * c;
        copy_async16(slot + r * row_bytes + PIECE * swizzled(c, r), src);
    }
    copies_arrive(bar);
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

// All TILE_THREADS threads: the sums of `rows` (<= 128) rows of W [.., k] from row0 (fp8 with bf16 block
// scales, or bf16 with scale nullptr) over the k-blocks [b0, b1), for input rows x [m, x_stride] (shared
// memory, k-blocks b0 onwards, m <= 8). Warp (strip, parity) computes 16 rows over the blocks of its
// parity: each block's 8 mma steps sum into a fresh fp32 partial, acc += scale x partial in block order;
// then (even) + (odd). Lane (g, t) of the even warp returns acc[0..3] = (row g, input 2t), (g, 2t + 1),
// (g + 8, 2t), (g + 8, 2t + 1) of its strip; the odd warps' acc is undefined. `ring`: shared memory for
// at least 2 slots of 128 rows x one k-block; `bars`: MAX_SLOTS mbarriers; `scales`: MAX_SLICE_BLOCKS
// floats; `partner`: 8 x 128 floats. fp8: row0 must be a multiple of 128 (one scale row per tile).
__device__ inline void gemv_block_rows(float (&acc)[4], bool fp8, const u8* weight, const __nv_bfloat16* scale,
                                       int k, int row0, int rows, int b0, int b1, const __nv_bfloat16* x,
                                       int x_stride, int m, u8* ring, int ring_bytes, u64* bars, float* scales,
                                       float* partner) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
    const int strip = warp & 7, parity = warp >> 3;
    const int row_bytes = K_BLOCK * (fp8 ? 1 : 2), slot_bytes = ROW_BLOCK * row_bytes;
    const int slots = min(MAX_SLOTS, ring_bytes / slot_bytes), blocks = b1 - b0;
    const size_t row_bytes_global = static_cast<size_t>(k) * (fp8 ? 1 : 2);
    if (threadIdx.x < slots) barrier_init(&bars[threadIdx.x], TILE_THREADS);
    // The rows' block scales for the slice, into shared memory once (row0 is a multiple of 128, so one
    // scale row serves the tile): read from L2 per block, their latency would stall every block.
    if (fp8) {
        const __nv_bfloat16* scale_row = scale + static_cast<size_t>(row0 / ROW_BLOCK) * (k / K_BLOCK) + b0;
        for (int i = threadIdx.x; i < blocks; i += TILE_THREADS) scales[i] = __bfloat162float(scale_row[i]);
    }
    __syncthreads();
    for (int n = 0; n < min(slots, blocks); ++n)
        stage_block(ring + n * slot_bytes, &bars[n], weight, row_bytes_global, row_bytes, row0, rows, b0 + n);

    const bool active = strip * WARP_ROWS < rows, has_row = g < m;
    const __nv_bfloat16* x_row = x + static_cast<size_t>(g) * x_stride;
    const int r = strip * WARP_ROWS + g;  // this lane's rows in the slot: r and r + 8
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    for (int pair = 0; 2 * pair < blocks; ++pair) {
        const int n = 2 * pair + parity;  // this warp's block of the pair
        if (active && n < blocks) {
            const int slot = n % slots;
            barrier_wait(&bars[slot], (n / slots) & 1);
            const u8* data = ring + slot * slot_bytes;
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int h = 0; h < (fp8 ? 1 : 2); ++h) {
                Chunk w;
                read_chunk(w, data, row_bytes, r, h, t);
                chunk_steps(c, w, fp8, h, x_row, has_row, n, t);
            }
            const float s = fp8 ? scales[n] : 1.0f;
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] = add_rn(acc[q], fp8 ? mul_rn(s, c[q]) : c[q]);
        }
        __syncthreads();  // both slots of the pair are free again
        for (int f = 2 * pair; f < 2 * pair + 2; ++f)
            if (f + slots < blocks)
                stage_block(ring + (f % slots) * slot_bytes, &bars[f % slots], weight, row_bytes_global, row_bytes,
                            row0, rows, b0 + f + slots);
    }
    gemv_pair_combine(acc, partner + strip * 128, parity == 1);
    if (threadIdx.x < slots) barrier_inval(&bars[threadIdx.x]);
}

}  // namespace mk
