"""Choosing the next token from a row of logits, and the acceptance rules for speculative decoding.

This module is the reference definition: the reference model uses it directly, and the GPU engine's
host side (or a CUDA sampler) must reproduce it. So every rule is spelled out exactly: tie-breaking,
boundaries, and the order in which uniform random numbers are consumed.

Vocabulary: a logits row has ``vocab_size`` entries, but only ids < ``defined_vocab`` are real
tokens. Padding ids (>= ``defined_vocab``) are never chosen: every function here looks only at
``logits[:defined_vocab]`` (the same as masking the padding to -inf) and gives padding probability
exactly 0.

Bad user parameters raise ``InputError``. Bad numbers from the engine (NaN logits, mismatched
shapes, a draft token its own draft distribution could not have produced) raise ``ValueError``:
they are bugs, not requests to handle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from ..errors import InputError, ModelOutputError


def _defined_row(logits: np.ndarray, defined_vocab: int) -> np.ndarray:
    """The defined part of one logits row, as float64 (exact for float32 input), checked usable."""
    logits = np.asarray(logits)
    if logits.ndim != 1:
        raise ValueError(f"logits must be a single row (1-D), got shape {logits.shape}")
    if not 0 < defined_vocab <= logits.shape[0]:
        raise ValueError(f"defined_vocab {defined_vocab} is outside 1..{logits.shape[0]} (the row length)")
    row = logits[:defined_vocab].astype(np.float64)
    top = row.max()  # NaN propagates through max, so this one reduction checks the whole row
    if np.isnan(top):
        raise ModelOutputError("the logits contain NaN")
    if not np.isfinite(top):
        raise ModelOutputError(f"the logits have maximum {top}, not a finite value")
    return row


def greedy(logits: np.ndarray, defined_vocab: int) -> int:
    """The defined id with the largest logit.

    On exact ties the LOWEST id wins: ``np.argmax`` returns the first occurrence of the maximum.
    """
    return int(np.argmax(_defined_row(logits, defined_vocab)))


def _is_int(x: object) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _is_real(x: object) -> bool:
    return isinstance(x, Real) and not isinstance(x, bool)


@dataclass(frozen=True)
class SamplingParams:
    """How to choose tokens. The defaults are greedy decoding.

    temperature: > 0 samples from softmax(logits / temperature); 0 means greedy.
    top_k: keep only ids whose logit is >= the k-th largest logit (see ``probabilities``); 0 = off.
    top_p: nucleus threshold in (0, 1]; 1 = off.
    seed: seeds the request's generator (``make_rng(params.seed)``).
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        t = self.temperature
        if not _is_real(t) or not math.isfinite(t) or t < 0:
            raise InputError(f"--temperature / temperature must be a finite number >= 0 (0 means greedy), got {t!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise InputError(f"--top-k / top_k must be an integer >= 0 (0 means off), got {self.top_k!r}")
        # Written so that NaN fails: every comparison with NaN is false.
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise InputError(f"--top-p / top_p must be a number in (0, 1] (1 means off), got {self.top_p!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise InputError(f"--seed / seed must be an integer >= 0, got {self.seed!r}")


def _top_k_survivors(row: np.ndarray, top_k: int) -> np.ndarray:
    """Mask of ids whose value is >= the k-th largest value (duplicates counted), so every id tied
    with the k-th value survives and more than k ids may."""
    if top_k == 0 or top_k >= row.size:
        return np.ones(row.size, dtype=bool)
    kth = np.partition(row, row.size - top_k)[row.size - top_k]
    return row >= kth


def top_p_filter(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Nucleus filtering of a probability vector, renormalised (float64). ``top_p == 1`` is a no-op.

    Rule (for ``top_p < 1``):
      1. Order the ids with positive probability by (probability ascending, id descending): among
         equal probabilities the HIGHER id comes first, i.e. is cut first.
      2. c_j = float64 running sum of the probabilities in that order, up to and including the j-th.
      3. Remove every id with c_j < 1 - top_p (STRICTLY below). Running sums never decrease, so
         this removes a prefix: the least likely ids whose total mass stays below 1 - top_p. What
         remains is the smallest most-likely set with mass strictly greater than top_p
         (exactly at the boundary, the id that brings the cut mass to 1 - top_p is kept).
      4. The last id in the order always survives, even if rounding left c_last below 1 - top_p:
         the most probable id, the lowest one among exact ties. So as top_p -> 0 this is greedy.
      5. Divide the survivors by their float64 sum.
    Ids with probability 0 (e.g. cut by top-k) stay 0. Ties are on the float64 probability values.
    An implementation that sums in another order can only differ when some c_j lies within
    rounding of 1 - top_p.
    """
    if top_p >= 1:
        return probs
    ids = np.flatnonzero(probs)
    order = ids[np.lexsort((-ids, probs[ids]))]  # last key is the primary one
    cut = np.cumsum(probs[order]) < 1.0 - top_p
    cut[-1] = False
    kept = probs.copy()
    kept[order[cut]] = 0.0
    return kept / kept.sum()


def probabilities(logits: np.ndarray, params: SamplingParams, defined_vocab: int) -> np.ndarray:
    """The distribution ``sample`` draws from, float64 over the whole row (padding exactly 0).

    With l = logits[:defined_vocab] as float64 and T = params.temperature:
      - T == 0: one-hot at ``greedy(logits, defined_vocab)``.
      - top-k (k = params.top_k, 0 < k < defined_vocab): survivors are the ids with
        l_i >= the k-th largest of l (ties with it all survive). Otherwise all ids survive.
        Temperature does not change the order, so this is the same on l or l / T.
      - softmax over survivors: w_i = exp((l_i - max l) / T), 0 for non-survivors; p = w / sum(w).
        (l_i - max l) / T equals z_i - max z for z = l / T, but is <= 0, so for tiny T it can
        only overflow to -inf (weight 0), never make inf - inf; the maximum always survives
        top-k, so sum(w) >= 1.
      - top-p: ``top_p_filter(p, params.top_p)`` (rule in its docstring), renormalised.
    """
    out = np.zeros(np.asarray(logits).shape[0], dtype=np.float64)
    if params.temperature == 0:
        out[greedy(logits, defined_vocab)] = 1.0
        return out
    row = _defined_row(logits, defined_vocab)
    keep = _top_k_survivors(row, params.top_k)
    with np.errstate(over="ignore"):  # overflow to -inf is the right limit: its weight is 0
        z = (row - row.max()) / params.temperature
    w = np.where(keep, np.exp(z), 0.0)
    out[:defined_vocab] = top_p_filter(w / w.sum(), params.top_p)
    return out


def inverse_cdf(probs: np.ndarray, u: float) -> int:
    """The id drawn from ``probs`` by one uniform ``u`` in [0, 1).

    Walk ids in ASCENDING id order with a float64 running sum c_i (including id i); return the first
    id with u < c_i. Ids with probability 0 can never be returned. If rounding left the total below
    u, return the highest id with positive probability.
    """
    if not 0 <= u < 1:
        raise ValueError(f"u must be in [0, 1), got {u}")
    cdf = np.cumsum(probs)
    i = int(np.searchsorted(cdf, u, side="right"))  # first index with cdf > u
    if i == cdf.size:
        i = int(np.flatnonzero(probs)[-1])
    return i


def make_rng(seed: int) -> np.random.Generator:
    """The per-request generator: create once from ``params.seed``, pass to every ``sample`` call."""
    return np.random.default_rng(seed)


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator, defined_vocab: int) -> int:
    """Choose one token.

    Temperature 0 is ``greedy`` and consumes no random number. Otherwise exactly one
    u = rng.random() is drawn and the token is ``inverse_cdf(probabilities(...), u)``; a GPU
    implementation given the same u picks the same id (up to rounding at a CDF boundary).
    """
    if params.temperature == 0:
        return greedy(logits, defined_vocab)
    return inverse_cdf(probabilities(logits, params, defined_vocab), rng.random())


# Speculative decoding (Leviathan et al. 2023; Chen et al. 2023). The target model scores k drafted
# tokens in one pass; accepting draft d with probability min(1, p[d]/q[d]) and otherwise drawing from
# normalise(max(p - q, 0)) emits tokens distributed exactly as the target p would.


def accept_draft(p: np.ndarray, q: np.ndarray, draft: int, u: float) -> bool:
    """Whether to keep drafted id ``draft``: true iff u < p[draft] / q[draft].

    p is the target distribution, q the draft distribution it was sampled from (both from
    ``probabilities``), u uniform in [0, 1); so the acceptance probability is min(1, p/q).
    """
    if not q[draft] > 0:
        raise ValueError(f"draft id {draft} has draft probability {q[draft]}; it cannot have been sampled from q")
    return bool(u < p[draft] / q[draft])


def residual_distribution(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """normalise(max(p - q, 0)): what to draw from after rejecting a draft.

    If the residual has no mass (p == q), returns p: rejection then has probability 0, so this only
    matters under rounding, and p keeps the result a valid distribution.
    """
    residual = np.maximum(np.asarray(p, dtype=np.float64) - q, 0.0)
    total = residual.sum()
    if total == 0:
        return np.array(p, dtype=np.float64)
    return residual / total


def speculative_step(
    p_rows: np.ndarray, q_rows: np.ndarray, drafts: list[int], rng: np.random.Generator
) -> list[int]:
    """The tokens emitted for one verification pass of k drafted tokens (sampled decoding).

    p_rows: k + 1 target distributions; p_rows[i] is the target's distribution for the position of
    drafts[i] (the last one follows every draft). q_rows: the k draft distributions drafts were
    sampled from. Emits 1..k+1 tokens: drafts from the front while accepted; at the first rejection,
    a draw from that position's residual, then stop; if all k are accepted, a bonus draw from p_rows[k].
    Random numbers, in order: one u per draft judged (``accept_draft``), then one u for the residual
    or bonus draw (``inverse_cdf``).
    """
    k = len(drafts)
    if len(q_rows) != k or len(p_rows) != k + 1:
        raise ValueError(f"{k} drafts need {k} draft rows and {k + 1} target rows, got {len(q_rows)} and {len(p_rows)}")
    emitted: list[int] = []
    for p, q, d in zip(p_rows, q_rows, drafts):
        if not accept_draft(p, q, d, rng.random()):
            emitted.append(inverse_cdf(residual_distribution(p, q), rng.random()))
            return emitted
        emitted.append(int(d))
    emitted.append(inverse_cdf(p_rows[k], rng.random()))
    return emitted


def greedy_accept(target_argmax_rows: list[int], drafts: list[int]) -> list[int]:
    """The tokens emitted for one verification pass of k drafted tokens (greedy decoding).

    target_argmax_rows: k + 1 ids, ``greedy`` of each target row; entry i is the target's choice for
    the position of drafts[i]. Drafts are accepted from the front while they equal the target's
    choice; the first mismatch emits the target's choice and stops; if all match, the last entry is
    appended as the bonus token. Emits 1..k+1 tokens.
    """
    if len(target_argmax_rows) != len(drafts) + 1:
        raise ValueError(f"{len(drafts)} drafts need {len(drafts) + 1} target ids, got {len(target_argmax_rows)}")
    emitted: list[int] = []
    for target, d in zip(target_argmax_rows, drafts):
        emitted.append(int(target))  # equals d when accepted, the correction when not
        if d != target:
            return emitted
    emitted.append(int(target_argmax_rows[-1]))
    return emitted
