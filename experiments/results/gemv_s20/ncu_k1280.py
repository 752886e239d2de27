"""Driver for Nsight Compute (gemv_s20/run6.sh): eager launches, back to back, of the fp8 GEMV
(discrete.kernels.gemv_slices, in_proj's grid, k = 1280, M = 1, as launched) and of the ring read over the
same bytes in the tiles' order at depth 2 (experiments/access_pattern.cu), and the GEMV at M = 8, k = 5120
(its shared-memory traffic), three of each, in that order: where a short launch of each spends its time."""
import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path.cwd() / "experiments"))
from access_pattern import SOURCE, UNIT_BYTES, WARPS, check_geometry  # noqa: E402
from bench_gemv import random_fp8  # noqa: E402

from discrete.kernels import gemv_slices  # noqa: E402
from megakernel.runtime import cuda_build  # noqa: E402

n, k, tiles, strips = 16384, 1280, 128, 8
blocks = k // 128
weights = random_fp8((n, k))
scales = cupy.full((n // 128, blocks), 0x3A80, dtype=cupy.uint16)
x = cupy.random.randint(0x3C00, 0x4000, size=(1, k), dtype=cupy.uint16)
out = cupy.empty((1, 1, n), dtype=cupy.float32)
weights8 = random_fp8((n, 5120))
scales8 = cupy.full((n // 128, 40), 0x3A80, dtype=cupy.uint16)
x8 = cupy.random.randint(0x3C00, 0x4000, size=(8, 5120), dtype=cupy.uint16)
out8 = cupy.empty((1, 8, n), dtype=cupy.float32)
ring = cuda_build.module(SOURCE, cupy.cuda.Device().id).get_function("ring_read_2")
smem = WARPS * 2 * UNIT_BYTES
ring.max_dynamic_shared_size_bytes = smem
sink = cupy.zeros(1, dtype=cupy.uint32)
steps = check_geometry(strips, blocks)
for _ in range(3):
    gemv_slices(weights, scales, x, 1, out=out, in_units=True, tile_rows=128, as_launched=True)
    ring((tiles,), (32 * WARPS,), (weights.reshape(-1), np.int32(0), np.int32(tiles), np.int32(strips),
                                   np.int32(blocks), np.int32(steps), sink), shared_mem=smem)
    gemv_slices(weights8, scales8, x8, 1, out=out8, in_units=True, tile_rows=128, as_launched=True)
cupy.cuda.Device().synchronize()
print("done")
