"""Rounding and elementwise maths shared by every reference op.

Activations are float32 arrays whose values are bf16 numbers wherever the model rounds to bf16;
`bf16()` is that rounding (round to nearest even, via ml_dtypes). Elementwise functions follow the
formulas of PyTorch's CUDA kernels (silu = x / (1 + exp(-x)), softplus with threshold 20), in
float32, so that the reference and the oracle differ only by ulps before each rounding.

Inside `arithmetic(Mode.EXACT)` the same ops compute in float64 and `bf16()` rounds nothing: the exact
reference (docs/NUMERICS.md "Exact reference"). The ops name their float type `REAL`, which is float32
everywhere else.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum

import ml_dtypes
import numpy as np

F32 = np.float32


class Mode(str, enum.Enum):
    """ORACLE: the rounding points of HF transformers' Qwen3.5 (weights dequantised to bf16 up front).
    ENGINE: the rounding points of this project's GPU kernels (docs/NUMERICS.md lists the differences).
    EXACT: the same model in float64, weights dequantised exactly, nothing rounded (the yardstick both
    are measured against)."""

    ORACLE = "oracle"
    ENGINE = "engine"
    EXACT = "exact"


_EXACT = contextvars.ContextVar("exact_arithmetic", default=False)


@contextlib.contextmanager
def arithmetic(mode: Mode):
    """The ops' arithmetic for `mode` within the block: float64 without rounding for EXACT, else bf16
    values held in float32 (the default outside any block)."""
    token = _EXACT.set(Mode(mode) == Mode.EXACT)
    try:
        yield
    finally:
        _EXACT.reset(token)


class _Real:
    """The float type the ops hold activations in: float64 inside arithmetic(Mode.EXACT), else float32.
    Usable as a dtype argument (NumPy reads `.dtype`) and as a constructor, like np.float32."""

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64 if _EXACT.get() else np.float32)

    def __call__(self, x):
        return self.dtype.type(x)


REAL = _Real()


def bf16(x: np.ndarray) -> np.ndarray:
    if _EXACT.get():
        return np.asarray(x, dtype=np.float64)
    return np.asarray(x, dtype=F32).astype(ml_dtypes.bfloat16).astype(F32)


def as_real(x: np.ndarray) -> np.ndarray:
    """x in the ops' float type (REAL: float32 unless exact)."""
    return np.asarray(x).astype(REAL.dtype)


def as_f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(F32)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return REAL(1) / (REAL(1) + np.exp(-x, dtype=REAL))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (REAL(1) + np.exp(-x, dtype=REAL))


def softplus(x: np.ndarray) -> np.ndarray:
    # torch.nn.functional.softplus(beta=1, threshold=20)
    return np.where(x > REAL(20), x, np.log1p(np.exp(np.minimum(x, REAL(20)), dtype=REAL), dtype=REAL)).astype(REAL)


def rsqrt(x: np.ndarray) -> np.ndarray:
    return REAL(1) / np.sqrt(x, dtype=REAL)
