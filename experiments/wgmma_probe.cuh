// What the experiments' wgmma kernels share (mma_bits_probe.cu, prompt_gemm_probe.cu, prompt_gemm_ws.cu): the
// engine's wgmma primitives (megakernel/runtime/cuda/wgmma.cuh: the sm_90a guard, the no-swizzle descriptor D66
// measured, the m64n128k16 product with A from registers), under the names the experiments use.
#pragma once

#include "wgmma.cuh"

using mk::smem_desc;
using mk::wgmma_m64n128k16;
