// A first fp8 block-scaled GEMM on Hopper's warpgroup products for the prompt path (issue 21, after D66): how fast
// the engine's arithmetic runs at R prompt rows. Not the engine's kernel and not yet its bits (natural k
// order, row-major weights, one k-slice): a speed probe, timed against cuBLAS in one process by
// experiments/prompt_gemm_probe.py.
//
// y [R][N] = per row r, sum over k-blocks b (dealt to PHASES phases in turn, the phases added in order) of
// (scale[n / 128][b] x partial) x unscale[r][b], where partial is the fp32 sum of the block's 128 products of
// widened e4m3 weights and the f16 operand x [R][K] (ops.f16_operand), chained over eight k16 steps by wgmma
// (D66: the bits of the decode GEMV's mma.sync). A block is one warpgroup: 64 weight rows x 128 tokens; each
// k-block's weights (8 KB, row-major) and tokens (32 KB, no-swizzle core matrices) come by cp.async into a
// ring of STAGES slots; the weights are widened in registers (A from registers), the tokens read by wgmma
// from shared memory.
#include "wgmma_probe.cuh"

using mk::u32;

namespace probe {

constexpr int KB = 128;         // k-block
constexpr int TM = 64;          // weight rows a block (wgmma M)
constexpr int TN = 128;         // tokens a block (wgmma N)
constexpr int PHASES = 2;       // the decode GEMV's phases for a 128-row pass (gemv.cuh)
constexpr int A_BYTES = TM * KB;
constexpr int B_BYTES = TN * KB * 2;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;

// k-block b of the block's weights and tokens into slot `stage`: weights row-major (128 bytes a row), tokens
// as core matrices (k16 step s, 8-token group, k half c at s * TN * 32 + group * 256 + c * 128, a token's 8
// values 16 bytes), the layout D66's descriptor reads (leading offset 128: k halves; stride 256: groups).
__device__ __forceinline__ void load_block(unsigned char* slot, const unsigned char* w, const __half* x, int n0,
                                           int r0, int k, int b) {
    for (int p = threadIdx.x; p < TM * KB / 16; p += blockDim.x) {
        const int row = p / 8, piece = p % 8;
        mk::copy_async16(mk::smem_addr(slot + row * KB + piece * 16),
                         w + static_cast<size_t>(n0 + row) * k + static_cast<size_t>(b) * KB + piece * 16);
    }
    unsigned char* tokens = slot + A_BYTES;
    for (int p = threadIdx.x; p < TN * KB / 8; p += blockDim.x) {
        const int tok = p / 16, k8 = p % 16;
        const int off = (k8 / 2) * TN * 32 + (tok / 8) * 256 + (k8 % 2) * 128 + (tok % 8) * 16;
        mk::copy_async16(mk::smem_addr(tokens + off),
                         x + static_cast<size_t>(r0 + tok) * k + static_cast<size_t>(b) * KB + k8 * 8);
    }
}

// One k-block from its slot: the partial of its 128 products by eight chained wgmma k16 steps (every step's
// weights widened into registers before the first, so that no register the products read changes under
// them), then into += (scale x partial) x unscale per token, rounded as the decode GEMV rounds.
__device__ __forceinline__ void k_block(const unsigned char* weights, const float* scale, const float* unscale,
                                        int n0, int r0, int blocks, int b, float (&into)[64]) {
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const unsigned char* tokens = weights + A_BYTES;
    u32 af[KB / 16][4];
#pragma unroll
    for (int s = 0; s < KB / 16; ++s) {  // mma.m16n8k16's A fragment of this warp's 16 rows, k16 step s
        const unsigned char* a = weights + (16 * warp + g) * KB + 16 * s + 2 * t;
        af[s][0] = mk::e4m3x2_to_f16x2(*reinterpret_cast<const unsigned short*>(a));
        af[s][1] = mk::e4m3x2_to_f16x2(*reinterpret_cast<const unsigned short*>(a + 8 * KB));
        af[s][2] = mk::e4m3x2_to_f16x2(*reinterpret_cast<const unsigned short*>(a + 8));
        af[s][3] = mk::e4m3x2_to_f16x2(*reinterpret_cast<const unsigned short*>(a + 8 * KB + 8));
    }
    float part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) part[i] = 0.0f;
    WGMMA(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
#pragma unroll
    for (int s = 0; s < KB / 16; ++s) wgmma_m64n128k16(part, af[s], smem_desc(tokens + s * TN * 32, 128, 256), 1);
    WGMMA(asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n" ::: "memory"));
    const float sc = scale[(n0 / 128) * blocks + b];
#pragma unroll
    for (int i = 0; i < 64; ++i) {  // accumulator i: token 8 (i / 4) + 2t + i % 2
        const float u = unscale[static_cast<size_t>(r0 + 8 * (i / 4) + 2 * t + i % 2) * blocks + b];
        into[i] = mk::add_rn(into[i], mk::mul_rn(mk::mul_rn(sc, part[i]), u));
    }
}

template <int STAGES>
__device__ void gemm(const unsigned char* w, const float* scale, const __half* x, const float* unscale, float* y,
                     int n, int k) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const int n0 = blockIdx.x * TM, r0 = blockIdx.y * TN, blocks = k / KB;
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    float acc[PHASES][64];
#pragma unroll
    for (int ph = 0; ph < PHASES; ++ph)
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[ph][i] = 0.0f;
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < blocks) load_block(smem + s * STAGE_BYTES, w, x, n0, r0, k, s);
        mk::copies_commit();
    }
    for (int b = 0; b < blocks; ++b) {
        const int next = b + STAGES - 1;
        if (next < blocks) load_block(smem + (next % STAGES) * STAGE_BYTES, w, x, n0, r0, k, next);
        mk::copies_commit();
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1) : "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async wrote; wgmma reads
        __syncthreads();
        const unsigned char* weights = smem + (b % STAGES) * STAGE_BYTES;
        if (b % PHASES == 0)  // static indices: acc stays in registers
            k_block(weights, scale, unscale, n0, r0, blocks, b, acc[0]);
        else
            k_block(weights, scale, unscale, n0, r0, blocks, b, acc[1]);
        __syncthreads();  // every warp is done with this slot before a later iteration refills it
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) {  // row 16 warp + g + 8 ((i / 2) % 2) of the block's 64
        float sum = acc[0][i];
#pragma unroll
        for (int ph = 1; ph < PHASES; ++ph) sum = mk::add_rn(sum, acc[ph][i]);
        const int row = n0 + 16 * warp + g + 8 * (i / 2 % 2), tok = r0 + 8 * (i / 4) + 2 * t + i % 2;
        y[static_cast<size_t>(tok) * n + row] = sum;
    }
}

}  // namespace probe

extern "C" __global__ void __launch_bounds__(128, 1) prompt_gemm_s3(const unsigned char* w, const float* scale,
                                                                   const __half* x, const float* unscale, float* y,
                                                                   int n, int k) {
    probe::gemm<3>(w, scale, x, unscale, y, n, k);
}

extern "C" __global__ void __launch_bounds__(128, 2) prompt_gemm_s2(const unsigned char* w, const float* scale,
                                                                   const __half* x, const float* unscale, float* y,
                                                                   int n, int k) {
    probe::gemm<2>(w, scale, x, unscale, y, n, k);
}
