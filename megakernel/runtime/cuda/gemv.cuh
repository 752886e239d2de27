// Block-scaled GEMV on tensor cores: one warp computes 16 output rows of W x over one k-slice, for up
// to 8 input rows at once (the 8 columns of an m16n8k16 mma: column n = input row n, so an input row's
// result never depends on the other rows present).
//
// Numerics (megakernel/model/plan.py, docs/ISA.md "Sum order"): for each 128-wide k-block, 8 mma steps sum the
// block's products into a fresh fp32 partial; the k-blocks of a 16-row strip are dealt round-robin to the
// strip's P warps ("phases", P = 16 / strips: 2 for a 128-row pass, 16 for a 16-row one), each
// accumulating scale[row / 128, block] x partial over its blocks in order (mul_rn, add_rn: no contraction,
// no flush), and the phases' sums are added in phase order (combine_phases); bf16 weights have no scale.
// P depends only on the pass's row count, never on M or the build. Inside a block the reduction axis is
// permuted (fp8: by the unit layout below; bf16: a lane owns
// a row's 16-byte pieces at 64 i + 16 t) and the activations are read in the same permuted order, so the
// products are the true ones. The weights reach the lanes through a per-warp ring in shared memory.
//
// fp8 e4m3 weights are widened exactly to f16 (one hardware cvt per two weights) and multiply an f16
// copy of the input: per (input row, k-block) a power of two 2^P moves the block's largest binade to 2^15
// and x' = f16(x 2^P) (f16_operand below; megakernel/reference/ops.py f16_operand is the same rule), so
// the block partial is of x' and the warp accumulates (scale x partial) x 2^-P. bf16 weights multiply the
// bf16 input as it is.
//
// Used by the discrete kernels (discrete/kernels.cu) and the megakernel (megakernel.cu): one implementation.
#pragma once

#include "common.cuh"

namespace mk {

constexpr int K_BLOCK = 128;
constexpr int ROW_BLOCK = 128;
constexpr int WARP_ROWS = 16;

// A streaming 16-byte read past L1 (the read-bandwidth probe, discrete/kernels.cu).
__device__ __forceinline__ uint4 load_stream(const void* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ u32 e4m3x2_to_f16x2(u32 two_bytes) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes & 0xFFFFu), __NV_E4M3);
    return *reinterpret_cast<const u32*>(&h);
}

// Four e4m3 bytes -> two f16x2 (bytes 0, 1 -> lo; bytes 2, 3 -> hi), exact. Each half is handed to the
// conversion as a 16-bit register, so the high one compiles to the conversion's .H1 operand selector
// rather than a shift before it (16 instructions fewer per 2 KB unit, D39).
#ifndef MK_HOST_SIMT  // tests/simt/simt.h: the same conversion by CUDA's host-side function
__device__ __forceinline__ void e4m3x4_to_f16x2(u32 four_bytes, u32& lo, u32& hi) {
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
        : "=r"(lo), "=r"(hi) : "r"(four_bytes));
}
#endif

// d += a (16 x 16, row-major fragment) x b (16 x 8, column-major fragment), fp32 accumulate; F16: f16
// operands (widened fp8 weights), else bf16.
#ifndef MK_HOST_SIMT  // tests/simt/simt.h: a host model of the warp's product
template <bool F16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
    if (F16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// --- weights staged through shared memory ------------------------------------------------------------
// Each warp streams its own 16 rows through a private ring of `depth` slots in shared memory, one k-block
// per slot, by cp.async. fp8: every lane copies exactly the 16-byte pieces it will later feed the mma (its
// four vectors of the unit), so it needs no barrier, only its own copy groups (cp.async.wait_group).
// bf16 (row-major): the lanes copy whole 128-byte lines, pieces that other lanes feed to the mma, so the
// warp meets (__syncwarp) after its wait and before it refills a slot; copied as the lanes read them (half
// lines), the head streamed at 89 % of the read bandwidth with L2 at 96 % busy, in whole lines at 100 %
// (D47). Bytes in flight then cost no registers (the register-buffered v2
// held 64 per thread, which the megakernel cannot afford beside the other ops: D16). Within a slot, row
// r's piece c of a bf16 block sits at piece c ^ 4 (r & 1), so the two rows a quarter-warp reads at once
// use all 32 banks (an fp8 unit's vectors are read back where they were written: no conflict).
constexpr int PIECE = 16;
constexpr int MAX_DEPTH = 6;           // k-blocks in flight per warp
constexpr int MAX_SLICE_BLOCKS = 256;  // k-blocks of one k-slice (k <= 32768)

// The input rows' stride in shared memory (elements): a k-slice's width, plus 64 bytes where there are
// several rows. A quarter-warp's x fragment reads rows g and g + 1 (mma columns) at the same offset; with
// rows a multiple of 128 bytes apart those are the same banks (a two-way conflict on every fragment read
// at M > 1), 64 bytes apart they are disjoint. The layout only: the values and the sums are the same.
constexpr int X_PAD = 32;
__device__ __forceinline__ int x_stride_of(int width, int m) { return m > 1 ? width + X_PAD : width; }

// --- the f16 operand of an fp8 GEMV ------------------------------------------------------------------
// The bf16 input rows src [m][src_stride] (global or shared memory) over `blocks` k-blocks become x [m][
// x_stride] = f16(src 2^P) in shared memory (x may be src: in place), P per (row, block) = 142 - max(E, 17)
// for the block's largest biased exponent E, kept in p[row * MAX_SLICE_BLOCKS + block] (blocks <=
// MAX_SLICE_BLOCKS). A half-warp per (row, block); lane l converts elements 8 l .. 8 l + 7. All threads;
// ends synced.
constexpr int F16_TOP_BINADE = 15;      // megakernel/reference/ops.py, checked by discrete/kernels.py
constexpr int TOP_EXPONENT_FLOOR = 17;  // 2^P stays <= 2^125, a normal float

// Two f32 -> f16 conversions in one instruction (cvt.rn.f16x2.f32: each rounded to nearest, as
// __float2half_rn): conversions issue at an eighth of the multiply rate, and they set the price of the
// f16 operand at M = 8.
__device__ __forceinline__ u32 f16x2_scaled(u32 bf16x2, float two_p) {
    const float lo = mul_rn(__uint_as_float(bf16x2 << 16), two_p);
    const float hi = mul_rn(__uint_as_float(bf16x2 & 0xFFFF0000u), two_p);
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const u32*>(&h);
}

// P of a k-block whose largest biased exponent is `top`.
__device__ __forceinline__ int p_of_top(u32 top) {
    return 127 + F16_TOP_BINADE - max(static_cast<int>(top), TOP_EXPONENT_FLOOR);
}

// P of a k-block from the top exponents of its 16 pieces, one per lane of a half-warp: `lanes` the lanes
// taking part (the half-warp's at least).
__device__ __forceinline__ int block_p(u32 top, u32 lanes) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) top = max(top, __shfl_xor_sync(lanes, top, o));
    return p_of_top(top);
}

// 2^P as a float, and f16(v 2^P) of a piece's 8 bf16 values (4 packed words).
__device__ __forceinline__ float two_to(int P) { return __int_as_float((127 + P) << 23); }

__device__ __forceinline__ uint4 f16_piece(const uint4& v, float two_p) {
    return make_uint4(f16x2_scaled(v.x, two_p), f16x2_scaled(v.y, two_p), f16x2_scaled(v.z, two_p),
                      f16x2_scaled(v.w, two_p));
}

// The largest exponent of a piece's 8 values: that of the largest magnitude (a bf16's magnitude bits order
// as its absolute value), found by paired 16-bit maxima.
__device__ __forceinline__ u32 piece_top(const uint4& v) {
    constexpr u32 MAG = 0x7FFF7FFFu;
    const u32 mag = __vmaxu2(__vmaxu2(v.x & MAG, v.y & MAG), __vmaxu2(v.z & MAG, v.w & MAG));
    return max(mag & 0xFFFFu, mag >> 16) >> 7;
}

// The tiles run it in place after their prologue (gemv_tile.cuh gemv_main_input), which leaves the bf16
// rows in shared memory. Rows are read in 16-byte pieces: src_stride and x_stride are multiples of
// 8 elements (rows of k-blocks).
__device__ inline void f16_operand(const bf16* src, int src_stride, bf16* x, int x_stride, int m, int blocks,
                                   signed char* p) {
    const int lane = threadIdx.x & 31, l = lane & 15, pairs = m * blocks;
    // warp w takes pairs 2 w + (0, 1), then 2 (w + TILE_WARPS) + ..: the same trip count on all its lanes,
    // so the shuffles (within each half-warp) always have all 32. (row, block) of the pair advance by
    // whole rows and blocks, not by a division per pair.
    constexpr int STEP = 2 * TILE_WARPS;
    const int first = 2 * (threadIdx.x >> 5) + (lane >> 4), step_row = STEP / blocks, step_block = STEP % blocks;
    int row = first / blocks, block = first % blocks;
    for (int pair = first; pair - (lane >> 4) < pairs; pair += STEP, row += step_row, block += step_block) {
        if (block >= blocks) block -= blocks, ++row;
        const bool on = pair < pairs;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (on) v = reinterpret_cast<const uint4*>(src + static_cast<size_t>(row) * src_stride + block * K_BLOCK)[l];
        const int P = block_p(piece_top(v), 0xFFFFFFFFu);
        if (on) {
            reinterpret_cast<uint4*>(x + static_cast<size_t>(row) * x_stride + block * K_BLOCK)[l] = f16_piece(v, two_to(P));
            if (l == 0) p[row * MAX_SLICE_BLOCKS + block] = static_cast<signed char>(P);
        }
    }
    __syncthreads();
}

#ifndef MK_HOST_SIMT  // tests/simt/simt.h: these on the CPU, shared memory as a window of host memory
__device__ __forceinline__ u32 dynamic_smem_bytes() {
    u32 r;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy_async16(u32 dst, const void* src) {  // dst: a shared-memory address
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

// Weights are read once a step: their lines go first when L2 needs room, so that what is read again soon
// (the Program's words and records, activations) stays in L2 across a word's stream.
__device__ __forceinline__ u64 evict_first_policy() {
    u64 p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

__device__ __forceinline__ void copy_async16_once(u32 dst, const void* src) {  // read once a step
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "l"(evict_first_policy()) : "memory");
}

__device__ __forceinline__ void copies_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
#endif

// --- a prologue's inputs staged into shared memory ------------------------------------------------
// A prologue reads its input rows (and norm weights) from global memory once, by async copies that are
// all in flight together: a load-then-use loop waits on memory once per piece and row in each thread,
// which made a tile's prologue cost 5-20 us (experiments/tile_phases.py). Staging changes no
// arithmetic. The pieces are 16 bytes where the source rows allow, else 8 or 4 (a row slice of a buffer
// whose row is not a multiple of 16 bytes, e.g. the tiny model's in_proj output).

// The largest async-copy size (16, 8 or 4 bytes) that an address or stride `align` allows.
__device__ __forceinline__ int piece_bytes(size_t align) { return align % 16 == 0 ? 16 : align % 8 == 0 ? 8 : 4; }

#ifndef MK_HOST_SIMT
__device__ __forceinline__ void copy_async_piece(u32 dst, const void* src, int piece) {
    if (piece == 16) copy_async16(dst, src);
    else if (piece == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
#endif

// Rows [0, m) of src (row stride src_stride elements; src and the stride at least 4-byte aligned) over
// `width` elements (a multiple of 8) into dst [m][dst_stride] in shared memory (16-byte aligned rows).
// All threads issue copies; none waits (stage_wait).
__device__ inline void stage_rows(const bf16* src, size_t src_stride, bf16* dst, int dst_stride, int m, int width) {
    const int piece = piece_bytes(reinterpret_cast<size_t>(src) | (src_stride * 2));
    for (int r = 0; r < m; ++r) {
        const u8* from = reinterpret_cast<const u8*>(src + r * src_stride);
        const u32 to = smem_addr(dst + r * dst_stride);
        for (int c = piece * threadIdx.x; c < 2 * width; c += piece * TILE_THREADS) copy_async_piece(to + c, from + c, piece);
    }
}

// `bytes` (a multiple of 16) from src (16-byte aligned) into dst in shared memory; as stage_rows.
__device__ inline void stage_bytes(const void* src, u8* dst, int bytes) {
    for (int i = threadIdx.x; i < bytes / 16; i += TILE_THREADS)
        copy_async16(smem_addr(dst + 16 * i), reinterpret_cast<const u8*>(src) + 16 * i);
}

// Every staged copy of this thread has landed and the block sees all of them. All threads.
__device__ __forceinline__ void stage_wait() {
    copies_commit();
#ifdef MK_HOST_SIMT
    copies_wait(0);  // tests/simt/simt.h: the copies land here
#else
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
    __syncthreads();
}

__device__ __forceinline__ int weight_bytes(const Weight& w) { return w.dtype == DT_F32 ? 4 : 2; }

// Element d of a bf16 or fp32 weight staged at `base` (shared memory), as float.
__device__ __forceinline__ float staged_value(const u8* base, int dtype, int d) {
    return dtype == DT_F32 ? reinterpret_cast<const float*>(base)[d] : bf(reinterpret_cast<const bf16*>(base)[d]);
}

// 2^-P of a kept P (P in [-113, 125]: a normal float).
__device__ __forceinline__ float unscale_of(signed char P) { return __int_as_float((127 - P) << 23); }


#ifndef MK_HOST_SIMT
__device__ __forceinline__ uint4 load_shared16(u32 at) {
    uint4 r;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(at));
    return r;
}
#endif


// Wait until at most `pending` (0 .. MAX_DEPTH - 1) of this thread's newest copy groups are in flight.
#ifndef MK_HOST_SIMT  // tests/simt/simt.h: a copy group lands there at this wait
__device__ __forceinline__ void copies_wait(int pending) {
    switch (pending) {
        case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
        case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
        case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
        case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
        case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
        case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
        default: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    }
}
#endif
static_assert(MAX_DEPTH == 6, "copies_wait covers pending 0 .. MAX_DEPTH");

__device__ __forceinline__ int swizzled(int piece, int row) {
    return piece ^ ((row & 1) << 2);
}

// --- fp8 weights: 16-row units (megakernel/runtime/weight_layout.py) ------------------------------------------
// Unit (strip, k-block) is 2 KB contiguous, strips in order and k-blocks in order within a strip; lane
// L = 4 g + t reads its 16-byte vector i (i = 0..3) at 512 i + 16 L: for mma steps 2i and 2i + 1 the
// words (4 weights each) of rows g, g + 8 at k = 32 i + 8 t + 4 h + e, as [step 2i: row g, row g + 8 |
// step 2i + 1: row g, row g + 8]. A warp's copy of a unit is 4 fully used 512-byte lines, and the x
// fragment of two steps is one 16-byte read (x[32 i + 8 t .. + 7]).
constexpr int UNIT_BYTES = WARP_ROWS * K_BLOCK;

// This lane's four vectors of a unit into its slot (`unit` and `slot` already at the lane's 16 L), one
// commit; the lane alone reads them back, so it needs no barrier.
__device__ __forceinline__ void stage_unit(u32 slot, const u8* unit) {
#pragma unroll
    for (int i = 0; i < 4; ++i) copy_async16_once(slot + 512 * i, unit + 512 * i);
    copies_commit();
}

// The 8 mma steps of one staged unit into the block partial c; x_block: the f16 operand's 128 values of
// this k-block for the lane's input row g (read only when has_row).
__device__ __forceinline__ void unit_steps(float (&c)[4], u32 slot, const __nv_bfloat16* x_block, bool has_row,
                                           int t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint4 v = load_shared16(slot + 512 * i);
        uint4 xv = make_uint4(0u, 0u, 0u, 0u);
        if (has_row) xv = *reinterpret_cast<const uint4*>(x_block + 32 * i + 8 * t);
        u32 a[4];
        e4m3x4_to_f16x2(v.x, a[0], a[2]);
        e4m3x4_to_f16x2(v.y, a[1], a[3]);
        const u32 b0[2] = {xv.x, xv.y};
        mma_16816<true>(c, a, b0);
        e4m3x4_to_f16x2(v.z, a[0], a[2]);
        e4m3x4_to_f16x2(v.w, a[1], a[3]);
        const u32 b1[2] = {xv.z, xv.w};
        mma_16816<true>(c, a, b1);
    }
}

// --- bf16 weights: row-major ------------------------------------------------------------------------
// A lane's 2 x 16 bytes of rows g and g + 8 of one 128-byte chunk (half h of a 256-byte bf16 k-block),
// at bytes 64 i + 16 t of the chunk.
struct Chunk {
    uint4 row_g[2];
    uint4 row_g8[2];
};

__device__ __forceinline__ void read_chunk(Chunk& w, u32 slot, int row_bytes, int r, int h, int t) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int piece = 8 * h + 4 * i + t;
        w.row_g[i] = load_shared16(slot + r * row_bytes + PIECE * swizzled(piece, r));
        w.row_g8[i] = load_shared16(slot + (r + 8) * row_bytes + PIECE * swizzled(piece, r + 8));
    }
}

// Steps 4 h .. 4 h + 3 of a bf16 block into the block partial c: lane t's 8-element runs at 32 i + 8 t.
__device__ __forceinline__ void chunk_steps(float (&c)[4], const Chunk& w, int h, const __nv_bfloat16* x_row,
                                            bool has_row, int x_block, int t) {
    const u32* rg = reinterpret_cast<const u32*>(w.row_g);
    const u32* rg8 = reinterpret_cast<const u32*>(w.row_g8);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const u32 a[4] = {rg[2 * j], rg8[2 * j], rg[2 * j + 1], rg8[2 * j + 1]};
        u32 b[2] = {0u, 0u};
        if (has_row) {
            const int k = (h * 4 + j) / 2 * 32 + 8 * t + 4 * (j & 1);
            const uint2 xv = *reinterpret_cast<const uint2*>(x_row + x_block * K_BLOCK + k);
            b[0] = xv.x;
            b[1] = xv.y;
        }
        mma_16816<false>(c, a, b);
    }
}

// This lane's pieces of k-block `block` of its warp's 16 rows into `slot` [16 rows][row_bytes], then one
// commit (a group per block): lane l copies pieces l % 8 and l % 8 + 8 of rows l / 8 + 4 i, so that each
// copy instruction of the warp asks for four whole 128-byte lines (the lanes read other lanes' pieces:
// stream_blocks meets the warp before it reads a block and before it refills a slot). row0: the strip's
// first row at block 0 of the slice, row_stride bytes apart; rows past `last` repeat it.
__device__ __forceinline__ void stage_block(u32 slot, const u8* row0, u32 row_stride, int last, int row_bytes,
                                            int block, int lane) {
    const u8* src = row0 + static_cast<size_t>(block) * row_bytes;
#pragma unroll 1
    for (int i = 0; i < WARP_ROWS / 4; ++i) {
        const int r = lane / 8 + 4 * i;
        const u8* row = src + static_cast<size_t>(min(r, last)) * row_stride;
        for (int piece = lane % 8; piece < row_bytes / PIECE; piece += 8)
            copy_async16_once(slot + r * row_bytes + PIECE * swizzled(piece, r), row + PIECE * piece);
    }
    copies_commit();
}

// The warps of a pass over `rows` (1..128) rows: strips of 16 rows, and each strip's k-blocks dealt
// round-robin to `phases` warps, so all 16 warps stream whatever the row count (8 strips: 2 phases, the
// even and the odd blocks; 4 strips: 4; 3: 5, one warp idle; 1: 16). Warp w is strip w % strips, phase
// w / strips: phase 0 of strip s is warp s.
struct WarpRole {
    int strip, phase, phases;
    __device__ explicit WarpRole(int rows) {
        const int warp = threadIdx.x >> 5, strips = (rows + WARP_ROWS - 1) / WARP_ROWS;
        strip = warp % strips;
        phase = warp / strips;
        phases = TILE_WARPS / strips;
    }
};

// One warp's share of a GEMV pass over `rows` (<= 128) rows of W [.., k] from row0 and the k-blocks [b0, b1):
// warp (strip, phase) streams the 16 rows of its strip over blocks phase, phase + phases, .. of the slice
// through its own ring of `depth` slots.
struct StripStream {
    const u8* units;   // fp8: the lane's bytes of the strip's first unit of the slice
    const u8* strip_row0;  // bf16: the strip's first row at block b0
    u32 rows_at, slots;  // bf16: the rows' stride in bytes | the strip's last valid row << 28
    int depth, mine, phase, phases;
    bool fp8;
    __device__ int row_bytes() const { return K_BLOCK * (fp8 ? 1 : 2); }
    __device__ int slot_bytes() const { return WARP_ROWS * row_bytes(); }
    __device__ StripStream(bool fp8, const u8* weight, int k, int row0, int rows, int b0, int b1, u8* ring,
                           int ring_bytes)
        : fp8(fp8) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const WarpRole role(rows);
        const int blocks = b1 - b0, valid = rows - role.strip * WARP_ROWS;
        phase = role.phase;
        phases = role.phases;
        depth = min(MAX_DEPTH, ring_bytes / (TILE_WARPS * slot_bytes()));
        mine = phase < phases && blocks > phase ? (blocks - phase + phases - 1) / phases : 0;
        const size_t row_bytes_global = static_cast<size_t>(k) * (fp8 ? 1 : 2);
        units = weight + (static_cast<size_t>((row0 + role.strip * WARP_ROWS) / WARP_ROWS) * (k / K_BLOCK) + b0) *
                UNIT_BYTES + PIECE * lane;
        strip_row0 = weight + static_cast<size_t>(row0 + role.strip * WARP_ROWS) * row_bytes_global +
                     static_cast<size_t>(b0) * row_bytes();
        rows_at = static_cast<u32>(row_bytes_global) | static_cast<u32>(min(valid - 1, WARP_ROWS - 1)) << 28;  // a row <= 64 KB
        slots = smem_addr(ring) + static_cast<u32>(warp * depth * slot_bytes());
    }
    __device__ u32 slot_at(int slot) const { return slots + slot * slot_bytes(); }
    // Whether this warp primes its slots (prime_ring) when a tile primes the ring's first `bytes`: where they lie
    // within them, but for the megakernel's warp 0, whose thread 0 polls the tile's input counters once the prime
    // is issued: issuing its share of up to 192 KB of copies, throttled behind the SM's outstanding ones, held the
    // poll ~2 us (D58); its ring is filled when the pass starts, as an unprimed warp's (the megakernel 1 % faster at
    // M = 1, level at M = 8: D79).
    __device__ bool primes(int bytes) const {
#ifndef MK_DISCRETE_BUILD
        if (threadIdx.x < 32) return false;
#endif
        return ((threadIdx.x >> 5) + 1) * depth * slot_bytes() <= bytes;
    }
    // The ring's first `depth` blocks, one copy group a slot (empty groups past this warp's last block).
    __device__ void fill() const {
        for (int i = 0; i < depth; ++i) {
            if (i < mine) stage(i, i);
            else copies_commit();
        }
    }
    // The slice's k-block (relative to b0) of this warp's j-th block.
    __device__ int block(int j) const { return phase + phases * j; }
    // This warp's block j into `slot`: one copy group.
    __device__ void stage(int slot, int j) const {
        const int lane = threadIdx.x & 31;
        if (fp8) stage_unit(slot_at(slot) + PIECE * lane, units + static_cast<size_t>(block(j)) * UNIT_BYTES);
        else stage_block(slot_at(slot), strip_row0, rows_at & 0x0FFFFFFFu, static_cast<int>(rows_at >> 28), row_bytes(),
                         block(j), lane);
    }
};

#ifndef MK_HOST_SIMT  // tests/simt/simt.h: the same store into its shared-memory window
__device__ __forceinline__ void store_shared16(u32 at, const float (&v)[4]) {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(at), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
}
#endif

// A strip's sum = ((phase 0 + phase 1) + phase 2) + .., into phase 0's acc: the other phases leave their
// acc in their own ring slots (their streams are over: every copy they issued has landed and been read).
// Phase q of this strip is warp strip + q strips (WarpRole). All threads; ends synced.
__device__ __forceinline__ void combine_phases(float (&acc)[4], const StripStream& st, int rows) {
    const int lane = threadIdx.x & 31, strips = (rows + WARP_ROWS - 1) / WARP_ROWS;
    const u32 warp_slots = static_cast<u32>(st.depth * st.slot_bytes());
    if (st.phase > 0 && st.phase < st.phases) store_shared16(st.slots + 16 * lane, acc);
    __syncthreads();
    if (st.phase == 0) {
        for (int q = 1; q < st.phases; ++q) {
            const uint4 v = load_shared16(st.slots + (q * strips) * warp_slots + 16 * lane);
            acc[0] = add_rn(acc[0], __uint_as_float(v.x));
            acc[1] = add_rn(acc[1], __uint_as_float(v.y));
            acc[2] = add_rn(acc[2], __uint_as_float(v.z));
            acc[3] = add_rn(acc[3], __uint_as_float(v.w));
        }
    }
}

// One warp's blocks of a pass, landed in order into acc (gemv_block_rows below). FP8: the dtype; DEPTH:
// the ring's depth fixed at compile time, or 0 for st.depth at run time. Every iteration commits one copy
// group, an empty one once the blocks run out, so block j always has exactly depth - 1 newer groups: with
// DEPTH fixed its wait is one instruction (a run-time count compiles to a chain of branches, D39). fp8:
// the caller has filled the ring, behind the pass's scales (gemv_block_rows, prime_ring).
template <bool FP8, int DEPTH>
__device__ __forceinline__ void stream_blocks(float (&acc)[4], const StripStream& st, const __nv_bfloat16* x,
                                              const signed char* x_p, int x_stride, int m, const float* scales) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const __nv_bfloat16* x_row = x + static_cast<size_t>(g) * x_stride;
    const bool has_row = g < m;
    const int depth = DEPTH > 0 ? DEPTH : st.depth;
    if (!FP8) st.fill();
    int slot = 0;  // j % depth, kept as a counter
    for (int j = 0; j < st.mine; ++j) {
#ifdef MK_HOST_SIMT
        copies_wait(depth - 1);  // block j has landed
#else
        if (DEPTH > 0) asm volatile("cp.async.wait_group %0;" ::"n"(DEPTH > 0 ? DEPTH - 1 : 0) : "memory");
        else copies_wait(depth - 1);  // block j has landed
#endif
        if (!FP8) __syncwarp();  // bf16: every lane's pieces of it
        const int n = st.block(j);
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (FP8) {
            unit_steps(c, st.slot_at(slot) + PIECE * lane, x_row + n * K_BLOCK, has_row, t);
            const float s = scales[n];
            const signed char* p = x_p + 2 * t * MAX_SLICE_BLOCKS + n;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                acc[q] = add_rn(acc[q], mul_rn(mul_rn(s, c[q]), unscale_of(p[(q & 1) * MAX_SLICE_BLOCKS])));
        } else {
            for (int h = 0; h < 2; ++h) {
                Chunk w;
                read_chunk(w, st.slot_at(slot), st.row_bytes(), g, h, t);
                chunk_steps(c, w, h, x_row, has_row, n, t);
            }
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] = add_rn(acc[q], c[q]);
        }
        // the slot is free again (bf16: once every lane has read it): the block `depth` ahead goes into it
        if (!FP8) __syncwarp();
        if (j + depth < st.mine) st.stage(slot, j + depth);
        else copies_commit();
        if (++slot == depth) slot = 0;
    }
}

// fp8 (the decode step's weights): one loop per depth; bf16 (the heads): one loop for every depth, the
// megakernel's register budget holds no more (its callees spilled with bf16 loops per depth too).
template <bool FP8>
__device__ __forceinline__ void stream_blocks(float (&acc)[4], const StripStream& st, const __nv_bfloat16* x,
                                              const signed char* x_p, int x_stride, int m, const float* scales) {
    static_assert(MAX_DEPTH == 6, "one loop per depth 1 .. MAX_DEPTH");
    if (st.mine == 0) return;
    if (!FP8) return stream_blocks<FP8, 0>(acc, st, x, x_p, x_stride, m, scales);
    switch (st.depth) {
        case 1: stream_blocks<FP8, 1>(acc, st, x, x_p, x_stride, m, scales); break;
        case 2: stream_blocks<FP8, 2>(acc, st, x, x_p, x_stride, m, scales); break;
        case 3: stream_blocks<FP8, 3>(acc, st, x, x_p, x_stride, m, scales); break;
        case 4: stream_blocks<FP8, 4>(acc, st, x, x_p, x_stride, m, scales); break;
        case 5: stream_blocks<FP8, 5>(acc, st, x, x_p, x_stride, m, scales); break;
        default: stream_blocks<FP8, 6>(acc, st, x, x_p, x_stride, m, scales); break;
    }
}

constexpr int WHOLE_RING = 1 << 30;  // a primed part that holds every warp's slots

// A pass's first `depth` k-blocks issued into the rings of the warps that prime the ring's first `part` bytes
// (StripStream::primes, fill), so that they stream while the tile waits for its input rows and
// prepares them (gemv_block_rows, given the same `part`, fills the other warps' rings); returns the groups
// a primed warp issued. fp8 only.
__device__ inline int prime_ring(const u8* weight, int k, int row0, int rows, int b0, int b1, u8* ring, int ring_bytes,
                                 int part) {
    const StripStream st(true, weight, k, row0, rows, b0, b1, ring, ring_bytes);
    if (st.primes(part)) st.fill();
    return st.depth;
}

// A tile's first pass needs its rows' block scales over the slice before its first block is consumed;
// loaded when the pass starts they are a round trip behind the primed weights. They can instead be copied
// by the same async copies as the tile's input rows, as bf16 into the upper half of `scales`
// (MAX_SLICE_BLOCKS floats, free until the pass), which gemv_block_rows (`primed`) reads before it writes
// the floats. The copies are 4 bytes from the even element at or below the first (a scale row may start at
// an odd block), so the staged row begins at element (first & 1); each copy is an aligned 4-byte word that
// holds a wanted scale, so none leaves an allocation rounded to 4 bytes (the weights' 256, compiler/allocate.py;
// CuPy's 512 in the benches). No commit: the input rows' group lands them (D45).
__device__ __forceinline__ size_t scale_index(int k, int row0, int b0) {
    return static_cast<size_t>(row0 / ROW_BLOCK) * (k / K_BLOCK) + b0;
}

constexpr int STAGED_SCALES_AT = MAX_SLICE_BLOCKS / 2 - 1;  // floats into `scales`: the staged row ends with them
static_assert(4 * STAGED_SCALES_AT + 2 * (MAX_SLICE_BLOCKS + 2) <= 4 * MAX_SLICE_BLOCKS, "staged scales fit");
static_assert(MAX_SLICE_BLOCKS <= TILE_THREADS, "one scale a thread");

__device__ inline void stage_pass_scales(const __nv_bfloat16* scale, int k, int row0, int b0, int b1, float* scales) {
    u8* dst = reinterpret_cast<u8*>(scales + STAGED_SCALES_AT);
    const size_t first = scale_index(k, row0, b0);
    const int words = static_cast<int>((first & 1) + (b1 - b0) + 1) / 2;
    const u8* src = reinterpret_cast<const u8*>(scale + (first & ~static_cast<size_t>(1)));
    for (int i = threadIdx.x; i < words; i += TILE_THREADS) copy_async_piece(smem_addr(dst + 4 * i), src + 4 * i, 4);
}

// All TILE_THREADS threads: the sums of `rows` (<= 128) rows of W [.., k] from row0 (fp8 with bf16 block
// scales, or bf16 with scale nullptr) over the k-blocks [b0, b1), for input rows x [m, x_stride] (shared
// memory, k-blocks b0 onwards, m <= 8; fp8: the f16 operand, with its P per (row, block) in x_p [row *
// MAX_SLICE_BLOCKS + block - b0]). Warp (strip, phase) computes 16 rows over the blocks of its phase
// (WarpRole): each block's 8 mma steps sum into a fresh fp32 partial, acc += (scale x partial) x 2^-P in
// block order; then the phases in order (combine_phases). Lane (g, t) of warp w < strips (phase 0 of strip
// w) returns acc[0..3] = (row g, input 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) of its strip; the
// other warps' acc is undefined. `ring`: shared memory for the 16 warps' slots (at least one 16-row block
// each); `scales`: MAX_SLICE_BLOCKS floats; `primed` (fp8): the caller left this pass's scales staged and
// landed (stage_pass_scales) and filled the rings of the warps that prime the ring's first `part` bytes
// (prime_ring, StripStream::primes), and this function fills the others'; otherwise it stages
// the scales and fills every ring, the scales' copies first (D46). fp8: rows [row0, row0 + rows) must lie
// in one 128-row scale block.
__device__ inline void gemv_block_rows(float (&acc)[4], bool fp8, const u8* weight, const __nv_bfloat16* scale,
                                       int k, int row0, int rows, int b0, int b1, const __nv_bfloat16* x,
                                       const signed char* x_p, int x_stride, int m, u8* ring, int ring_bytes,
                                       float* scales, bool primed = false, int part = WHOLE_RING) {
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    const StripStream st(fp8, weight, k, row0, rows, b0, b1, ring, ring_bytes);
    // The rows' block scales for the slice, into shared memory once (one L2 read per block would stall it):
    // copied ahead of the pass's first weights, so that the two round trips overlap (a load of the scales
    // before the ring's fill put one behind the other at every pass, D46).
    if (fp8) {
        if (!primed) {
            stage_pass_scales(scale, k, row0, b0, b1, scales);
            copies_commit();
            st.fill();
            copies_wait(st.depth);  // the scales have landed
            __syncthreads();        // every thread's
        } else if (!st.primes(part)) {
            st.fill();
        }
        const size_t first = scale_index(k, row0, b0);
        const int b = threadIdx.x;  // one scale a thread
        float v = 0.0f;
        if (b < b1 - b0) v = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(scales + STAGED_SCALES_AT)[(first & 1) + b]);
        __syncthreads();  // every staged scale read before the floats overwrite them
        if (b < b1 - b0) scales[b] = v;
    }
    __syncthreads();
    // one loop per dtype: the dtype's branch stays out of the loop
    if (fp8) stream_blocks<true>(acc, st, x, x_p, x_stride, m, scales);
    else stream_blocks<false>(acc, st, x, x_p, x_stride, m, scales);
    combine_phases(acc, st, rows);
}

}  // namespace mk
