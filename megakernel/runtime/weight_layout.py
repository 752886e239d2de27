"""The fp8 weights' layout in device memory: 16-row units (megakernel/runtime/cuda/gemv.cuh, docs/ISA.md).

A unit is 16 rows x one 128-wide k-block, 2 KB of e4m3, stored contiguously; the units of a matrix go
strip by strip (16 rows), k-blocks in order within a strip, so a warp streaming its rows reads one
contiguous run. Inside a unit, lane L = 4 g + t of a warp reads 16-byte vector i (i = 0..3) at
i * 512 + 16 L: for mma steps 2i and 2i + 1 (h = 0, 1), rows g and g + 8 (r = 0, 1), the four weights
at k = 32 i + 8 t + 4 h + e (e = 0..3), in the order (h, r, e). The checkpoint on disk stays row-major;
the arena's fp8 weights are laid out when they are loaded or generated (megakernel/runtime/device.py).

Works on NumPy and CuPy arrays alike (the array's own module does the reshapes).
"""

from __future__ import annotations

from ..model.plan import K_BLOCK

UNIT_ROWS = 16  # gemv.cuh WARP_ROWS
# [strip, r, g, block, i, t, h, e] -> [strip, block, i, g, t, h, r, e]
_TO_UNITS = (0, 3, 4, 2, 5, 6, 1, 7)
_FROM_UNITS = tuple(_TO_UNITS.index(a) for a in range(8))


def _split(n: int, k: int) -> tuple[int, ...]:
    if n % UNIT_ROWS or k % K_BLOCK:
        raise ValueError(f"an fp8 weight [{n}, {k}] is not whole 16-row x 128-column units")
    return (n // UNIT_ROWS, 2, 8, k // K_BLOCK, 4, 4, 2, 4)


def to_units(w):
    """Row-major one-byte weights [n, k] -> the same bytes in unit order (shaped [n, k] for convenience:
    row i of the result is not row i of the weight)."""
    n, k = w.shape
    return w.reshape(_split(n, k)).transpose(_TO_UNITS).reshape(n, k).copy()


def from_units(u, n: int, k: int):
    """The inverse of to_units: unit-ordered bytes (any shape of n * k) -> row-major [n, k]."""
    s = _split(n, k)
    return u.reshape(tuple(s[a] for a in _TO_UNITS)).transpose(_FROM_UNITS).reshape(n, k).copy()
