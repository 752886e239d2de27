"""Compile the discrete kernels (discrete/kernels.cu over megakernel/cuda/*.cuh) with NVRTC and launch them.

CuPy is imported inside the functions: the package imports on machines without a GPU. Arrays cross
as raw bits: bf16 as uint16, fp8 e4m3 as uint8.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from megakernel import plan

SOURCE = Path(__file__).with_name("kernels.cu")
INCLUDE = Path(__file__).resolve().parents[1] / "megakernel" / "cuda"
GEMV_THREADS = 512


@functools.cache
def module():
    import cupy

    from megakernel.gpu_synthetic import arch_for

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    options = ("-std=c++17", f"--gpu-architecture={arch_for(props['major'], props['minor'])}", f"-I{INCLUDE}")
    mod = cupy.RawModule(code=SOURCE.read_text(), options=options)
    mod.compile()
    return mod


def gemv_slices(weight, scale, x, slices: int):
    """fp32 slice sums [S, M, N] of weight [N, K] (uint8 e4m3 with uint16 bf16 scales, or uint16 bf16 with
    scale None) times x [M, K] (uint16 bf16 bits), M <= 8."""
    import cupy

    n, k = weight.shape
    m = x.shape[0]
    if n % plan.ROW_BLOCK or k % plan.K_BLOCK or not 1 <= m <= 8:
        raise ValueError(f"GEMV shape {weight.shape} x {x.shape} not supported")
    out = cupy.empty((slices, m, n), dtype=cupy.float32)
    args = (np.int32(n), np.int32(k), np.int32(m), np.int32(slices))
    grid = (n // plan.ROW_BLOCK, slices)
    if scale is None:
        module().get_function("gemv_bf16_slices")(grid, (GEMV_THREADS,), (weight, x, out, *args))
    else:
        module().get_function("gemv_fp8_slices")(grid, (GEMV_THREADS,), (weight, scale, x, out, *args))
    return out
