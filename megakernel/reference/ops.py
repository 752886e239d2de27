"""The model's ops, one small function each, on float32 arrays holding bf16 values (numerics.py).

Every function that takes rows computes each row with the same code whatever the number of rows,
so an M-row call gives each row exactly the bits of a one-row call. docs/SPEC-qwen35.md section 3 is the
specification; its section numbers are cited per op.
"""

from __future__ import annotations

import numpy as np

from ..model import fp8, plan
from ..model.plan import K_BLOCK, ROW_BLOCK
from .numerics import REAL, Mode, as_real, bf16, rsqrt, sigmoid, silu


# --- norms (docs/SPEC-qwen35.md 3.2, 3.4) -------------------------------------------------------------------
def rms_norm_1p(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """Zero-centred RMSNorm over the last axis: bf16(x * rsqrt(mean(x^2) + eps) * (1 + w))."""
    xf = as_real(x)
    var = np.mean(xf * xf, axis=-1, keepdims=True, dtype=REAL)
    return bf16(xf * rsqrt(var + REAL(eps)) * (REAL(1) + as_real(weight)))


def gated_rms_norm(o: np.ndarray, z: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """GDN output norm per value head (last axis): plain weight, silu(z) gate, two inner bf16 roundings."""
    of = as_real(o)
    var = np.mean(of * of, axis=-1, keepdims=True, dtype=REAL)
    xn = bf16(of * rsqrt(var + REAL(eps)))
    t = bf16(as_real(weight) * xn)
    return bf16(t * silu(as_real(z)))


# --- linear layers ----------------------------------------------------------------------------
def block_partials(w_blocks: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Engine GEMV, first level: w_blocks [rows, blocks, 128] (fp8 or bf16 values), x [blocks * 128]
    -> fp32 [rows, blocks], the products of each 128-wide block summed (one fixed order)."""
    return np.einsum("nbk,bk->nb", w_blocks, x.reshape(-1, K_BLOCK))


F16_TOP_BINADE = 15  # the largest binade f16 holds whole: bf16 values below 2^16 are at most 65,280
TOP_EXPONENT_FLOOR = 17  # a block's top exponent counts as at least this: 2^P stays <= 2^125, a normal float


def f16_operand(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The input of an fp8 GEMV as the tensor cores take it (f16, like the widened weights): per 128-wide
    block a power of two 2^P moves the block's largest binade to 2^15 and x' = f16(x 2^P). Every value
    within 2^32 of the block's largest is exact; smaller ones round to f16's subnormal grid (NUMERICS.md).
    P = 142 - max(E, 17) from the largest biased exponent E of the block's values (bit arithmetic, as the
    device does it). Returns x' [blocks * 128] (float32 holding f16 values) and 2^-P per block."""
    xb = as_real(x).reshape(-1, K_BLOCK)
    top = (xb.view(np.uint32) >> 23 & 0xFF).max(axis=1).astype(np.int32)
    p = 127 + F16_TOP_BINADE - np.maximum(top, TOP_EXPONENT_FLOOR)
    x16 = (xb * np.ldexp(REAL(1), p).astype(REAL)[:, None]).astype(np.float16).astype(REAL)
    return x16.reshape(-1), np.ldexp(REAL(1), -p).astype(REAL)


def fma32(a, b, c) -> np.ndarray:
    """fp32 a x b + c rounded once (the device's fma.rn.f32, subnormals kept), elementwise. NumPy has no
    fp32 fma: the product is exact in float64 (24 + 24 bits), the sum is taken in float64 rounded to odd
    (its exact error by TwoSum; an inexact even result moves one ulp towards it), and a float64 rounded to
    odd rounds to fp32 as the exact value would (53 >= 2 x 24 + 2 bits): no double rounding."""
    p = np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32).astype(np.float64)
    c = np.asarray(c, np.float32).astype(np.float64)
    s = p + c
    t = s - p
    err = (p - (s - t)) + (c - t)
    even = (s.view(np.int64) & 1) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def slice_sum(partials: np.ndarray, scale: np.ndarray | None, unscale: np.ndarray | None = None,
              fused: bool = False) -> np.ndarray:
    """Second level: accumulate scale x partial over a slice's blocks in order (fp32); an fp8 GEMV's
    partials are of the f16 operand (f16_operand): acc += (scale x partial) x 2^-P, three roundings, or
    (fused: the prompt GEMM's promotion, D74) acc = fma(partial, scale x 2^-P, acc), one (scale x 2^-P is
    exact: a bf16 scale times a power of two)."""
    acc = np.zeros(partials.shape[0], dtype=REAL)
    for b in range(partials.shape[1]):
        if scale is None:
            acc += partials[:, b]
        elif unscale is None:
            acc += scale[:, b] * partials[:, b]
        elif fused:
            acc = fma32(partials[:, b], scale[:, b] * unscale[b], acc)
        else:
            acc += (scale[:, b] * partials[:, b]) * unscale[b]
    return acc


def engine_slice_sum(w_blocks: np.ndarray, x: np.ndarray, scale: np.ndarray | None,
                     fused: bool = False) -> np.ndarray:
    """One k-slice of the engine GEMV for one input row: w_blocks [rows, blocks, 128], x [blocks * 128]
    (bf16 values), scale [rows, blocks] (fp8) or None (bf16 weights, bf16 operand) -> fp32 [rows].
    fused: slice_sum's fused promotion."""
    if scale is None:
        return slice_sum(block_partials(w_blocks, x), None)
    x16, unscale = f16_operand(x)
    return slice_sum(block_partials(w_blocks, x16), scale, unscale, fused)


def combine_slices(slice_sums: list[np.ndarray]) -> np.ndarray:
    """Third level: the k-slices added in order 0..S-1 (fp32)."""
    acc = slice_sums[0].copy()
    for part in slice_sums[1:]:
        acc += part
    return acc


class Linear:
    """y = W x for each row. bf16 weights: fp32 accumulate, bf16 out. Per mode:
    ORACLE multiplies bf16(fp8 x scale) weights with one BLAS product per row; ENGINE widens fp8
    exactly, takes x as its f16 operand (f16_operand), applies each 128 x 128 block scale once to the
    block's fp32 partial and sums in the
    order of megakernel/model/plan.py with `slices` k-slices (bf16 weights: the same order, no scale); EXACT
    multiplies the exact products fp8 x scale (float32 holds them: at most 12 significant bits) in
    float64, one BLAS product per row, and rounds nothing."""

    def __init__(self, weight: np.ndarray, scale: np.ndarray | None, mode: Mode, slices: int = 1):
        self.out_features, self.in_features = weight.shape
        self.engine = mode == Mode.ENGINE
        self.slices = slices
        if self.engine:
            n, k = weight.shape
            self.w = as_real(weight).reshape(n, k // K_BLOCK, K_BLOCK)
            self.scale = None if scale is None else np.repeat(as_real(scale), ROW_BLOCK, axis=0)[:n]
        elif scale is None:
            self.w = as_real(weight)
        elif mode == Mode.EXACT:
            self.w = fp8.dequantize(weight, scale)
        else:
            self.w = bf16(fp8.dequantize(weight, scale))

    def accumulate(self, x: np.ndarray, slices: int | None = None, fused: bool = False) -> np.ndarray:
        """fp32 results [M, N] before the output rounding (rows computed one by one). slices: the engine's
        k-slices for this call instead of the layer's own (the prompt path's GEMM: plan.PROMPT_SLICES);
        fused: the engine promotes each k-block by one fma (slice_sum; the prompt path's GEMM)."""
        x = as_real(x).reshape(-1, self.in_features)
        w = self.w.astype(REAL.dtype, copy=False)  # EXACT: one float64 copy a call, not one a row
        slices = self.slices if slices is None else slices
        return np.stack([self._row(row, w, slices, fused) for row in x])

    def __call__(self, x: np.ndarray, slices: int | None = None, fused: bool = False) -> np.ndarray:
        return bf16(self.accumulate(x, slices, fused))

    def _row(self, x: np.ndarray, w: np.ndarray, slices: int, fused: bool) -> np.ndarray:
        x = np.ascontiguousarray(x)
        if not self.engine:
            return w @ x
        sums = []
        for s in range(slices):
            b0, b1 = plan.slice_blocks(self.in_features, slices, s)
            sums.append(engine_slice_sum(self.w[:, b0:b1], x[b0 * K_BLOCK:b1 * K_BLOCK],
                                         None if self.scale is None else self.scale[:, b0:b1], fused))
        return combine_slices(sums)


def swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """docs/SPEC-qwen35.md 3.5: bf16(bf16(silu(gate)) * up)."""
    return bf16(bf16(silu(gate)) * up)


# --- rotary position embedding (docs/SPEC-qwen35.md 3.3 step 4) ---------------------------------------------
def rope_tables(positions: np.ndarray, rotary_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [len(positions), rotary_dim] in bf16, angles in fp32 (HF computes, then casts)."""
    inv_freq = REAL(1) / (REAL(theta) ** (np.arange(0, rotary_dim, 2, dtype=REAL) / REAL(rotary_dim)))
    freqs = np.asarray(positions, dtype=REAL)[:, None] * inv_freq[None, :]
    angles = np.concatenate([freqs, freqs], axis=-1)
    return bf16(np.cos(angles, dtype=REAL)), bf16(np.sin(angles, dtype=REAL))


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


# --- full attention (docs/SPEC-qwen35.md 3.3) ---------------------------------------------------------------
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
    out = np.empty((heads, d), dtype=REAL)
    for h in range(heads):
        kv = h // group
        scores = bf16(bf16(keys[:, kv, :] @ q[h]) * REAL(scale))
        p = np.exp(scores - scores.max(), dtype=REAL)
        p = bf16(p / p.sum(dtype=REAL))
        out[h] = bf16(p @ values[:, kv, :])
    return out


def output_gate(o: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """Attention output times sigmoid(gate), both rounded to bf16 (docs/SPEC-qwen35.md 3.3 step 7)."""
    return bf16(o * bf16(sigmoid(gate)))


# --- engine attention: the same rounding points, summed partition by partition (plan.py) ----------
def attention_scores(q: np.ndarray, keys: np.ndarray, scale: float) -> np.ndarray:
    """q [heads, d] of one kv head's group, keys [T, d] -> bf16 scores [heads, T]."""
    return bf16(bf16(q @ keys.T) * REAL(scale))


def partition_stats(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scores [heads, n] of one partition -> (max, sum of exp(s - max)) per head, fp32; empty: (-inf, 0)."""
    if scores.shape[1] == 0:
        return np.full(scores.shape[0], -np.inf, REAL), np.zeros(scores.shape[0], REAL)
    m = scores.max(axis=1)
    return m, np.exp(scores - m[:, None], dtype=REAL).sum(axis=1, dtype=REAL)


def combine_stats(maxes: np.ndarray, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[P, heads] partition statistics -> global (max, sum) per head, partitions added in order."""
    m = maxes.max(axis=0)
    # each partition's term elementwise, all at once (the same fp32 operations per element); then added
    # in partition order
    terms = np.where(np.isfinite(maxes), sums * np.exp(maxes - m, dtype=REAL), REAL(0))
    total = np.zeros_like(m)
    for term in terms:
        total += term
    return m, total


def partition_output(scores: np.ndarray, m: np.ndarray, total: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One partition's fp32 share of P.V: P = bf16(exp(s - m) / total) (as HF), values [n, d] bf16."""
    p = bf16(np.exp(scores - m[:, None], dtype=REAL) / total[:, None])
    return (p @ values).astype(REAL)


def merge_partitions(parts: np.ndarray) -> np.ndarray:
    """[P, heads, d] partition outputs -> bf16 attention output, added in order."""
    return bf16(combine_slices(list(parts)))


def online_stats(scores: np.ndarray, tile: int) -> tuple[np.ndarray, np.ndarray]:
    """scores [heads, T] -> global (max, sum of exp(s - max)) per head, from each tile's statistics
    (partition_stats of keys [t * tile, (t + 1) * tile)) folded in key order as a streaming kernel keeps them:
    m' = max(m, m_t), l' = l exp(m - m') + l_t exp(m_t - m')."""
    m = np.full(scores.shape[0], -np.inf, REAL)
    total = np.zeros(scores.shape[0], REAL)
    for lo in range(0, scores.shape[1], tile):
        tile_max, tile_sum = partition_stats(scores[:, lo:lo + tile])
        new = np.maximum(m, tile_max)
        total = total * np.exp(m - new, dtype=REAL) + tile_sum * np.exp(tile_max - new, dtype=REAL)
        m = new
    return m, total


def attend_tiled(q: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float,
                 tile: int = plan.PROMPT_KEY_TILE) -> np.ndarray:
    """The prompt path's attention for one query row (issue 21): the rounding points of `attend`, the softmax
    statistics folded over key tiles anchored at key 0 (online_stats: a row's bits depend on its own length
    only, not on the chunk it sits in), then P = bf16(exp(s - max) / sum) and P.V over all of the row's keys
    in one fp32 sum, rounded to bf16. One tile covering the row is attend_partitioned with one partition."""
    heads, d = q.shape
    group = heads // keys.shape[1]
    out = np.empty((heads, d), dtype=REAL)
    for kv in range(keys.shape[1]):
        rows = slice(kv * group, (kv + 1) * group)
        scores = attention_scores(q[rows], keys[:, kv, :], scale)
        m, total = online_stats(scores, tile)
        out[rows] = bf16(partition_output(scores, m, total, values[:, kv, :]))
    return out


def attend_partitioned(q: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float,
                       partitions: int = plan.ATTENTION_PARTITIONS) -> np.ndarray:
    """Engine attention for one query row: like `attend`, with scores, softmax statistics and P.V
    computed partition by partition (plan.partition_bounds) and combined in a fixed order. Each piece
    has the shapes of one (KV head, partition) tile of the GPU kernels and of the interpreter."""
    heads, d = q.shape
    kv_heads = keys.shape[1]
    group = heads // kv_heads
    length = keys.shape[0]
    out = np.empty((heads, d), dtype=REAL)
    bounds = [plan.partition_bounds(length, p, partitions) for p in range(partitions)]
    for kv in range(kv_heads):
        qh = q[kv * group:(kv + 1) * group]
        scores = [attention_scores(qh, keys[lo:hi, kv, :], scale) for lo, hi in bounds]
        stats = [partition_stats(s) for s in scores]
        m, total = combine_stats(np.stack([s[0] for s in stats]), np.stack([s[1] for s in stats]))
        parts = np.stack([partition_output(s, m, total, values[lo:hi, kv, :]) for s, (lo, hi) in zip(scores, bounds)])
        out[kv * group:(kv + 1) * group] = merge_partitions(parts)
    return out
