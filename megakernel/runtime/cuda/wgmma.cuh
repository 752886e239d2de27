// Hopper's warpgroup products and the asynchronous copies that feed them (the prompt GEMM, prompt_gemm.cuh, and
// the experiments that measured it: experiments/prompt_gemm_ws.cu, D66, D67): the guard that keeps wgmma to the
// sm_90a target, the no-swizzle shared-memory descriptor, the m64n128k16 product with A from registers (f16; bf16
// with an MN-major B: ATTN_CAUSAL's P.V), the bf16 m64n64k16 product from shared memory (its q.k), the mbarriers
// and bulk copies of a producer's ring, and the fp8 unit -> A fragment widening.
#pragma once

#include "gemv.cuh"

// wgmma exists only on the sm_90a target; nvcc -arch=sm_90a also makes a compute_90 pass, which gets a trap
// in its place (NVRTC builds these for sm_90a: cuda_build.py).
#if defined(MK_HOST_SIMT)  // tests/simt/simt.h: fences, commits, waits and register moves are no-ops there
#define WGMMA(...) ((void)0)
#elif defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WGMMA(...) __trap()
#else
#define WGMMA(...) __VA_ARGS__
#endif

namespace mk {

// A shared-memory matrix descriptor, no swizzle: start, leading and stride byte offsets (16-byte units). For
// a K-major operand the leading offset is the stride between its 8-wide k halves, the stride offset between
// its 8-row groups (D66).
__device__ __forceinline__ unsigned long long smem_desc(u32 addr, u32 lbo, u32 sbo) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16 |
           static_cast<unsigned long long>((sbo & 0x3FFFF) >> 4) << 32;
}
__device__ __forceinline__ unsigned long long smem_desc(const void* p, u32 lbo, u32 sbo) {
    return smem_desc(smem_addr(p), lbo, sbo);
}

#ifndef MK_HOST_SIMT  // tests/simt/simt.h: a host model of the warpgroup products
// The accumulator operands of an m64n64 (32 registers a thread) and an m64n128 (64) product.
#define WGMMA_D32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_D64 WGMMA_D32 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_D32_OUT(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WGMMA_D64_OUT(d) \
    WGMMA_D32_OUT(d), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (64 x 128, fp32, wgmma's accumulator layout) = a x b + (accumulate ? d : 0), a (64 x 16 f16: each warp's 16
// rows in mma.m16n8k16's A fragment layout, from registers) and b (16 x 128 f16, a shared-memory descriptor).
// Asynchronous: the caller fences before, commits and waits after.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const u32 (&a)[4], unsigned long long desc,
                                                 int accumulate) {
    WGMMA(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                       "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" WGMMA_D64
                       "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                       : WGMMA_D64_OUT(d)
                       : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
                       : "memory"));
}

// The same with bf16 operands and b by a no-swizzle MN-major descriptor (transposed: 8 consecutive n of one k
// contiguous, a core matrix 8 k x 16 bytes; the leading offset steps 8 k, the stride offset 8 n): ATTN_CAUSAL's P.V.
__device__ __forceinline__ void wgmma_rs_m64n128k16_bf16_mn(float (&d)[64], const u32 (&a)[4],
                                                            unsigned long long desc, int accumulate) {
    WGMMA(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                       "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" WGMMA_D64
                       "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                       : WGMMA_D64_OUT(d)
                       : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
                       : "memory"));
}

// d (64 x 64, fp32, the accumulator layout above) = a x b + (accumulate ? d : 0), bf16: a (64 x 16) and b (16 x 64)
// both by no-swizzle K-major descriptors (warp w's rows 16 w .. 16 w + 15 of a): ATTN_CAUSAL's q.k.
__device__ __forceinline__ void wgmma_ss_m64n64k16_bf16(float (&d)[32], unsigned long long a_desc,
                                                        unsigned long long b_desc, int accumulate) {
    WGMMA(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                       "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" WGMMA_D32
                       "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                       : WGMMA_D32_OUT(d)
                       : "l"(a_desc), "l"(b_desc), "r"(accumulate)
                       : "memory"));
}

// Keeps the compiler from touching a register that an in-flight wgmma writes or reads (CUTLASS's
// warpgroup_fence_operand).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_operand(u32& r) { asm volatile("" : "+r"(r)::"memory"); }
#endif

template <int N>
__device__ __forceinline__ void fence_all(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) fence_operand(r[i]);
}
template <int STEPS>
__device__ __forceinline__ void fence_all(u32 (&af)[STEPS][4]) {
#pragma unroll
    for (int st = 0; st < STEPS; ++st)
#pragma unroll
        for (int q = 0; q < 4; ++q) fence_operand(af[st][q]);
}

// Every thread's own generic-proxy writes to shared memory (cp.async's) made visible to the async proxy that
// wgmma reads through; then a barrier before the products (ATTN_CAUSAL).
__device__ __forceinline__ void fence_proxy_async() {
    WGMMA(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));
}

template <int PENDING>
__device__ __forceinline__ void wait_groups() {
    WGMMA(asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory"));
}

// --- a producer's ring: mbarriers completed by bulk copies' transaction bytes -------------------------------
#ifndef MK_HOST_SIMT  // tests/simt/simt.h: host models of these (a bulk copy lands at once and completes its bytes)
__device__ __forceinline__ void mbarrier_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Threads `threads` (a multiple of 32) of the block meet at named barrier `id` (0 is __syncthreads').
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_init(u32 bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n.reg .pred done;\nWAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void bar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bar_expect(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
#endif

// A warp's A fragments of a k-block's eight steps, widened from its 16-row fp8 unit in shared memory (gemv.cuh
// unit_steps' order: vector i holds steps 2i and 2i + 1).
__device__ __forceinline__ void widen_unit(u32 (&af)[8][4], const unsigned char* unit_smem, int lane) {
    const u32 unit = smem_addr(unit_smem + 16 * lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint4 v = load_shared16(unit + 512 * i);
        e4m3x4_to_f16x2(v.x, af[2 * i][0], af[2 * i][2]);
        e4m3x4_to_f16x2(v.y, af[2 * i][1], af[2 * i][3]);
        e4m3x4_to_f16x2(v.z, af[2 * i + 1][0], af[2 * i + 1][2]);
        e4m3x4_to_f16x2(v.w, af[2 * i + 1][1], af[2 * i + 1][3]);
    }
}

// The decode GEMV's promotion of a k-block's partial: acc + (scale x partial) x 2^-P (mul_rn, mul_rn, add_rn).
__device__ __forceinline__ float promote_rn(float acc, float part, float sc, float u) {
    return add_rn(acc, mul_rn(mul_rn(sc, part), u));
}

}  // namespace mk
