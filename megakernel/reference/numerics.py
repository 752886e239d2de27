"""Rounding and elementwise maths shared by every reference op.

Activations are float32 arrays whose values are bf16 numbers wherever the model rounds to bf16;
`bf16()` is that rounding (round to nearest even, via ml_dtypes). Elementwise functions follow the
formulas of PyTorch's CUDA kernels (silu = x / (1 + exp(-x)), softplus with threshold 20), in
float32, so that the reference and the oracle differ only by ulps before each rounding.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

F32 = np.float32


class Mode(str, enum.Enum):
    """ORACLE: the rounding points of HF transformers' Qwen3.5 (weights dequantised to bf16 up front).
    ENGINE: the rounding points of this project's GPU kernels (docs/NUMERICS.md lists the differences)."""

    ORACLE = "oracle"
    ENGINE = "engine"


def bf16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F32).astype(ml_dtypes.bfloat16).astype(F32)


def as_f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(F32)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return F32(1) / (F32(1) + np.exp(-x, dtype=F32))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (F32(1) + np.exp(-x, dtype=F32))


def softplus(x: np.ndarray) -> np.ndarray:
    # torch.nn.functional.softplus(beta=1, threshold=20)
    return np.where(x > F32(20), x, np.log1p(np.exp(np.minimum(x, F32(20)), dtype=F32), dtype=F32)).astype(F32)


def rsqrt(x: np.ndarray) -> np.ndarray:
    return F32(1) / np.sqrt(x, dtype=F32)
