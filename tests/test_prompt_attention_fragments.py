"""ATTN_CAUSAL's tensor-core tile (megakernel/runtime/cuda/prompt_attention.cuh) checked without a GPU: a NumPy
model of the PTX warp operations it uses (ldmatrix .x4 with and without .trans, mma.sync m16n8k16 bf16 x bf16 +
fp32, in the PTX ISA's fragment layouts) runs the tile's two passes with the kernel's shared-memory layout and its
address, mask, fold and packing expressions, and must give ops.attend_tiled's rows (the reference's prompt-path
attention) within the bf16 tolerance of a different summation order.

It mirrors the kernel's expressions one for one (named as there): a change to the kernel's layout needs the same
change here. What it cannot see (async-copy groups, barriers) the GPU test compares word by word
(tests/gpu/test_prompt_gpu.py)."""

import ml_dtypes
import numpy as np
import pytest

from megakernel.reference import ops
from megakernel.reference.numerics import bf16

ROW_BYTES = 2 * 256 + 16  # attention.cuh ATTN_ROW_BYTES
KEY_TILE, ROWS, HD, MAX_GROUP = 64, 16, 256, 8  # CAUSAL_KEY_TILE, CAUSAL_ROWS, ATTN_HEAD_DIM, ATTN_MAX_GROUP
Q_BYTES, KEYS_BYTES = MAX_GROUP * ROWS * ROW_BYTES, KEY_TILE * ROW_BYTES
LANES = np.arange(32)
G, T4 = LANES >> 2, LANES & 3


class Smem:
    """Shared memory as bf16 bit patterns, addressed in bytes."""

    def __init__(self, nbytes: int):
        self.h = np.zeros(nbytes // 2, np.uint16)

    def put_row(self, at: int, values: np.ndarray) -> None:
        self.h[at // 2:at // 2 + len(values)] = values.astype(ml_dtypes.bfloat16).view(np.uint16)

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The 8 x 8 b16 matrix whose rows start at byte addresses `rows`, as float32."""
        return self.h[(rows // 2)[:, None] + np.arange(8)].view(ml_dtypes.bfloat16).astype(np.float32)


def ldmatrix_x4(sm: Smem, addr: np.ndarray, trans: bool = False) -> np.ndarray:
    """[4 registers, 32 lanes, 2 elements]: matrix j's rows from lanes 8j..8j+7; lane l gets row l / 4, columns
    2 (l % 4) + {0, 1} of it (.trans: of its transpose)."""
    out = np.empty((4, 32, 2), np.float32)
    for j in range(4):
        m = sm.matrix(addr[8 * j:8 * j + 8])
        out[j] = m[2 * T4[:, None] + np.arange(2), G[:, None]] if trans else m[G[:, None], 2 * T4[:, None] + np.arange(2)]
    return out


def mma(d: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """d [4, 32] += A (16 x 16 from a [4, 32, 2]) x B (16 x 8 from b [2, 32, 2]) in the m16n8k16 layouts."""
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    cols = 2 * T4[:, None] + np.arange(2)
    A[G[:, None], cols], A[G[:, None] + 8, cols] = a[0], a[1]
    A[G[:, None], cols + 8], A[G[:, None] + 8, cols + 8] = a[2], a[3]
    B[cols, G[:, None]], B[cols + 8, G[:, None]] = b[0], b[1]
    D = A @ B
    d += np.stack([D[G, 2 * T4], D[G, 2 * T4 + 1], D[G + 8, 2 * T4], D[G + 8, 2 * T4 + 1]]).astype(np.float32)


def round_bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def quad(v: np.ndarray, op) -> np.ndarray:
    """__shfl_xor_sync by 1, then by 2, combined with `op` (quad_max / quad_sum)."""
    v = op(v, v[LANES ^ 1])
    return op(v, v[LANES ^ 2])


def causal_tile(q, keys, values, kv, group, q0, q1, pos, scale):
    """The tile's o (bf16, before the gate) for query rows [q0, q1) x the group's heads: {(row, head): [256]}.
    q [rows, heads, 256], keys / values [positions, kv_heads, 256]; row i attends to keys [0, pos + i + 1)."""
    sm = Smem(Q_BYTES + 4 * KEYS_BYTES)
    qs, ks = 0, Q_BYTES
    vs = ks + 2 * KEYS_BYTES
    for row in range(group * ROWS):  # the group's query rows, rows past q1 zeros
        qi, h = q0 + row % ROWS, kv * group + row // ROWS
        sm.put_row(qs + row * ROW_BYTES, q[qi, h] if qi < q1 else np.zeros(HD))
    length_max = pos + q1
    tiles = -(-length_max // KEY_TILE)

    def stage(cache, slots, kt):
        for row in range(KEY_TILE):
            key = kt * KEY_TILE + row
            sm.put_row(slots + (kt & 1) * KEYS_BYTES + row * ROW_BYTES,
                       cache[key, kv] if key < length_max else np.zeros(HD))

    out = {}
    # every warp's pass 1, then every warp's pass 2 (the kernel's warps run them side by side on the same slots)
    stats = {}
    for kt in range(tiles):
        stage(keys, ks, kt)
        for warp in range(group):
            m, l = stats.get(warp, (np.full((2, 32), -np.inf, np.float32), np.zeros((2, 32), np.float32)))
            s = scores(sm, ks + (kt & 1) * KEYS_BYTES, kt, warp, q0, pos, scale)
            for sel in range(2):
                vals = s[:, 2 * sel:2 * sel + 2, :]  # [nt, 2, lanes]
                tm = quad(vals.max(axis=(0, 1)), np.fmax)
                terms = np.where(vals > -np.inf, np.exp(vals - tm, dtype=np.float32), np.float32(0))
                ts = quad(terms.sum(axis=(0, 1), dtype=np.float32), np.add)
                live = tm > -np.inf
                nxt = np.fmax(m[sel], tm)
                with np.errstate(invalid="ignore"):
                    folded = l[sel] * np.exp(m[sel] - nxt, dtype=np.float32) + ts * np.exp(tm - nxt, dtype=np.float32)
                l[sel] = np.where(live, folded, l[sel])
                m[sel] = np.where(live, nxt, m[sel])
            stats[warp] = (m, l)
    o = {warp: np.zeros((HD // 8, 4, 32), np.float32) for warp in range(group)}
    vb = (8 * ((LANES >> 3) & 1) + (LANES & 7)) * ROW_BYTES + 16 * (LANES >> 4)
    for kt in range(tiles):
        stage(keys, ks, kt)
        stage(values, vs, kt)
        for warp in range(group):
            m, l = stats[warp]
            s = scores(sm, ks + (kt & 1) * KEYS_BYTES, kt, warp, q0, pos, scale)
            with np.errstate(invalid="ignore"):
                p = np.where(s > -np.inf, round_bf16(np.exp(s - m[np.arange(4) >> 1][None], dtype=np.float32)
                                                     / l[np.arange(4) >> 1][None]), np.float32(0))
            vslot = vs + (kt & 1) * KEYS_BYTES + vb
            for j in range(KEY_TILE // 16):
                pa = np.stack([np.stack([p[2 * j, 0], p[2 * j, 1]], -1), np.stack([p[2 * j, 2], p[2 * j, 3]], -1),
                               np.stack([p[2 * j + 1, 0], p[2 * j + 1, 1]], -1),
                               np.stack([p[2 * j + 1, 2], p[2 * j + 1, 3]], -1)])
                for dp in range(HD // 16):
                    b = ldmatrix_x4(sm, vslot + 16 * j * ROW_BYTES + 32 * dp, trans=True)
                    mma(o[warp][2 * dp], pa, b[0:2])
                    mma(o[warp][2 * dp + 1], pa, b[2:4])
    for warp in range(group):
        for sel in range(2):
            for lane in range(32):
                i = q0 + G[lane] + 8 * sel
                if i >= q1:
                    continue
                row = out.setdefault((i, kv * group + warp), np.zeros(HD, np.float32))
                for dt in range(HD // 8):
                    for e in range(2):
                        row[8 * dt + 2 * T4[lane] + e] = round_bf16(o[warp][dt, 2 * sel + e, lane])
    return out


def scores(sm, slot, kt, warp, q0, pos, scale):
    """s[nt][e][lane]: bf16(bf16(q.k) x scale), or -inf past the row's length (the kernel's `scores`)."""
    qa = (warp * ROWS + (LANES & 15)) * ROW_BYTES + 16 * (LANES >> 4)
    kb = (8 * (LANES >> 4) + (LANES & 7)) * ROW_BYTES + 16 * ((LANES >> 3) & 1)
    s = np.zeros((KEY_TILE // 8, 4, 32), np.float32)
    for step in range(HD // 16):
        a = ldmatrix_x4(sm, qa + 32 * step)
        for pair in range(KEY_TILE // 16):
            b = ldmatrix_x4(sm, slot + kb + 16 * pair * ROW_BYTES + 32 * step)
            mma(s[2 * pair], a, b[0:2])
            mma(s[2 * pair + 1], a, b[2:4])
    length = np.stack([pos + q0 + G + 1, pos + q0 + G + 9])  # [sel, lane]
    for nt in range(KEY_TILE // 8):
        for e in range(4):
            key = kt * KEY_TILE + 8 * nt + 2 * T4 + (e & 1)
            s[nt, e] = np.where(key < length[e >> 1], round_bf16(round_bf16(s[nt, e]) * np.float32(scale)), -np.inf)
    return s


@pytest.mark.parametrize("pos, q0, q1", [(37, 32, 40), (130, 16, 32), (0, 0, 16)])
def test_the_tile_computes_the_reference_prompt_attention(pos, q0, q1):
    """Row i of the tile (keys [0, pos + i + 1): partial key tiles, a tile past some rows, rows past q1) against
    ops.attend_tiled: within one bf16 ulp of the row's largest value (q.k, the tiles' sums and P.V summed in the
    tensor cores' order); and the control, a kernel that reads the keys one row off, is far outside."""
    rng = np.random.default_rng(pos)
    heads, kv_heads, scale = 12, 2, 256 ** -0.5
    group = heads // kv_heads
    n = pos + q1
    q = bf16(rng.standard_normal((q1, heads, HD)).astype(np.float32))
    keys = bf16(rng.standard_normal((n, kv_heads, HD)).astype(np.float32))
    values = bf16(rng.standard_normal((n, kv_heads, HD)).astype(np.float32))
    for kv in range(kv_heads):
        got = causal_tile(q, keys, values, kv, group, q0, q1, pos, scale)
        assert sorted(got) == [(i, kv * group + h) for i in range(q0, q1) for h in range(group)]
        for (i, h), row in got.items():
            L = pos + i + 1
            want = ops.attend_tiled(q[i], keys[:L], values[:L], scale)[h]
            assert np.abs(row - want).max() <= 2.0 ** -8 * np.abs(want).max(), (i, h)
    shifted = causal_tile(q, np.roll(keys, 1, axis=0), values, 0, group, q0, q1, pos, scale)
    i = q1 - 1
    want = ops.attend_tiled(q[i], keys[:pos + i + 1], values[:pos + i + 1], scale)[0]
    assert np.abs(shifted[(i, 0)] - want).max() > 0.05 * np.abs(want).max()
