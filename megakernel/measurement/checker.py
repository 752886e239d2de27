"""Calibrated checker: judge a candidate against the oracle's token-by-token (decode) path, with the
tolerance envelope taken from the oracle's own disagreement between its two paths (one prefill forward
vs token by token, experiments/record_goldens.py).

Every metric is computed the same way for "oracle prefill vs oracle decode" (the envelope) and for
"candidate vs oracle decode" (the score). A bound is MARGIN x the oracle's own figure, fixed before
any candidate was scored: two implementations of the same rounding points differ by accumulation
order in every matrix product and by ulps in elementwise functions, which is exactly the oracle's
prefill-vs-decode situation; the margin allows for a second such noise source, not for a different
computation.

Top-1 agreement is judged on decisive positions: those where the oracle's top-1 logit leads the
runner-up by more than the per-position bound. There the candidate must agree at least as often as
the oracle's own two paths (which agree everywhere in practice). At near-tied positions a top-1
flip is a coin toss for any implementation of these rounding points (a random-weight model has many
of them), so the raw agreement is reported but not judged.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from unittest import mock

import ml_dtypes
import numpy as np

from ..reference import ReferenceModel, gdn, ops
from ..model.synthetic import parse_synthetic, synthetic_weights
from ..model.weights import WeightSet

MARGIN = 2.0
PERCENTILE = 95


def _from_bits(x: np.ndarray) -> np.ndarray:
    return x.view(ml_dtypes.bfloat16).astype(np.float32)


def _argmax_lowest_id(ids: np.ndarray, vals: np.ndarray, defined_vocab: int) -> np.ndarray:
    """Per row: the lowest id among the largest defined-id values of a top-k list."""
    vals = np.where(ids < defined_vocab, vals, -np.inf)
    best = vals.max(axis=1, keepdims=True)
    return np.where(vals == best, ids, np.iinfo(np.int32).max).min(axis=1)


def _top_gap(ids: np.ndarray, vals: np.ndarray, defined_vocab: int) -> np.ndarray:
    """Per row: the lead of the best defined-id value over the second best."""
    vals = np.sort(np.where(ids < defined_vocab, vals, -np.inf), axis=1)
    return vals[:, -1] - vals[:, -2]


@dataclass
class View:
    """What the checker reads of one prompt from one source (oracle path or candidate)."""

    at_decode_ids: np.ndarray  # [T, 32] logits at the oracle decode path's top-32 ids
    argmax: np.ndarray  # [T]
    full: np.ndarray | None  # [positions, V] logits at the full-logit positions (prompt 0)
    conv: np.ndarray | None  # [n_gdn, K-1, conv_dim]
    ssm_sketch: np.ndarray | None  # [n_gdn, Hv, dk, probes]
    keys: np.ndarray | None  # [n_attn, T, kv_heads, head_dim]
    values: np.ndarray | None


class Goldens:
    """An oracle_*.npz written by experiments/record_goldens.py, recorded on the synthetic checkpoint its
    meta names (config, seed, power-of-two scales or not)."""

    def __init__(self, path: str):
        self.data = dict(np.load(path, allow_pickle=False))
        self.meta = json.loads(str(self.data["meta"]))
        self.config, self.seed = parse_synthetic(self.meta["model"])
        self.pow2_scales = bool(self.meta.get("pow2_scales", False))
        self.defined_vocab = self.config.defined_vocab
        self.prompts = [self.data[f"p{n}_ids"].tolist() for n in range(self.meta["prompts"])]
        self.probes = self.data["probes"].astype(np.float64)

    def weights(self) -> WeightSet:
        """The checkpoint the goldens were recorded on."""
        return synthetic_weights(self.config, self.seed, pow2_scales=self.pow2_scales)

    def get(self, key: str) -> np.ndarray | None:
        return self.data.get(key)

    def decode_top(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return self.data[f"p{n}_decode_top_ids"], self.data[f"p{n}_decode_top_vals"]

    def decode_gap(self, n: int) -> np.ndarray:
        return _top_gap(*self.decode_top(n), self.defined_vocab)

    def full_positions(self, n: int) -> np.ndarray | None:
        return self.get(f"p{n}_full_positions")

    def view(self, n: int, path: str) -> View:
        p = f"p{n}_{path}"
        ids, vals = self.data[f"{p}_top_ids"], self.data[f"{p}_top_vals"]
        at = vals if path == "decode" else self.data[f"p{n}_prefill_at_decode_ids"]
        bits = {k: self.get(f"{p}_{k}") for k in ("full_logits", "conv", "keys", "values")}
        return View(at, _argmax_lowest_id(ids, vals, self.defined_vocab),
                    None if bits["full_logits"] is None else _from_bits(bits["full_logits"]),
                    None if bits["conv"] is None else _from_bits(bits["conv"]),
                    self.get(f"{p}_ssm_sketch"),
                    None if bits["keys"] is None else _from_bits(bits["keys"]),
                    None if bits["values"] is None else _from_bits(bits["values"]))


@dataclass
class Observation:
    """A candidate's teacher-forced run over one prompt."""

    logits: np.ndarray  # [T, V]
    conv: np.ndarray | None  # [n_gdn, K-1, conv_dim]; None: states not observed (goldens without them)
    ssm: np.ndarray | None  # [n_gdn, Hv, dk, dv] fp32
    keys: np.ndarray | None  # [n_attn, T, kv_heads, head_dim]
    values: np.ndarray | None

    def view(self, goldens: Goldens, n: int) -> View:
        ids, _ = goldens.decode_top(n)
        defined = self.logits[:, :goldens.defined_vocab]
        positions = goldens.full_positions(n)
        has_kv = goldens.get(f"p{n}_decode_keys") is not None
        return View(np.take_along_axis(self.logits, ids.astype(np.int64), axis=1),
                    defined.argmax(axis=1),  # first occurrence: the lowest id on ties
                    None if positions is None else self.logits[positions],
                    self.conv, None if self.ssm is None else self.ssm.astype(np.float64) @ goldens.probes,
                    self.keys if has_kv else None, self.values if has_kv else None)


def observe(model: ReferenceModel, ids: list[int], form: str = "sequential") -> Observation:
    """Teacher-force the reference over a prompt in one call, in `form` (model.FORMS; sequential: exact with
    decode)."""
    session = model.new_session(len(ids))
    logits = model.forward(session, ids, form).logits
    c = model.config
    T = len(ids)
    return Observation(
        logits,
        np.stack([session.conv[i] for i in c.gdn_layers]),
        np.stack([session.ssm[i] for i in c.gdn_layers]),
        np.stack([session.kv[i].keys[:T] for i in c.attention_layers]),
        np.stack([session.kv[i].values[:T] for i in c.attention_layers]))


def _errors(x: View, d: View, gap: np.ndarray) -> dict[str, np.ndarray | float]:
    """Disagreement of view x with the oracle decode view d for one prompt; gap = d's top-1 lead."""
    out: dict[str, np.ndarray | float] = {
        "logit_error": np.abs(x.at_decode_ids - d.at_decode_ids).max(axis=1),
        "top1_agree": (x.argmax == d.argmax).astype(np.float64),
        "top1_gap": gap,
    }
    if d.full is not None and x.full is not None:
        out["full_logit_error"] = float(np.abs(x.full - d.full).max())
    if d.conv is not None and x.conv is not None:
        out["conv_state_error"] = float(np.abs(x.conv - d.conv).max())
    if d.ssm_sketch is not None and x.ssm_sketch is not None:
        diff = np.linalg.norm((x.ssm_sketch - d.ssm_sketch).reshape(len(d.ssm_sketch), -1), axis=1)
        out["ssm_state_rel_error"] = float((diff / np.linalg.norm(d.ssm_sketch.reshape(len(diff), -1), axis=1)).max())
    if d.keys is not None and x.keys is not None:
        out["kv_cache_error"] = float(max(np.abs(x.keys - d.keys).max(), np.abs(x.values - d.values).max()))
    return out


def _summary(per_prompt: list[dict], decisive_gap: float) -> dict[str, float]:
    logit = np.concatenate([e["logit_error"] for e in per_prompt])
    agree = np.concatenate([e["top1_agree"] for e in per_prompt])
    decisive = np.concatenate([e["top1_gap"] for e in per_prompt]) > decisive_gap
    s = {
        "logit_error_max": float(logit.max()),
        f"logit_error_p{PERCENTILE}": float(np.percentile(logit, PERCENTILE)),
        "logit_error_mean": float(logit.mean()),
        "top1_agreement_decisive": float(agree[decisive].mean()),
        "decisive_positions": float(decisive.mean()),
        "top1_agreement_raw": float(agree.mean()),
    }
    for key in ("full_logit_error", "conv_state_error", "ssm_state_rel_error", "kv_cache_error"):
        values = [e[key] for e in per_prompt if key in e]
        if values:
            s[key] = float(max(values))
    return s


def envelope(goldens: Goldens) -> dict[str, float]:
    """The oracle's own prefill-vs-decode disagreement over all prompts."""
    errors = [_errors(goldens.view(n, "prefill"), goldens.view(n, "decode"), goldens.decode_gap(n))
              for n in range(len(goldens.prompts))]
    own_max = float(np.concatenate([e["logit_error"] for e in errors]).max())
    return _summary(errors, decisive_gap=MARGIN * own_max)


INFORMATIONAL = {"decisive_positions", "top1_agreement_raw"}  # reported, not judged


@dataclass
class Report:
    oracle: dict[str, float]  # the envelope's raw figures
    candidate: dict[str, float]
    checks: list[dict]

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def table(self) -> str:
        rows = [f"{'metric':<26}{'oracle own':>12}{'bound':>12}{'candidate':>12}  verdict"]
        for c in self.checks:
            rows.append(f"{c['name']:<26}{self.oracle[c['name']]:>12.4g}{c['bound']:>12.4g}{c['value']:>12.4g}  "
                        f"{'ok' if c['passed'] else 'FAIL'}")
        for name in sorted(INFORMATIONAL):
            rows.append(f"{name:<26}{self.oracle[name]:>12.4g}{'(info)':>12}{self.candidate[name]:>12.4g}")
        return "\n".join(rows)


def check(goldens: Goldens, observations: dict[int, Observation]) -> Report:
    """Score candidate observations (prompt index -> Observation) against the envelope of all prompts."""
    oracle = envelope(goldens)
    candidate = _summary([_errors(o.view(goldens, n), goldens.view(n, "decode"), goldens.decode_gap(n))
                          for n, o in observations.items()], decisive_gap=MARGIN * oracle["logit_error_max"])
    return Report(oracle, candidate, _judge(candidate, oracle, lambda name: MARGIN * oracle[name]))


def _judge(candidate: dict[str, float], oracle: dict[str, float], error_bound) -> list[dict]:
    """One check per judged metric: decisive top-1 agreement at least the oracle's, every error at most
    error_bound(name)."""
    checks = []
    for name, value in candidate.items():
        if name in INFORMATIONAL:
            continue
        if name == "top1_agreement_decisive":
            bound, passed = oracle[name], value >= oracle[name]
        else:
            bound = error_bound(name)
            passed = value <= bound
        checks.append({"name": name, "value": value, "bound": bound, "passed": bool(passed)})
    return checks


# --- the exact verdict: distance from exact arithmetic, bounded by the oracle's own ----------------------
# On checkpoints with arbitrary block scales the engine and the oracle round at different points (the
# engine scales an fp32 partial, the oracle rounds bf16(fp8 x scale) into its weights), so the envelope
# above, made of the oracle's own noise, cannot tell which of the two is wrong. Measured against the
# reference in Mode.EXACT (float64, nothing rounded) instead, a candidate passes where it is no further
# from exact than the HF oracle itself, up to the oracle's own noise: the oracle's two paths (one prefill
# forward, token by token) are both the oracle and their distances from exact differ by up to their
# disagreement (the envelope), so the bound is the decode path's distance plus the envelope (docs/NUMERICS.md
# "Exact reference"). A reimplementation of the oracle's rounding points lands within it.
def _exact_gap(exact: Observation, defined_vocab: int) -> np.ndarray:
    """Per position: the exact top-1 logit's lead over the runner-up (defined ids)."""
    top2 = np.sort(np.asarray(exact.logits[:, :defined_vocab], np.float64), axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def oracle_from_exact(goldens: Goldens, exact: dict[int, Observation]) -> dict[str, float]:
    """The HF oracle's decode path against the exact run, over the prompts of `exact`."""
    errors = [_errors(goldens.view(n, "decode"), e.view(goldens, n), _exact_gap(e, goldens.defined_vocab))
              for n, e in exact.items()]
    own_max = float(np.concatenate([e["logit_error"] for e in errors]).max())
    return _summary(errors, decisive_gap=own_max)


def check_exact(goldens: Goldens, observations: dict[int, Observation], exact: dict[int, Observation]) -> Report:
    """Score candidate observations against the exact run (Mode.EXACT, the same prompts): every error at
    most the HF oracle's own distance from exact plus its envelope, and top-1 agreement with exact, on
    positions where the exact lead exceeds the oracle's largest logit error, at least the oracle's."""
    oracle, noise = oracle_from_exact(goldens, exact), envelope(goldens)
    candidate = _summary([_errors(o.view(goldens, n), exact[n].view(goldens, n),
                                  _exact_gap(exact[n], goldens.defined_vocab)) for n, o in observations.items()],
                         decisive_gap=oracle["logit_error_max"])
    return Report(oracle, candidate, _judge(candidate, oracle, lambda name: oracle[name] + noise[name]))


# --- negative controls: plausible implementation mistakes the checker must reject ---------------------
def _contiguous_query_gate(qg: np.ndarray, heads: int, head_dim: int):
    """Wrong: q_proj output split into [all queries | all gates] instead of per-head [query | gate]."""
    q = qg[:, :heads * head_dim].reshape(qg.shape[0], heads, head_dim)
    return q, qg[:, heads * head_dim:]


def _modulo_head_map(x: np.ndarray, n_value_heads: int) -> np.ndarray:
    """Wrong: value head j reads key head j % Hk instead of j // (Hv / Hk)."""
    hk = x.shape[-2]
    return x[..., [j % hk for j in range(n_value_heads)], :]


@contextlib.contextmanager
def _rope_base(model: ReferenceModel, theta: float):
    saved, model.rope_theta = model.rope_theta, theta
    try:
        yield
    finally:
        model.rope_theta = saved


NEGATIVE_CONTROLS = {
    "rope_theta_1e6": lambda model: _rope_base(model, 1e6),
    "query_gate_contiguous_halves": lambda model: mock.patch.object(ops, "split_query_gate", _contiguous_query_gate),
    "value_head_j_mod_key_heads": lambda model: mock.patch.object(gdn, "heads_for_values", _modulo_head_map),
}
