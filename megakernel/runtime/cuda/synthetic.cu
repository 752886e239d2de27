// Synthetic weights on the GPU: the same bytes as megakernel/model/synthetic.py (read its module docstring
// for the contract), generated in device memory so the 27B preset never has to exist on the host.
//
// Built at run time by NVRTC (megakernel/runtime/gpu_synthetic.py) and checked by nvcc in CI
// (tests/test_cuda_compiles.py), so it uses nothing that only one of the two accepts: no standard
// library headers (NVRTC has none), extern "C" kernels (no name mangling to look up).
//
// Bit-exactness with NumPy rests on every float step being a single IEEE-754 correctly rounded
// operation: __fmul_rn / __fadd_rn / __fdiv_rn cannot be contracted into an FMA or replaced by an
// approximate division whatever the compiler flags (CuPy adds -ftz=true; no float here is ever
// subnormal, see synth_fp8), and the bf16 / e4m3 conversions round to nearest even.
//
// Functions are __host__ __device__ so that a CPU test harness compiled with nvcc can run exactly
// this code against NumPy; the host (#else) branches below exist only for that.

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define SYN_HD __host__ __device__ __forceinline__

typedef unsigned long long u64;

// Philox4x64 multipliers and Weyl key increments (Random123, as used by NumPy's Philox).
#define PHILOX_M0 0xD2E7470EE14C6C93ULL
#define PHILOX_M1 0xCA5A826395121157ULL
#define PHILOX_W0 0x9E3779B97F4A7C15ULL
#define PHILOX_W1 0xBB67AE8584CAA73BULL

#define FP8_BLOCK 128
#define FP8_MAX 448.0f
#define LANE_SUM_OFFSET 131070  // 2 * 65535 centres the sum of four uint16 lanes

SYN_HD u64 mulhi64(u64 a, u64 b) {
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return (u64)(((unsigned __int128)a * b) >> 64);
#endif
}

SYN_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;  // host harness only: x86-64 SSE, a single rounding
#endif
}

SYN_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

SYN_HD float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

// Philox4x64-10 of one 256-bit counter (ctr, 0, 0, 0). NumPy's stream for element i uses counter
// i / 4 + 1 (it increments before each block), so callers pass block + 1.
SYN_HD void philox4x64_10(u64 ctr, u64 k0, u64 k1, u64 out[4]) {
    u64 x0 = ctr, x1 = 0, x2 = 0, x3 = 0;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        const u64 hi0 = mulhi64(PHILOX_M0, x0), lo0 = PHILOX_M0 * x0;
        const u64 hi1 = mulhi64(PHILOX_M1, x2), lo1 = PHILOX_M1 * x2;
        x0 = hi1 ^ x1 ^ k0;  // reads the old x1 and x3: they are overwritten only below
        x1 = lo1;
        x2 = hi0 ^ x3 ^ k1;
        x3 = lo0;
        k0 += PHILOX_W0;  // bumping after the last round too is harmless: the key is local
        k1 += PHILOX_W1;
    }
    out[0] = x0;
    out[1] = x1;
    out[2] = x2;
    out[3] = x3;
}

// Irwin-Hall: the sum of the four 16-bit lanes (lane 0 = low bits) is an exact integer in
// [-131070, 131070], so float(s) is exact and the only roundings are one multiply and one add.
SYN_HD float normalish(u64 r, float c, float mean) {
    const int s = (int)(r & 0xFFFFu) + (int)((r >> 16) & 0xFFFFu) + (int)((r >> 32) & 0xFFFFu) +
                  (int)(r >> 48) - LANE_SUM_OFFSET;
    float v = mul_rn((float)s, c);
    if (mean != 0.0f) v = add_rn(v, mean);  // the CPU adds only when the mean is non-zero
    return v;
}

SYN_HD unsigned short bf16_bits(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// Per-block scale as stored: bf16(amax / 448), or the smallest power of two >= amax / 448.
// Returns the bf16 bits; *dequant gets that scale as a float (exact).
SYN_HD unsigned short fp8_block_scale(float amax, bool pow2, float* dequant) {
    if (!(amax > 0.0f)) amax = FP8_MAX;  // an all-zero block gets scale 1
    float scale = div_rn(amax, FP8_MAX);
    if (pow2) {
        // A normal float that is not a power of two has mantissa bits: clear them and step the
        // exponent up once (amax / 448 is far from both ends of the float range).
        unsigned int bits;
        memcpy(&bits, &scale, 4);
        if (bits & 0x7FFFFFu) bits = (bits & 0xFF800000u) + 0x00800000u;
        memcpy(&scale, &bits, 4);
    }
    const __nv_bfloat16 stored = __float2bfloat16_rn(scale);
    *dequant = __bfloat162float(stored);
    return __bfloat16_as_ushort(stored);
}

// e4m3 byte of v / scale, clamped to +-448 first (a scale rounded down to bf16 can push the
// quotient just past 448); SATFINITE compiles to cvt.rn.satfinite.e4m3x2.f32, round to nearest even.
SYN_HD unsigned int fp8_quantize(float v, float scale) {
    float x = div_rn(v, scale);
    x = fminf(fmaxf(x, -FP8_MAX), FP8_MAX);
    return (unsigned int)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// One step of synth_bf16: Philox block `first + b` gives elements 4 (first + b) .. + 3, of which
// those inside [start, end) go to out (indexed from start). A step with all four inside stores
// them at once (8 bytes) when out allows it, so the common case is one wide store per Philox block.
SYN_HD void bf16_step(u64 b, u64 first, u64 start, u64 end, bool aligned, u64 k0, u64 k1, float c,
                      float mean, unsigned short* out) {
    u64 w[4];
    philox4x64_10(first + b + 1, k0, k1, w);
    unsigned short h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = bf16_bits(normalish(w[j], c, mean));
    const u64 e0 = (first + b) * 4;  // element index of w[0]
    if (aligned && e0 + 4 <= end) {
        uint2 packed;  // little-endian: the lower address holds the lower half
        packed.x = (unsigned int)h[0] | ((unsigned int)h[1] << 16);
        packed.y = (unsigned int)h[2] | ((unsigned int)h[3] << 16);
        *reinterpret_cast<uint2*>(out + (e0 - start)) = packed;
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (e0 + j >= start && e0 + j < end) out[e0 + j - start] = h[j];
    }
}

// out[j] = bf16 bits of element start + j, j < n; a grid-stride loop over Philox blocks, one block
// (4 consecutive elements) per thread and step, so no word is computed twice. 64-bit indices.
extern "C" __global__ void __launch_bounds__(256)
synth_bf16(u64 k0, u64 k1, u64 start, u64 n, float c, float mean, unsigned short* out) {
    if (n == 0) return;
    const u64 first = start >> 2, end = start + n;
    const u64 blocks = ((end - 1) >> 2) - first + 1;
    const bool aligned = (start & 3) == 0 && ((size_t)out & 7) == 0;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += stride)
        bf16_step(b, first, start, end, aligned, k0, k1, c, mean, out);
}

// One thread block per 128x128 tile of a row-major [rows, cols] fp8 weight (grid = (cols / 128,
// rows / 128); rows and cols multiples of 128, q_out 4-byte aligned). A tile row is 32 whole
// Philox blocks (cols and the tile's first column are multiples of 4), so thread t owns block
// t % 32 of rows t / 32 + 16 k, k < 8: a warp covers one 128-byte row segment, and stores coalesce.
//
// The tile's 16,384 values stay in registers (32 floats a thread) between the amax pass and the
// quantise pass: generation is compute-bound (a Philox block costs far more than writing four
// bytes), so regenerating would double the run time, and 64 KB of shared memory would need an
// opt-in launch attribute and cut occupancy.
//
// No float here is subnormal, so -ftz (CuPy's default) cannot change a result: with mean 0 (all
// fp8 tensors), |v| >= c for s != 0 and amax <= 131070 c, so |v / scale| >= 448 / 131070 / 2.01
// (bf16 and pow2 round the scale up by < 2.01x) > 2^-10, the e4m3 underflow threshold; and the
// scale is a normal float for any sane std.
#define FP8_THREADS 512
#define FP8_ROWS_PER_STEP (FP8_THREADS / 32)
#define FP8_STEPS (FP8_BLOCK / FP8_ROWS_PER_STEP)

SYN_HD u64 fp8_element0(u64 row0, u64 col0, u64 cols, unsigned int t, int k) {
    return (row0 + t / 32 + (u64)k * FP8_ROWS_PER_STEP) * cols + col0 + 4 * (t % 32);
}

// Thread t's 32 values of the tile at (row0, col0); returns their amax.
SYN_HD float fp8_generate(u64 k0, u64 k1, u64 row0, u64 col0, u64 cols, unsigned int t, float c,
                          float mean, float v[FP8_STEPS][4]) {
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < FP8_STEPS; ++k) {
        u64 w[4];
        philox4x64_10((fp8_element0(row0, col0, cols, t, k) >> 2) + 1, k0, k1, w);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            v[k][j] = normalish(w[j], c, mean);
            amax = fmaxf(amax, fabsf(v[k][j]));  // max is exact: any reduction order gives the same
        }
    }
    return amax;
}

SYN_HD void fp8_store(u64 row0, u64 col0, u64 cols, unsigned int t, const float v[FP8_STEPS][4],
                      float scale, unsigned char* q_out) {
#pragma unroll
    for (int k = 0; k < FP8_STEPS; ++k) {
        unsigned int packed = 0;  // byte j = element e0 + j (little-endian)
#pragma unroll
        for (int j = 0; j < 4; ++j) packed |= fp8_quantize(v[k][j], scale) << (8 * j);
        *reinterpret_cast<unsigned int*>(q_out + fp8_element0(row0, col0, cols, t, k)) = packed;
    }
}

extern "C" __global__ void __launch_bounds__(FP8_THREADS)
synth_fp8(u64 k0, u64 k1, u64 rows, u64 cols, float c, float mean, int pow2, unsigned char* q_out,
          unsigned short* scale_out) {
    const u64 row0 = (u64)blockIdx.y * FP8_BLOCK, col0 = (u64)blockIdx.x * FP8_BLOCK;
    if (row0 >= rows || col0 >= cols) return;  // the whole block leaves: no barrier is left waiting
    float v[FP8_STEPS][4];
    float amax = fp8_generate(k0, k1, row0, col0, cols, threadIdx.x, c, mean, v);

    // Non-negative floats order like their bit patterns, so an integer atomicMax is a float max.
    __shared__ unsigned int tile_amax_bits;
    if (threadIdx.x == 0) tile_amax_bits = 0;
    __syncthreads();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (threadIdx.x % 32 == 0) atomicMax(&tile_amax_bits, __float_as_uint(amax));
    __syncthreads();

    float scale;
    const unsigned short bits = fp8_block_scale(__uint_as_float(tile_amax_bits), pow2 != 0, &scale);
    if (threadIdx.x == 0) scale_out[blockIdx.y * (cols / FP8_BLOCK) + blockIdx.x] = bits;
    fp8_store(row0, col0, cols, threadIdx.x, v, scale, q_out);
}
