"""Driver for Nsight Compute (gemv_s22/run4.sh): eager launches, as bench_gemv.py launches them (M = 1, one
k-slice, 128-row tiles, shared memory as the launcher gives it), of the bf16 lm_head (248,320 x 5,120) and
the fp8 gate_up (34,816 x 5,120), alternated, twice each: what holds the two shapes furthest from their
targets (95 % and 85 % of the read bandwidth) below them."""
import sys
from pathlib import Path

import cupy

sys.path.insert(0, str(Path.cwd() / "experiments"))
from bench_gemv import random_fp8  # noqa: E402

from discrete.kernels import gemv_slices  # noqa: E402

k = 5120
head = cupy.random.randint(0x3000, 0x3C00, size=(248320, k), dtype=cupy.uint16)
gate_up = random_fp8((34816, k))
scales = cupy.full((34816 // 128, k // 128), 0x3A80, dtype=cupy.uint16)
x = cupy.random.randint(0x3C00, 0x4000, size=(1, k), dtype=cupy.uint16)
out_head = cupy.empty((1, 1, 248320), dtype=cupy.float32)
out_gate_up = cupy.empty((1, 1, 34816), dtype=cupy.float32)
for _ in range(2):
    gemv_slices(head, None, x, 1, out=out_head, tile_rows=128, as_launched=True)
    gemv_slices(gate_up, scales, x, 1, out=out_gate_up, in_units=True, tile_rows=128, as_launched=True)
cupy.cuda.Device().synchronize()
print("done")
