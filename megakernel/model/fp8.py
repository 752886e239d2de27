"""fp8 e4m3 with 128x128 block scales: quantise (synthetic writer) and dequantise (reference, oracle).

The checkpoint's ``weight_scale_inv`` multiplies: W[n, k] = fp8[n, k] * S[n // 128, k // 128].
Every step below is an IEEE-754 correctly rounded float32 operation or an exact one, so a GPU
implementation that uses the same operations (``__fdiv_rn``, round-to-nearest-even conversions)
produces the same bytes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .config import FP8_MAX

E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16
BLOCK = 128


def _blocks(w: np.ndarray) -> np.ndarray:
    n, k = w.shape
    if n % BLOCK or k % BLOCK:
        raise ValueError(f"fp8 block quantisation needs dims that are multiples of {BLOCK}, got {w.shape}")
    return w.reshape(n // BLOCK, BLOCK, k // BLOCK, BLOCK)


def block_scales(w: np.ndarray, pow2: bool = False) -> np.ndarray:
    """Per-block scale as stored (bf16): amax / 448 rounded to bf16, or the next power of two."""
    amax = np.abs(_blocks(w)).max(axis=(1, 3)).astype(np.float32)
    amax = np.where(amax > 0, amax, np.float32(FP8_MAX))  # an all-zero block gets scale 1
    scale = amax / np.float32(FP8_MAX)
    if pow2:
        # Smallest power of two >= amax/448: bf16(fp8 * scale) is then exact.
        mantissa, exponent = np.frexp(scale)
        scale = np.ldexp(np.float32(1.0), np.where(mantissa == 0.5, exponent - 1, exponent)).astype(np.float32)
    return scale.astype(BF16)


def quantize(w: np.ndarray, pow2: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """float32 [N, K] -> (e4m3 [N, K], bf16 scales [N/128, K/128])."""
    w = np.asarray(w, dtype=np.float32)
    scale = block_scales(w, pow2)
    s = scale.astype(np.float32)[:, None, :, None]
    # A scale rounded down to bf16 can push |w / s| just past 448: saturate rather than make NaN.
    q = np.clip(_blocks(w) / s, -FP8_MAX, FP8_MAX).astype(E4M3)
    return q.reshape(w.shape), scale


def dequantize(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """e4m3 [N, K] and scales [N/128, K/128] (bf16 or fp32) -> float32 [N, K], exact products."""
    s = np.asarray(scale).astype(np.float32)[:, None, :, None]
    return (_blocks(q.astype(np.float32)) * s).reshape(q.shape)
