"""Gated DeltaNet ops (docs/SPEC-qwen35.md 3.4): causal conv step, gates, l2norm, the fp32 delta-rule recurrence
(token by token) and its chunked WY form for prompts.

State layout: S[j] in R^{dk x dv} per value head j (HF's layout), fp32. Conv state: the last
K - 1 raw (pre-conv) in_proj_qkv outputs, oldest first, bf16 values.
"""

from __future__ import annotations

import numpy as np

from .numerics import REAL, as_real, bf16, rsqrt, sigmoid, silu, softplus

CHUNK = 64  # HF torch_chunk_gated_delta_rule's chunk size; chunks are anchored at position 0


def conv_step(mixed: np.ndarray, conv_state: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One token: mixed [C] raw bf16, conv_state [K-1, C], weight [C, 1, K] (tap K-1 = current token).
    Returns (bf16(silu(bf16(conv))), new conv_state)."""
    window = np.concatenate([conv_state, mixed[None, :]], axis=0)  # [K, C], oldest first
    taps = as_real(weight)[:, 0, :].T  # [K, C]
    y = bf16((window * taps).sum(axis=0, dtype=REAL))
    return bf16(silu(y)), window[1:]


def gates(b: np.ndarray, a: np.ndarray, a_log: np.ndarray, dt_bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """beta = bf16(sigmoid(b)); g = -exp(A_log) * softplus(a + dt_bias), fp32 (log of the decay)."""
    beta = bf16(sigmoid(b))
    g = -np.exp(as_real(a_log), dtype=REAL) * softplus(as_real(a) + as_real(dt_bias))
    return beta, g


def l2norm(x: np.ndarray) -> np.ndarray:
    """x * rsqrt(sum(x^2) + 1e-6) over the last axis (eps on the sum, as FLA and HF)."""
    return x * rsqrt((x * x).sum(axis=-1, keepdims=True, dtype=REAL) + REAL(1e-6))


def heads_for_values(x: np.ndarray, n_value_heads: int) -> np.ndarray:
    """[..., Hk, d] -> [..., Hv, d]: value head j reads key head j // (Hv / Hk) (repeat_interleave)."""
    return np.repeat(x, n_value_heads // x.shape[-2], axis=-2)


def prepare_qk(q: np.ndarray, k: np.ndarray, n_value_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-value-head fp32 q and k, l2-normalised, q divided by sqrt(dk) (the decode path's form)."""
    q = l2norm(heads_for_values(as_real(q), n_value_heads))
    k = l2norm(heads_for_values(as_real(k), n_value_heads))
    return q / REAL(np.sqrt(q.shape[-1])), k


def recurrent_step(state: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray,
                   beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One token for all value heads: state [Hv, dk, dv] fp32; q, k [Hv, dk]; v [Hv, dv]; g, beta [Hv].
    Returns (o [Hv, dv] bf16, new state)."""
    state = state * np.exp(g, dtype=REAL)[:, None, None]
    memory = _transpose_times(state, k)  # S^T k
    delta = (as_real(v) - memory) * as_real(beta)[:, None]
    state = state + k[:, :, None] * delta[:, None, :]
    return bf16(_transpose_times(state, q)), state


def _transpose_times(state: np.ndarray, x: np.ndarray) -> np.ndarray:
    """S^T x per head, summed over k in order 0..dk-1 (fp32). An explicit order: numpy's axis
    reductions change their order with the array's shape, and a tile holding some value columns
    must get the bits of the whole."""
    products = np.ascontiguousarray((state * x[:, :, None]).transpose(1, 0, 2))  # [dk, H, dv], each rounded
    acc = np.zeros(products.shape[1:], dtype=REAL)
    for row in products:  # k in order, from zero, each step one rounding
        acc += row
    return acc


def chunked(state: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray,
            first_position: int) -> tuple[np.ndarray, np.ndarray]:
    """T tokens at once in the WY (UT-transform) form, chunks of 64 anchored at absolute position 0.
    q, k [T, Hv, dk] prepared; v [T, Hv, dv]; g, beta [T, Hv]. Returns (o [T, Hv, dv] bf16, state).
    Each value head is computed on its own, so that a tile of one head (the prompt program's GDN_CHUNK)
    gets the bits of the whole."""
    heads = [_chunked_head(state[j:j + 1], q[:, j:j + 1], k[:, j:j + 1], v[:, j:j + 1], g[:, j:j + 1],
                           beta[:, j:j + 1], first_position) for j in range(state.shape[0])]
    return (np.concatenate([o for o, _ in heads], axis=1),
            np.concatenate([s for _, s in heads], axis=0).astype(REAL))


def _chunked_head(state, q, k, v, g, beta, first_position):
    T = q.shape[0]
    outputs = []
    start = 0
    while start < T:
        end = min(T, start + CHUNK - (first_position + start) % CHUNK)
        o, state = _chunk(state, q[start:end], k[start:end], as_real(v[start:end]), g[start:end],
                          as_real(beta[start:end]))
        outputs.append(o)
        start = end
    return bf16(np.concatenate(outputs, axis=0)), state


def _chunk(state, q, k, v, g, beta):
    """One chunk (length <= 64), per value head, fp32. docs/SPEC-qwen35.md 3.4 'Chunked form'."""
    q, k, v = (np.swapaxes(x, 0, 1) for x in (q, k, v))  # [Hv, C, d]
    g, beta = g.T, beta.T  # [Hv, C]
    G = np.cumsum(g, axis=1, dtype=REAL)
    C = G.shape[1]
    lower = np.tril(np.ones((C, C), dtype=bool))
    D = np.where(lower, np.exp(np.where(lower, G[:, :, None] - G[:, None, :], REAL(0)), dtype=REAL), REAL(0))
    k_beta = k * beta[:, :, None]
    A = (k_beta @ np.swapaxes(k, 1, 2)) * D
    M = np.eye(C, dtype=REAL) + np.tril(A, -1)
    U = np.linalg.solve(M, v * beta[:, :, None]).astype(REAL)
    W = np.linalg.solve(M, k_beta * np.exp(G, dtype=REAL)[:, :, None]).astype(REAL)
    v_new = U - W @ state
    qd = q * np.exp(G, dtype=REAL)[:, :, None]
    o = qd @ state + ((q @ np.swapaxes(k, 1, 2)) * D) @ v_new
    g_last = G[:, -1]
    k_decayed = k * np.exp(g_last[:, None] - G, dtype=REAL)[:, :, None]
    state = state * np.exp(g_last, dtype=REAL)[:, None, None] + np.swapaxes(k_decayed, 1, 2) @ v_new
    return np.swapaxes(o, 0, 1), state.astype(REAL)


def split_qkv(x: np.ndarray, key_dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous [q | k | v] along the last axis."""
    return x[..., :key_dim], x[..., key_dim:2 * key_dim], x[..., 2 * key_dim:]
