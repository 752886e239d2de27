// What the experiments' wgmma kernels share (mma_bits_probe.cu, prompt_gemm_probe.cu, prompt_gemm_ws.cu): the
// guard that keeps wgmma to the sm_90a target, the no-swizzle shared-memory descriptor D66 measured, and the
// m64n128k16 product with A from registers.
#pragma once

#include "gemv.cuh"

// wgmma exists only on the sm_90a target; nvcc -arch=sm_90a also makes a compute_90 pass, which gets a trap
// in its place (NVRTC builds these for sm_90a: cuda_build.py).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WGMMA(...) __trap()
#else
#define WGMMA(...) __VA_ARGS__
#endif

// A shared-memory matrix descriptor, no swizzle: start, leading and stride byte offsets (16-byte units). For
// a K-major operand the leading offset is the stride between its 8-wide k halves, the stride offset between
// its 8-row groups (D66).
__device__ __forceinline__ unsigned long long smem_desc(const void* p, mk::u32 lbo, mk::u32 sbo) {
    const mk::u32 addr = mk::smem_addr(p);
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16 |
           static_cast<unsigned long long>((sbo & 0x3FFFF) >> 4) << 32;
}

// d (64 x 128, fp32, wgmma's accumulator layout) = a x b + (accumulate ? d : 0), a (64 x 16 f16: each warp's 16
// rows in mma.m16n8k16's A fragment layout, from registers) and b (16 x 128 f16, a shared-memory descriptor).
// Asynchronous: the caller fences before, commits and waits after.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const mk::u32 (&a)[4], unsigned long long desc,
                                                 int accumulate) {
    WGMMA(asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
        : "memory"));
}
