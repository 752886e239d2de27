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
// Each warp streams its own 16 rows through a private ring of `depth` slots in shared memory, one k-block
// per slot: every lane copies, with cp.async, exactly the 16-byte pieces it will later feed the mma
// (rows g and g + 8, pieces t and t + 4 of each 128-byte chunk), so it needs no barrier, only its own
// copy groups (cp.async.wait_group). Bytes in flight then cost no registers (the register-buffered v2
// held 64 per thread, which the megakernel cannot afford beside the other ops: D16). Within a slot, row
// r's piece c sits at piece c ^ 4 (r & 1), so the two rows a quarter-warp reads at once use all 32 banks.
constexpr int PIECE = 16;
constexpr int MAX_DEPTH = 6;           // k-blocks in flight per warp
constexpr int MAX_SLICE_BLOCKS = 256;  // k-blocks of one k-slice (k <= 32768)

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy_async16(u32 dst, const void* src) {  // dst: a shared-memory address
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ uint4 load_shared16(u32 at) {
    uint4 r;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(at));
    return r;
}

__device__ __forceinline__ void copies_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// Wait until at most `pending` (0 .. MAX_DEPTH - 1) of this thread's newest copy groups are in flight.
__device__ __forceinline__ void copies_wait(int pending) {
    switch (pending) {
        case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
        case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
        case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
        case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
        case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
        default: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    }
}
static_assert(MAX_DEPTH == 6, "copies_wait covers pending 0 .. MAX_DEPTH - 1");

__device__ __forceinline__ int swizzled(int piece, int row) {
    return piece ^ ((row & 1) << 2);
}

// A lane's 2 x 16 bytes of rows g and g + 8 of one 128-byte chunk of a k-block (fp8: the block; bf16:
// half h of it), at bytes 64 i + 16 t of the chunk.
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

// The k index (within the 128-wide block) of element e of mma step j (0..7) for lane t: fp8 lanes hold
// 16-element runs at 64 i + 16 t of the block; bf16 lanes 8-element runs at 32 i + 8 t.
__device__ __forceinline__ int element_k(bool fp8, int j, int t) {
    return fp8 ? (j >> 2) * 64 + 16 * t + 4 * (j & 3) : (j >> 1) * 32 + 8 * t + 4 * (j & 1);
}

// The mma steps of one chunk into the block partial c: fp8, steps 0..7 of its block; bf16, steps
// 4 h .. 4 h + 3 of its block.
__device__ __forceinline__ uint2 load_shared8(u32 at) {
    uint2 r;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "r"(at));
    return r;
}

// x_row: the shared-memory address of this lane's input row (k-block 0 of the slice).
__device__ __forceinline__ void chunk_steps(float (&c)[4], const Chunk& w, bool fp8, int h, u32 x_row, bool has_row,
                                            int x_block, int t) {
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
            const uint2 xv = load_shared8(x_row + 2 * (x_block * K_BLOCK + k));
            b[0] = xv.x;
            b[1] = xv.y;
        }
        mma_16816(c, a, b);
    }
}

// This lane's pieces of k-block `block` of its warp's 16 rows into `slot` [16 rows][row_bytes], then one
// commit (a group per block). row_g: the lane's row g; row g + 8 lies g8_delta bytes further (rows past the
// last valid one repeat it).
__device__ __forceinline__ void stage_block(u32 slot, const u8* row_g, u32 g8_delta, int row_bytes, int block,
                                            int g, int t) {
    const u8* src = row_g + static_cast<size_t>(block) * row_bytes;
    for (int piece = t; piece < row_bytes / PIECE; piece += 4) {
        copy_async16(slot + g * row_bytes + PIECE * swizzled(piece, g), src + PIECE * piece);
        copy_async16(slot + (g + 8) * row_bytes + PIECE * swizzled(piece, g + 8), src + g8_delta + PIECE * piece);
    }
    copies_commit();
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

// A tile's weight stream: one or two passes (NORM_GATE_UP's gate and up rows; a 256-row head in two
// halves) over the same k-blocks, each of `rows` (<= 128, the same for both) rows from row0 of its weight
// (fp8 with bf16 block scales, or bf16 with scale nullptr; fp8: row0 a multiple of 128, one scale row).
// The passes form one stream per warp, so the second pass's first blocks are in flight while the first
// pass ends, and the stream's first blocks are requested before the tile's prologue runs (weights do not
// depend on activations).
struct Pass {
    const u8* weight;
    const __nv_bfloat16* scale;
    int row0;
};

struct Stream {
    Pass first, second;  // named, not an array: a run-time index would put them in local memory
    int passes, rows, k, b0, b1;
    bool fp8;
    u8* ring;  // the 16 warps' slots (at least one 16-row block each)
    int ring_bytes;
    float* scales;  // shared: passes x (b1 - b0) block scales (<= MAX_SLICE_BLOCKS)

    __device__ int row_bytes() const { return K_BLOCK * (fp8 ? 1 : 2); }
    __device__ int slot_bytes() const { return WARP_ROWS * row_bytes(); }
    __device__ int depth() const { return min(MAX_DEPTH, ring_bytes / (TILE_WARPS * slot_bytes())); }
    __device__ int valid(int strip) const { return rows - strip * WARP_ROWS; }
    __device__ int mine(int parity) const { return b1 - b0 > parity ? (b1 - b0 - parity + 1) / 2 : 0; }
    __device__ u32 slots(int warp) const { return smem_addr(ring) + static_cast<u32>(warp * depth() * slot_bytes()); }

    // This lane's source row g at k-block b0 of a pass, and the distance to its row g + 8 (rows past the
    // last valid one repeat it).
    __device__ const u8* lane_source(const Pass& p, int strip, int g) const {
        const int v = valid(strip);
        return p.weight + static_cast<size_t>(p.row0 + strip * WARP_ROWS + min(g, v - 1)) * k * (fp8 ? 1 : 2) +
               static_cast<size_t>(b0) * row_bytes();
    }
    __device__ u32 g8_delta(int strip, int g) const {
        const int v = valid(strip);
        return static_cast<u32>((min(g + 8, v - 1) - min(g, v - 1)) * k * (fp8 ? 1 : 2));
    }
};

// All TILE_THREADS threads, before the prologue: the block scales into shared memory (read per block from
// L2 they would stall it) and each warp's first `depth` blocks requested. Visible after a __syncthreads.
__device__ inline void stream_begin(const Stream& st) {
    const int blocks = st.b1 - st.b0;
    if (st.fp8)
        for (int i = threadIdx.x; i < st.passes * blocks; i += TILE_THREADS) {
            const Pass& p = i < blocks ? st.first : st.second;
            st.scales[i] = __bfloat162float(p.scale[static_cast<size_t>(p.row0 / ROW_BLOCK) * (st.k / K_BLOCK) +
                                                     st.b0 + i % blocks]);
        }
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
    const int strip = warp & 7, parity = warp >> 3, n_mine = st.mine(parity), total = n_mine * st.passes;
    if (st.valid(strip) <= 0) return;
    const u32 slots = st.slots(warp), delta = st.g8_delta(strip, g);
    for (int u = 0; u < min(st.depth(), total); ++u)
        stage_block(slots + u * st.slot_bytes(), st.lane_source(u < n_mine ? st.first : st.second, strip, g), delta,
                    st.row_bytes(), parity + 2 * (u % n_mine), g, t);
}

// All TILE_THREADS threads, after stream_begin and a __syncthreads: the sums of each pass's rows for the
// input rows x [m, x_stride] (shared memory, k-blocks b0 onwards, m <= 8) -> y[p][input * y_stride + i]
// (shared). Warp (strip, parity) computes 16 rows over the blocks of its parity: each block's 8 mma steps
// sum into a fresh fp32 partial, acc += scale x partial in block order; then (even) + (odd), in that
// order. `partner`: 8 x 128 floats. Ends with a __syncthreads (y complete, ring and partner free).
__device__ inline void stream_finish(const Stream& st, const __nv_bfloat16* x, int x_stride, int m, float* y0,
                                     float* y1, int y_stride, float* partner) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
    const int strip = warp & 7, parity = warp >> 3, n_mine = st.mine(parity), total = n_mine * st.passes;
    const int depth = st.depth(), blocks = st.b1 - st.b0;
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    if (st.valid(strip) > 0 && total > 0) {
        // everything the loop needs, computed once (the Stream itself is not kept live)
        const u32 slots = st.slots(warp), delta = st.g8_delta(strip, g), slot_bytes = st.slot_bytes();
        const u8* src_first = st.lane_source(st.first, strip, g);
        const u8* src_second = st.lane_source(st.second, strip, g);
        const u32 x_row = smem_addr(x) + 2 * g * x_stride, scales = smem_addr(st.scales);
        const bool has_row = g < m, fp8 = st.fp8;
        const int row_bytes = st.row_bytes();
        int issued = min(depth, total);
        for (int u = 0; u < total; ++u) {
            copies_wait(issued - u - 1);  // block u has landed (this lane's pieces: all it reads)
            const u32 slot = slots + (u % depth) * slot_bytes;
            const bool second = u >= n_mine;
            const int n = parity + 2 * (second ? u - n_mine : u);
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int h = 0; h < (fp8 ? 1 : 2); ++h) {
                Chunk w;
                read_chunk(w, slot, row_bytes, g, h, t);
                chunk_steps(c, w, fp8, h, x_row, has_row, n, t);
            }
            float s = 1.0f;
            if (fp8) asm volatile("ld.shared.f32 %0, [%1];" : "=f"(s) : "r"(scales + 4 * ((second ? blocks : 0) + n)));
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const float v = fp8 ? mul_rn(s, c[q]) : c[q];
                if (second) acc[1][q] = add_rn(acc[1][q], v);
                else acc[0][q] = add_rn(acc[0][q], v);
            }
            if (issued < total) {  // the slot is free again: the block `depth` ahead goes into it
                const bool later_second = issued >= n_mine;
                stage_block(slot, later_second ? src_second : src_first, delta, row_bytes,
                            parity + 2 * (later_second ? issued - n_mine : issued), g, t);
                ++issued;
            }
        }
    }
    auto finish = [&](float (&a)[4], float* y) {
        gemv_pair_combine(a, partner + strip * 128, parity == 1);
        if (parity == 0) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int i = strip * WARP_ROWS + g + 8 * (q >> 1), input = 2 * t + (q & 1);
                if (i < st.rows && input < m) y[input * y_stride + i] = a[q];
            }
        }
        __syncthreads();  // partner free for the next pass; y complete
    };
    finish(acc[0], y0);
    if (st.passes == 2) finish(acc[1], y1);
}

}  // namespace mk
