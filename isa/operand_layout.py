"""The prompt GEMM's operand in device memory: what the prepare words write and the GEMM words read
(docs/ISA.md "Prompt programs"; `experiments/prompt_gemm_ws.cu` consumes it too, D67).

An operand buffer holds slabs of one 128-token tile and one 128-wide k-block, token tile by token tile,
k-blocks in order within a tile; a slab is SLAB_BYTES, one bulk copy:

* 32 KB of f16 operand values x' (ops.f16_operand) as no-swizzle core matrices [8-token group (16), mma step
  (8), k half (2), token (8), slot (8)]: step s's B matrix is wgmma's K-major descriptor at 256 s with 128
  bytes between the k halves and GROUP_BYTES (2 KB) between token groups. Step s, half c, slot j holds
  in-block k = step_order()[s, c, j], the k order of the decode GEMV's 16-row weight units
  (megakernel/runtime/weight_layout.py), so that every k-block's partial has the decode GEMV's bits (D66).
  An 8-token group's values are contiguous, so a prepare tile of whole groups writes rectangles (D71);
* then the tile's 128 unscales 2^-P (float32), token order.

Rows of a tile past the chunk's rows hold zeros. A GEMM with bf16 weight segments (in_proj's b and a) also
reads bf16 slabs: the same layout holding the bf16 rows themselves, unscales 1. Works on NumPy arrays;
`slabs` and `from_slabs` are inverses.
"""

from __future__ import annotations

import numpy as np

from megakernel.model.plan import K_BLOCK, PROMPT_TOKEN_TILE

X_BYTES = PROMPT_TOKEN_TILE * K_BLOCK * 2
SLAB_BYTES = X_BYTES + PROMPT_TOKEN_TILE * 4
GROUP_TOKENS = 8
GROUP_BYTES = GROUP_TOKENS * K_BLOCK * 2


def group_columns(row0: int, row1: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The 4-byte words of a slab that a token tile's rows [row0, row1) occupy (whole 8-token groups):
    (values, unscales)."""
    g0, g1 = row0 // GROUP_TOKENS, row1 // GROUP_TOKENS
    return ((g0 * GROUP_BYTES // 4, g1 * GROUP_BYTES // 4),
            (X_BYTES // 4 + GROUP_TOKENS * g0, X_BYTES // 4 + GROUP_TOKENS * g1))


def step_order() -> np.ndarray:
    """[8, 2, 8]: the in-block k of mma step s's k half c, slot j, in the decode GEMV's unit order
    (step s = 2 i + h, slot 2 t + e' of half c holds k = 32 i + 8 t + 4 h + 2 c + e')."""
    s, c, j = np.arange(8)[:, None, None], np.arange(2)[None, :, None], np.arange(8)[None, None, :]
    return 32 * (s // 2) + 8 * (j // 2) + 4 * (s % 2) + 2 * c + j % 2


def _encode(x16: np.ndarray, unscale: np.ndarray, dtype, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """x16 [n * rows, blocks * 128], unscale [n * rows, blocks] (rows: whole 8-token groups) -> n runs of rows
    groups as the slabs hold them: the values [n, blocks, rows * 256] and the unscales [n, blocks, rows * 4],
    bytes."""
    total, k = x16.shape
    n, blocks, groups = total // rows, k // K_BLOCK, rows // GROUP_TOKENS
    xb = np.asarray(x16).astype(dtype).reshape(n, groups, 8, blocks, K_BLOCK)[..., step_order().reshape(-1)]
    xb = xb.reshape(n, groups, 8, blocks, 8, 2, 8).transpose(0, 3, 1, 4, 5, 2, 6)
    values = np.ascontiguousarray(xb).reshape(n, blocks, -1).view(np.uint8)
    u = np.ascontiguousarray(np.asarray(unscale, np.float32).reshape(n, rows, blocks).transpose(0, 2, 1))
    return values, u.view(np.uint8).reshape(n, blocks, -1)


def slabs(x16: np.ndarray, unscale: np.ndarray, dtype=np.float16) -> np.ndarray:
    """x16 [tiles * 128, blocks * 128] (natural k order; values of `dtype`, f16 or bf16), unscale float32
    [tiles * 128, blocks] -> the slabs, bytes [tiles, blocks, SLAB_BYTES]."""
    values, unscales = _encode(x16, unscale, dtype, PROMPT_TOKEN_TILE)
    return np.concatenate([values, unscales], axis=2)


def group_slab_words(x16: np.ndarray, unscale: np.ndarray, dtype=np.float16) -> tuple[np.ndarray, np.ndarray]:
    """Whole 8-token groups of one token tile (x16 [rows, blocks * 128], unscale [rows, blocks]) -> what their
    k-blocks' slabs hold of them at group_columns: (values, unscales) as int32 [blocks, words]."""
    values, unscales = _encode(x16, unscale, dtype, len(x16))
    return values[0].view(np.int32), unscales[0].view(np.int32)


def from_slabs(data: np.ndarray, dtype=np.float16) -> tuple[np.ndarray, np.ndarray]:
    """Bytes [tiles, blocks, SLAB_BYTES] -> (x16 [tiles * 128, blocks * 128] of `dtype` in natural k order,
    unscale float32 [tiles * 128, blocks])."""
    tiles, blocks = data.shape[:2]
    groups = PROMPT_TOKEN_TILE // GROUP_TOKENS
    data = np.ascontiguousarray(data)
    xb = data[:, :, :X_BYTES].copy().view(dtype).reshape(tiles, blocks, groups, 8, 2, 8, 8)
    permuted = xb.transpose(0, 2, 5, 1, 3, 4, 6).reshape(tiles, groups, 8, blocks, K_BLOCK)
    natural = np.empty_like(permuted)
    natural[..., step_order().reshape(-1)] = permuted
    unscale = data[:, :, X_BYTES:].copy().view(np.float32).reshape(tiles, blocks, PROMPT_TOKEN_TILE)
    return (natural.reshape(tiles * PROMPT_TOKEN_TILE, blocks * K_BLOCK),
            unscale.transpose(0, 2, 1).reshape(tiles * PROMPT_TOKEN_TILE, blocks))
