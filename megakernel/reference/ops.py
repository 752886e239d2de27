"""The model's ops, one small function each, on float32 arrays holding bf16 values (numerics.py).

Every function that takes rows computes each row with the same code whatever the number of rows,
so an M-row call gives each row exactly the bits of a one-row call. SPEC-qwen35.md section 3 is the
specification; its section numbers are cited per op.
"""

from __future__ import annotations

import numpy as np

from .numerics import F32, Mode, as_f32, bf16, rsqrt, sigmoid, silu

BLOCK = 128


# --- norms (SPEC 3.2, 3.4) --------------------------------------------------------------------
def rms_norm_1p(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """Zero-centred RMSNorm over the last axis: bf16(x * rsqrt(mean(x^2) + eps) * (1 + w))."""
    xf = as_f32(x)
    var = np.mean(xf * xf, axis=-1, keepdims=True, dtype=F32)
    return bf16(xf * rsqrt(var + F32(eps)) * (F32(1) + as_f32(weight)))


def gated_rms_norm(o: np.ndarray, z: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """GDN output norm per value head (last axis): plain weight, silu(z) gate, two inner bf16 roundings."""
    of = as_f32(o)
    var = np.mean(of * of, axis=-1, keepdims=True, dtype=F32)
    xn = bf16(of * rsqrt(var + F32(eps)))
    t = bf16(as_f32(weight) * xn)
    return bf16(t * silu(as_f32(z)))


# --- linear layers ----------------------------------------------------------------------------
class Linear:
    """y = W x for each row. bf16 weights: fp32 accumulate, bf16 out. fp8 weights per mode:
    ORACLE multiplies bf16(fp8 x scale) weights; ENGINE widens fp8 exactly and applies each
    128x128 block scale once to the block's fp32 partial sum."""

    def __init__(self, weight: np.ndarray, scale: np.ndarray | None, mode: Mode):
        self.out_features, self.in_features = weight.shape
        self.blockwise = scale is not None and mode == Mode.ENGINE
        if scale is None:
            self.w = as_f32(weight)
        elif self.blockwise:
            n, k = weight.shape
            self.w = as_f32(weight).reshape(n, k // BLOCK, BLOCK)
            self.scale = np.repeat(as_f32(scale), BLOCK, axis=0)[:n]  # [N, K/128]
        else:
            s = np.repeat(np.repeat(as_f32(scale), BLOCK, axis=0), BLOCK, axis=1)[: weight.shape[0], : weight.shape[1]]
            self.w = bf16(as_f32(weight) * s)

    def accumulate(self, x: np.ndarray) -> np.ndarray:
        """fp32 results [M, N] before the output rounding (rows computed one by one)."""
        x = as_f32(x).reshape(-1, self.in_features)
        return np.stack([self._row(row) for row in x])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return bf16(self.accumulate(x))

    def _row(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        if not self.blockwise:
            return self.w @ x
        partial = np.einsum("nbk,bk->nb", self.w, x.reshape(-1, BLOCK))
        return (partial * self.scale).sum(axis=1, dtype=F32)


def swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """SPEC 3.5: bf16(bf16(silu(gate)) * up)."""
    return bf16(bf16(silu(gate)) * up)


# --- rotary position embedding (SPEC 3.3 step 4) ----------------------------------------------
def rope_tables(positions: np.ndarray, rotary_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [len(positions), rotary_dim] in bf16, angles in fp32 (HF computes, then casts)."""
    inv_freq = F32(1) / (F32(theta) ** (np.arange(0, rotary_dim, 2, dtype=F32) / F32(rotary_dim)))
    freqs = np.asarray(positions, dtype=F32)[:, None] * inv_freq[None, :]
    angles = np.concatenate([freqs, freqs], axis=-1)
    return bf16(np.cos(angles, dtype=F32)), bf16(np.sin(angles, dtype=F32))


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [rows, heads, head_dim] bf16; rotate the first rotary_dim dims as pairs (i, i + rotary_dim/2),
    each product and the sum rounded to bf16 (HF's bf16 arithmetic). cos/sin [rows, rotary_dim]."""
    rot = cos.shape[-1]
    half = rot // 2
    xr = x[..., :rot]
    rotated = np.concatenate([-xr[..., half:], xr[..., :half]], axis=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    out = x.copy()
    out[..., :rot] = bf16(bf16(xr * c) + bf16(rotated * s))
    return out


# --- full attention (SPEC 3.3) ----------------------------------------------------------------
def split_query_gate(qg: np.ndarray, heads: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """q_proj output [rows, heads * 2 * head_dim] is per head [query | gate]: -> q [rows, heads, head_dim],
    gate [rows, heads * head_dim] head-major."""
    per_head = qg.reshape(qg.shape[0], heads, 2, head_dim)
    return per_head[:, :, 0, :], per_head[:, :, 1, :].reshape(qg.shape[0], heads * head_dim)


def attend(q: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float) -> np.ndarray:
    """One query row over the cache: q [heads, d]; keys, values [T, kv_heads, d] (bf16).
    Query head h reads kv head h // group. Scores bf16, softmax fp32 -> bf16, P.V -> bf16 (HF eager)."""
    heads, d = q.shape
    group = heads // keys.shape[1]
    out = np.empty((heads, d), dtype=F32)
    for h in range(heads):
        kv = h // group
        scores = bf16(bf16(keys[:, kv, :] @ q[h]) * F32(scale))
        p = np.exp(scores - scores.max(), dtype=F32)
        p = bf16(p / p.sum(dtype=F32))
        out[h] = bf16(p @ values[:, kv, :])
    return out


def output_gate(o: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """Attention output times sigmoid(gate), both rounded to bf16 (SPEC 3.3 step 7)."""
    return bf16(o * bf16(sigmoid(gate)))
