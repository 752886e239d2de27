"""Issue 18 (s51): one GEMV kernel alone for Nsight Compute (run under ncu -k gemv_fp8_slices): an in_proj-sized fp8
weight (16384 x 5120, random e4m3 bytes in units, unit scales), M rows, 128-row tiles, one k-slice, launched 5 times.

  ncu -k gemv_fp8_slices --launch-skip 3 --launch-count 1 python3 ncu_gemv.py M
"""
import sys

import cupy
import numpy as np

from discrete.kernels import gemv_slices

m = int(sys.argv[1])
n, k = 16384, 5120
rng = np.random.default_rng(0)
w = cupy.asarray(rng.integers(0, 0x77, (n, k), dtype=np.uint8))  # finite e4m3 values
s = cupy.full((n // 128, k // 128), 0x3F80, dtype=cupy.uint16)  # bf16 1.0
x = cupy.asarray((rng.standard_normal((m, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))
out = cupy.empty((1, m, n), dtype=cupy.float32)
for _ in range(5):
    gemv_slices(w, s, x, 1, out=out, in_units=True)
cupy.cuda.Device().synchronize()
