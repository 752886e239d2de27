"""Compile the discrete kernels (discrete/kernels.cu over megakernel/runtime/cuda/*.cuh) with NVRTC and launch them.

CuPy is imported inside the functions: the package imports on machines without a GPU. Arrays cross
as raw bits: bf16 as uint16, fp8 e4m3 as uint8.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from isa.opcodes import MAX_ROWS
from megakernel.runtime import cuda_build
from megakernel.model import plan
from megakernel.reference import ops
from megakernel.runtime.weight_layout import to_units

SOURCE = Path(__file__).with_name("kernels.cu")
GEMV_HEADER = cuda_build.CUDA_DIR / "gemv.cuh"
COMMON_HEADER = cuda_build.CUDA_DIR / "common.cuh"
GEMV_TILE_HEADER = cuda_build.CUDA_DIR / "gemv_tile.cuh"


@functools.cache
def gemv_threads() -> int:
    return cuda_build.define(SOURCE, "GEMV_THREADS")


def check_shared_constants() -> None:
    """The layout constants the CUDA device functions and the Python plan must agree on."""
    for header, name, value in ((GEMV_HEADER, "K_BLOCK", plan.K_BLOCK), (GEMV_HEADER, "ROW_BLOCK", plan.ROW_BLOCK),
                                (GEMV_HEADER, "F16_TOP_BINADE", ops.F16_TOP_BINADE),
                                (GEMV_HEADER, "TOP_EXPONENT_FLOOR", ops.TOP_EXPONENT_FLOOR),
                                (GEMV_HEADER, "WARP_ROWS", plan.STRIP_ROWS),
                                (GEMV_TILE_HEADER, "MAX_TILE_ROWS", plan.MAX_TILE_ROWS),
                                (COMMON_HEADER, "MAX_ROWS", MAX_ROWS),
                                (COMMON_HEADER, "TILE_THREADS", plan.TILE_THREADS)):
        if cuda_build.define(header, name) != value:
            raise RuntimeError(f"{header.name} has {name} = {cuda_build.define(header, name)}, Python has {value}")


def module():
    import cupy

    return _module_on(cupy.cuda.Device().id)


@functools.cache
def _module_on(device_id: int):
    # cached here, not only in cuda_build: a launch must not re-read sources (host time per launch is
    # what back-to-back GEMV launches are bound by)
    check_shared_constants()
    return cuda_build.module(SOURCE, device_id)


def gemv_slices(weight, scale, x, slices: int, out=None, in_units: bool = False, tile_rows: int = plan.ROW_BLOCK,
                paired: bool = False):
    """fp32 slice sums [S, M, N] of weight [N, K] (uint8 e4m3 with uint16 bf16 scales, or uint16 bf16 with
    scale None) times x [M, K] (uint16 bf16 bits), M <= MAX_ROWS; into `out` when given (no allocation,
    so the launch can be captured in a CUDA graph). fp8 weights are row-major and laid out in units here,
    or already in units (`in_units`, weight_layout.to_units: what a timed loop passes). One block computes
    `tile_rows` rows (a multiple of 16; bf16 up to 128; fp8 up to plan.MAX_TILE_ROWS, cut into passes where
    a 128-row scale block ends, as the engine's tiles are), the last block what is left; `paired`: the rows
    are two halves (gate and up) and a block computes the same rows of both, as the engine's NORM_GATE_UP
    tiles do. Shared memory: all one block may take (the deepest ring), as the discrete build's launcher
    gives every GEMV word (D57)."""
    import cupy

    n, k = weight.shape
    if scale is not None and not in_units:
        weight = to_units(weight)
    m = x.shape[0]
    halves = 2 if paired else 1
    if n % (plan.ROW_BLOCK * halves) or k % plan.K_BLOCK or not 1 <= m <= MAX_ROWS:
        raise ValueError(f"GEMV shape {weight.shape} x {x.shape}{' paired' if paired else ''} not supported")
    most = plan.MAX_TILE_ROWS if scale is not None else plan.ROW_BLOCK  # fp8 groups are cut into passes at scale blocks
    if not (16 <= tile_rows <= most and tile_rows % 16 == 0):
        raise ValueError(f"tile_rows {tile_rows}: a multiple of 16 up to {most} for this dtype")
    if out is None:
        out = cupy.empty((slices, m, n), dtype=cupy.float32)
    elif out.shape != (slices, m, n) or out.dtype != cupy.float32 or not out.flags.c_contiguous:
        raise ValueError(f"out must be contiguous float32 {(slices, m, n)}, got {out.dtype} {out.shape}")
    args = (np.int32(n), np.int32(k), np.int32(m), np.int32(slices), np.int32(tile_rows), np.int32(halves))
    grid = (-(-(n // halves) // tile_rows), slices)  # the last row group may be short, as the engine's
    smem = cuda_build.max_dynamic_smem()
    if scale is None:
        _kernel("gemv_bf16_slices")(grid, (gemv_threads(),), (weight, x, out, *args), shared_mem=smem)
    else:
        _kernel("gemv_fp8_slices")(grid, (gemv_threads(),), (weight, scale, x, out, *args), shared_mem=smem)
    return out


@functools.cache
def _kernel(name: str):
    kernel = module().get_function(name)
    kernel.max_dynamic_shared_size_bytes = cuda_build.max_dynamic_smem()  # a launch may then ask for any less
    return kernel


def read_bandwidth_gbps(iters: int = 20, reps: int = 10) -> float:
    """The device's pure streaming read bandwidth, the figure every result is a fraction of: 16-byte loads
    by 4 blocks of 512 threads per SM over 4 GiB; median over `iters` samples of `reps` launches (CUDA
    events)."""
    import cupy

    data = cupy.zeros(4 << 30 >> 4, dtype=cupy.dtype([("v", "<u4", (4,))]))
    sink = cupy.zeros(1, dtype=cupy.uint32)
    kernel = module().get_function("read_bandwidth")
    sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]

    def launch():
        kernel((sms * 4,), (512,), (data, np.uint64(data.size), sink))

    for _ in range(3):
        launch()
    times = []
    for _ in range(iters):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(reps):
            launch()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / reps)
    ms = sorted(times)[len(times) // 2]
    return data.nbytes / (ms * 1e-3) / 1e9
