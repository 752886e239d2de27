import cupy, numpy as np
from megakernel import cuda_build
code = r'''
#include "gemv_tile.cuh"
extern "C" __global__ void probe(unsigned int* out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const mk::GemvSmem sm(smem);
    if (threadIdx.x == 0) {
        out[0] = mk::dynamic_smem_bytes();
        out[1] = sm.ring_bytes(5120);
        out[2] = (unsigned)(sm.ring(5120) - smem);
        unsigned t; asm("mov.u32 %0, %%total_smem_size;" : "=r"(t)); out[3] = t;
    }
}
'''
mod = cupy.RawModule(code=code, options=("-std=c++17", f"-I{cuda_build.CUDA_DIR}"))
k = mod.get_function("probe")
smem = cuda_build.max_dynamic_smem()
k.max_dynamic_shared_size_bytes = smem
out = cupy.zeros(4, cupy.uint32)
k((1,), (32,), (out,), shared_mem=smem)
print("optin", smem, "dynamic_smem_size, ring_bytes, ring_offset, total_smem_size:", out.get())
