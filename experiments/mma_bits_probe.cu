// Do Hopper's warpgroup products (wgmma) sum a k-block like the decode GEMV's mma.sync? (issue 21, D66)
//
// Each tile is one 128-wide k-block of a GEMM: A [64 rows][128] f16 (widened fp8 weights, row-major) times
// B [NT tokens][128] f16 (the f16 operand, each token's k contiguous) into a fresh fp32 partial D [64][NT],
// the GEMV's first level (gemv.cuh). Three ways, each summing the block's eight k16 steps in a chain:
//   mma_chain:      mma.sync m16n8k16 in k order 0..7, the decode GEMV's instruction (mk::mma_16816);
//   mma_chain_rev:  the same in k order 7..0 (the negative control: a different order must show);
//   wgmma_chain:    wgmma m64nNTk16, A from registers, B from shared memory (no swizzle), k order 0..7.
// If wgmma_chain equals mma_chain bit for bit, a prompt GEMM on wgmma can give every row the decode
// GEMV's partials; if not, bit identity with decode needs mma.sync.
#include "wgmma_probe.cuh"

using mk::u32;

constexpr int KB = 128;     // one k-block
constexpr int ROWS = 64;    // a tile's output rows (one warpgroup's wgmma M)
constexpr int STEPS = KB / 16;

// A fragment of rows [r0, r0 + 16), k16 step s, as mma.m16n8k16 (and wgmma's per-warp slice) takes it.
__device__ __forceinline__ void a_fragment(const __half* a, int r0, int s, u32 (&frag)[4]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const __half* base = a + (r0 + g) * KB + 16 * s + 2 * t;
    frag[0] = *reinterpret_cast<const u32*>(base);
    frag[1] = *reinterpret_cast<const u32*>(base + 8 * KB);
    frag[2] = *reinterpret_cast<const u32*>(base + 8);
    frag[3] = *reinterpret_cast<const u32*>(base + 8 * KB + 8);
}

// d [tiles][ROWS][NT]; a [tiles][ROWS][KB]; b [tiles][NT][KB]. 128 threads a tile, warp w rows 16w..16w+15.
template <int NT, bool REVERSED>
__device__ void mma_chain(const __half* a, const __half* b, float* d) {
    const int tile = blockIdx.x, w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    a += static_cast<size_t>(tile) * ROWS * KB;
    b += static_cast<size_t>(tile) * NT * KB;
    d += static_cast<size_t>(tile) * ROWS * NT;
    float acc[NT / 8][4] = {};
    for (int i = 0; i < STEPS; ++i) {
        const int s = REVERSED ? STEPS - 1 - i : i;
        u32 af[4];
        a_fragment(a, 16 * w, s, af);
#pragma unroll
        for (int j = 0; j < NT / 8; ++j) {
            const __half* col = b + (8 * j + g) * KB + 16 * s + 2 * t;
            const u32 bf[2] = {*reinterpret_cast<const u32*>(col), *reinterpret_cast<const u32*>(col + 8)};
            mk::mma_16816<true>(acc[j], af, bf);
        }
    }
#pragma unroll
    for (int j = 0; j < NT / 8; ++j) {
        float* row = d + (16 * w + g) * NT + 8 * j + 2 * t;
        row[0] = acc[j][0];
        row[1] = acc[j][1];
        row[8 * NT] = acc[j][2];
        row[8 * NT + 1] = acc[j][3];
    }
}

extern "C" __global__ void __launch_bounds__(128) mma_chain_n8(const __half* a, const __half* b, float* d) {
    mma_chain<8, false>(a, b, d);
}
extern "C" __global__ void __launch_bounds__(128) mma_chain_n8_rev(const __half* a, const __half* b, float* d) {
    mma_chain<8, true>(a, b, d);
}
extern "C" __global__ void __launch_bounds__(128) mma_chain_n64(const __half* a, const __half* b, float* d) {
    mma_chain<64, false>(a, b, d);
}

// B of one tile in shared memory as no-swizzle core matrices (8 tokens x 8 k, 16 bytes a token): step s,
// token group n8, k half c at s * NT * 32 + n8 * N8_STRIDE + c * K_STRIDE bytes.
template <int NT>
__device__ void stage_b(const __half* b, __half* sb, int n8_stride, int k_stride) {
    for (int e = threadIdx.x; e < NT * KB; e += blockDim.x) {
        const int n = e / KB, k = e % KB, s = k / 16, c = k % 16 / 8, j = k % 8;
        const int byte = s * NT * 32 + (n / 8) * n8_stride + c * k_stride + (n % 8) * 16 + j * 2;
        sb[byte / 2] = b[e];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(128) wgmma_chain_n8(const __half* a, const __half* b, float* d) {
    __shared__ __align__(1024) __half sb[8 * KB];
    const int tile = blockIdx.x, w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    a += static_cast<size_t>(tile) * ROWS * KB;
    b += static_cast<size_t>(tile) * 8 * KB;
    d += static_cast<size_t>(tile) * ROWS * 8;
    stage_b<8>(b, sb, 256, 128);
    float acc[4] = {};
    for (int s = 0; s < STEPS; ++s) {
        u32 af[4];
        a_fragment(a, 16 * w, s, af);
        // one 8-token group: only the k direction's offset is read, so both offsets are 128
        const unsigned long long desc = smem_desc(reinterpret_cast<const char*>(sb) + s * 8 * 32, 128, 128);
        WGMMA(asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n}\n"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "l"(desc), "r"(1)
            : "memory"));
    }
    float* row = d + (16 * w + g) * 8 + 2 * t;
    row[0] = acc[0];
    row[1] = acc[1];
    row[64] = acc[2];
    row[65] = acc[3];
}

// 64 tokens: eight token groups 256 bytes apart, the k halves 128 apart; `swap` exchanges which of the
// descriptor's two offsets carries which (the one that reproduces the products is the layout's).
extern "C" __global__ void __launch_bounds__(128) wgmma_chain_n64(const __half* a, const __half* b, float* d,
                                                                 int swap) {
    __shared__ __align__(1024) __half sb[64 * KB];
    const int tile = blockIdx.x, w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    a += static_cast<size_t>(tile) * ROWS * KB;
    b += static_cast<size_t>(tile) * 64 * KB;
    d += static_cast<size_t>(tile) * ROWS * 64;
    stage_b<64>(b, sb, 256, 128);
    float acc[32] = {};
    for (int s = 0; s < STEPS; ++s) {
        u32 af[4];
        a_fragment(a, 16 * w, s, af);
        const char* base = reinterpret_cast<const char*>(sb) + s * 64 * 32;
        const unsigned long long desc = swap ? smem_desc(base, 256, 128) : smem_desc(base, 128, 256);
        WGMMA(asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
            "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
            "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n}\n"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]),
              "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]),
              "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]),
              "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]),
              "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]),
              "+f"(acc[31])
            : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "l"(desc), "r"(1)
            : "memory"));
    }
    // accumulator i: column 8 (i / 4) + 2t + i % 2, row 16w + g + 8 ((i / 2) % 2)
#pragma unroll
    for (int i = 0; i < 32; ++i)
        d[(16 * w + g + 8 * (i / 2 % 2)) * 64 + 8 * (i / 4) + 2 * t + i % 2] = acc[i];
}
