// What the experiments' wgmma kernels share (mma_bits_probe.cu, prompt_gemm_probe.cu): the guard that keeps
// wgmma to the sm_90a target, and the no-swizzle shared-memory descriptor D66 measured.
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
