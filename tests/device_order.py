"""The device's summation order for the RMSNorm of residual rows, in NumPy (tests: the per-word GPU checks).

The engine's NumPy RMSNorm (reference/ops.py rms_norm_1p) sums the squares with np.mean, pairwise; the
device sums them per thread in 16-byte pieces, then per warp, then across warps (gemv_tile.cuh
norm_rows). The two fp32 sums differ in their last bits, so now and then one element of the bf16
normalised row rounds the other way, and a GEMV then moves a whole output row by that ulp times one weight
column: measured on the H200, 27B, last NORM_GATE_UP of an 8-row pass, 8.8e-5 of the row's largest output,
explained to 1.8e-7 by one element of the normalised row one ulp apart. Checking a GEMV word against the
GPU from the same normalised input therefore needs the device's order, not a looser bound.
"""

import numpy as np

from megakernel.runtime.cuda_build import tile_threads
from megakernel.reference.numerics import F32, as_f32, bf16, rsqrt

WARP = 32
PIECE = 8  # bf16 elements in one 16-byte piece


def tree_sum(v: np.ndarray) -> np.ndarray:
    """fp32 sum over the last axis (32 lanes) as the xor butterfly of common.cuh warp_sum adds them: lane l
    adds lane l ^ 16, then ^ 8, ^ 4, ^ 2, ^ 1 (addition commutes, so every lane ends with lane 0's sum)."""
    width = WARP
    while width > 1:
        width //= 2
        v = v[..., :width] + v[..., width:2 * width]
    return v[..., 0]


def sum_of_squares(x: np.ndarray) -> np.ndarray:
    """fp32 sum of x^2 over the last axis (a multiple of 8) in gemv_tile.cuh norm_rows' order: thread t of
    the block reads 16-byte pieces t, t + T, t + 2T, ... (8 elements each) and accumulates each piece's
    elements in order; the warps' lanes are added by the butterfly, then the warps' sums (lanes past the
    warp count hold 0, and adding 0 is exact) by the butterfly."""
    threads = tile_threads()
    squares = as_f32(x) * as_f32(x)
    k = squares.shape[-1]
    assert k % PIECE == 0, "norm_rows reads rows in 16-byte pieces"
    pieces = squares.reshape(squares.shape[:-1] + (k // PIECE, PIECE))
    padded = np.zeros(squares.shape[:-1] + (-(-(k // PIECE) // threads) * threads, PIECE), F32)
    padded[..., :k // PIECE, :] = pieces
    per_thread = np.zeros(squares.shape[:-1] + (threads,), F32)
    for first in range(0, padded.shape[-2], threads):
        for e in range(PIECE):
            per_thread += padded[..., first:first + threads, e]
    per_warp = tree_sum(per_thread.reshape(squares.shape[:-1] + (threads // WARP, WARP)))
    lanes = np.zeros(squares.shape[:-1] + (WARP,), F32)
    lanes[..., :threads // WARP] = per_warp
    return tree_sum(lanes)


def rms_norm_1p(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """reference/ops.py rms_norm_1p with the device's sum: bf16(x * rsqrt(ss / k + eps) * (1 + w))."""
    xf = as_f32(x)
    var = sum_of_squares(xf)[..., None] / F32(xf.shape[-1])
    return bf16(xf * rsqrt(var + F32(eps)) * (F32(1) + as_f32(weight)))
