// GEMV levers, one at a time (experiments/gemv_levers.py): variants of the fp8 GEMV core with the tile
// geometry of gemv.cuh (a 512-thread block = 128 rows x one k-slice; warp (strip, parity) = 16 rows over
// the even or odd k-blocks), so each figure isolates one lever against the project's kernel:
//   LOAD   0: weights through a per-warp cp.async ring in shared memory; 1: straight into registers
//            (ld.global.nc.L1::no_allocate, two units in flight per lane)
//   WIDEN  0: e4m3 -> f16 by the hardware cvt, then f16 bits -> bf16 bits x 2^-112 (shift; x staged as
//            bf16 x 2^112, so every product is the true one); 1: e4m3 -> f16 by the cvt, x staged as f16
//            (timing only: f16 does not hold every bf16 x)
// Weights in the unit layout: unit (16-row strip, 128-wide k-block) = 2 KB contiguous, strip-major;
// lane L's 16-byte vector i at i * 512 + 16 L holds, for mma steps 2i and 2i + 1, the words of rows g and
// g + 8 (k = 32 i + 8 t + 4 h + e, h the step's parity, e = 0..3).
#include "gemv_tile.cuh"

namespace lv {
using namespace mk;

constexpr int UNIT = 2048;

// f16 bits of a widened e4m3 (exponent >= 6 or zero) -> bf16 bits of the value x 2^-112: exact.
__device__ __forceinline__ u32 shifted_bf16x2(u32 h) { return ((h & 0x7FFF7FFFu) >> 3) | (h & 0x80008000u); }

template <int WIDEN>
__device__ __forceinline__ u32 widen(u32 two) {
    const u32 h = e4m3x2_to_f16x2(two);  // gemv.cuh
    return WIDEN == 0 ? shifted_bf16x2(h) : h;
}

template <int WIDEN>
__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    const u32 b[2] = {b0, b1};
    mma_16816<WIDEN == 1>(d, a, b);  // gemv.cuh
}

// One unit's 8 mma steps into a fresh partial: v[i] = this lane's vector i; x_block: the staged input
// row's 128 values of this k-block (16-bit each).
template <int WIDEN>
__device__ __forceinline__ void register_unit_steps(float (&c)[4], const uint4 (&v)[4], const unsigned short* x_block,
                                           bool has_row, int t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (has_row) xv = *reinterpret_cast<const uint4*>(x_block + 32 * i + 8 * t);
        u32 a[4];
        a[0] = widen<WIDEN>(v[i].x); a[1] = widen<WIDEN>(v[i].y);
        a[2] = widen<WIDEN>(v[i].x >> 16); a[3] = widen<WIDEN>(v[i].y >> 16);
        mma<WIDEN>(c, a, xv.x, xv.y);
        a[0] = widen<WIDEN>(v[i].z); a[1] = widen<WIDEN>(v[i].w);
        a[2] = widen<WIDEN>(v[i].z >> 16); a[3] = widen<WIDEN>(v[i].w >> 16);
        mma<WIDEN>(c, a, xv.z, xv.w);
    }
}

// The levers' geometry: two warps per strip, (even) + (odd) (gemv.cuh combine_phases with two phases);
// partner: 8 x 128 floats of shared memory.
__device__ __forceinline__ void pair_combine(float (&acc)[4], float* partner, bool odd) {
    const int lane = threadIdx.x & 31;
    if (odd) {
#pragma unroll
        for (int r = 0; r < 4; ++r) partner[4 * lane + r] = acc[r];
    }
    __syncthreads();
    if (!odd) {
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[r] = add_rn(acc[r], partner[4 * lane + r]);
    }
}

__device__ __forceinline__ void accumulate(float (&acc)[4], const float (&c)[4], float s) {
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[q] = add_rn(acc[q], mul_rn(s, c[q]));
}

template <int LOAD, int WIDEN, int DEPTH>
__device__ void levers(const u8* weight, const bf16* scale, const bf16* x, float* out, int n, int k, int m,
                       int slices) {
    extern __shared__ __align__(16) unsigned char smem[];
    const GemvSmem sm(smem);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, warp = threadIdx.x >> 5;
    const int strip = warp & 7, parity = warp >> 3;
    const int s = blockIdx.y, kb = k / K_BLOCK;
    const int b0 = s * kb / slices, b1 = (s + 1) * kb / slices, blocks = b1 - b0, width = blocks * K_BLOCK;
    // rows 64 bytes apart modulo 128: the 8 lanes of a quarter-warp (g, g + 1; t = 0..3) hit 8 banks groups
    const int stride = width + 32;
    unsigned short* xs = reinterpret_cast<unsigned short*>(sm.x);
    for (int i = threadIdx.x; i < m * width; i += TILE_THREADS) {
        const float v = bf(x[static_cast<size_t>(i / width) * k + b0 * K_BLOCK + i % width]);
        const int at = (i / width) * stride + i % width;
        if (WIDEN == 0) {
            const bf16 b = __float2bfloat16_rn(v * 0x1p112f);
            xs[at] = *reinterpret_cast<const unsigned short*>(&b);
        } else {
            const __half h = __float2half_rn(v);
            xs[at] = *reinterpret_cast<const unsigned short*>(&h);
        }
    }
    const __nv_bfloat16* scale_row = scale + static_cast<size_t>(blockIdx.x) * kb + b0;
    for (int i = threadIdx.x; i < blocks; i += TILE_THREADS) sm.scales[i] = bf(scale_row[i]);
    __syncthreads();
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int mine = blocks > parity ? (blocks - parity + 1) / 2 : 0;
    const u8* units = weight + (static_cast<size_t>(blockIdx.x * 8 + strip) * kb + b0) * UNIT + 16 * lane;
    const unsigned short* x_row = xs + g * stride;
    const bool has_row = g < m;
    if (LOAD == 1) {
        uint4 v[DEPTH][4];
        auto load = [&](uint4 (&r)[4], int j) {
            const u8* p = units + static_cast<size_t>(parity + 2 * j) * UNIT;
#pragma unroll
            for (int i = 0; i < 4; ++i) r[i] = load_stream(p + 512 * i);
        };
#pragma unroll
        for (int d = 0; d < DEPTH; ++d)
            if (d < mine) load(v[d], d);
        for (int j = 0; j < mine; j += DEPTH) {
#pragma unroll
            for (int d = 0; d < DEPTH; ++d) {
                if (j + d < mine) {
                    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    const int nb = parity + 2 * (j + d);
                    register_unit_steps<WIDEN>(c, v[d], x_row + nb * K_BLOCK, has_row, t);
                    if (j + d + DEPTH < mine) load(v[d], j + d + DEPTH);
                    accumulate(acc, c, sm.scales[nb]);
                }
            }
        }
    } else {
        u8* ring = sm.ring(m * stride);
        const int depth = min(MAX_DEPTH, sm.ring_bytes(m * stride) / (TILE_WARPS * UNIT));
        const u32 slots = smem_addr(ring) + static_cast<u32>(warp * depth * UNIT) + 16 * lane;
        auto stage = [&](int slot, int j) {
            const u8* p = units + static_cast<size_t>(parity + 2 * j) * UNIT;
#pragma unroll
            for (int i = 0; i < 4; ++i) copy_async16(slots + slot * UNIT + 512 * i, p + 512 * i);
            copies_commit();
        };
        int issued = 0;
        for (; issued < min(depth, mine); ++issued) stage(issued, issued);
        for (int j = 0; j < mine; ++j) {
            copies_wait(issued - j - 1);
            const int slot = j % depth, nb = parity + 2 * j;
            uint4 v[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = load_shared16(slots + slot * UNIT + 512 * i);
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            register_unit_steps<WIDEN>(c, v, x_row + nb * K_BLOCK, has_row, t);
            accumulate(acc, c, sm.scales[nb]);
            if (issued < mine) {
                stage(slot, issued);
                ++issued;
            }
        }
    }
    pair_combine(acc, sm.y + strip * 128, parity == 1);  // y: unused by the levers
    if (warp >= 8) return;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int row = blockIdx.x * ROW_BLOCK + strip * WARP_ROWS + g + 8 * (r >> 1), input = 2 * t + (r & 1);
        if (input < m) out[(static_cast<size_t>(s) * m + input) * n + row] = acc[r];
    }
}
}  // namespace lv

#define LEVER(NAME, LOAD, WIDEN, DEPTH)                                                                          \
    extern "C" __global__ void __launch_bounds__(512) NAME(const unsigned char* w, const __nv_bfloat16* sc,  \
                                                           const __nv_bfloat16* x, float* out, int n, int k, \
                                                           int m, int slices) {                          \
        lv::levers<LOAD, WIDEN, DEPTH>(w, sc, x, out, n, k, m, slices);                                         \
    }
LEVER(ring_shift, 0, 0, 1)
LEVER(ring_f16, 0, 1, 1)
LEVER(reg_shift, 1, 0, 2)
LEVER(reg_f16, 1, 1, 2)
LEVER(reg3_f16, 1, 1, 3)
LEVER(reg4_f16, 1, 1, 4)
