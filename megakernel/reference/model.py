"""The NumPy reference model of Qwen3.5: decode over M rows, chunked GDN prompt path, MTP draft head.

`ReferenceModel.forward(session, tokens)` runs M rows layer by layer (as the GPU's verify pass will),
and is exactly M sequential one-token steps: every op computes each row with the same code, the
GDN recurrence and the conv ring walk the rows in order, and row m attends to the cache up to its
own position. Its `form` picks how the rows are computed (FORMS): "sequential" as above; "chunked" the
GDN core in the WY form over the rows; "prompt" the prompt path's arithmetic (issue 21, NUMERICS.md
"The prompt path"): chunked GDN, and in engine mode every linear in one k-slice and attention statistics
over fixed key tiles.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..model import plan
from ..model.config import ModelConfig
from ..errors import InputError
from ..model.sampling import greedy
from ..model.tensors import EMBED, FINAL_NORM, LM_HEAD, MTP_PREFIX, layer_prefix, mtp_layer_prefix, scale_name
from ..model.weights import WeightSet
from . import gdn, ops
from .numerics import REAL, Mode, arithmetic, as_real, bf16


@dataclass
class KVCache:
    keys: np.ndarray  # [capacity, kv_heads, head_dim], bf16 values (post-norm, post-RoPE)
    values: np.ndarray

    @classmethod
    def empty(cls, capacity: int, c: ModelConfig) -> KVCache:
        shape = (capacity, c.num_key_value_heads, c.head_dim)
        return cls(np.zeros(shape, REAL), np.zeros(shape, REAL))


@dataclass
class Session:
    """Everything a sequence carries between steps."""

    capacity: int
    position: int = 0
    kv: dict[int, KVCache] = field(default_factory=dict)  # attention layer index -> cache
    ssm: dict[int, np.ndarray] = field(default_factory=dict)  # GDN layer -> [Hv, dk, dv] fp32
    conv: dict[int, np.ndarray] = field(default_factory=dict)  # GDN layer -> [K-1, conv_dim] raw bf16
    mtp_kv: KVCache | None = None


@dataclass
class StepOutput:
    logits: np.ndarray  # [M, vocab] fp32 (bf16 values in ORACLE mode)
    hidden: np.ndarray  # [M, hidden] post-final-norm hidden (what lm_head and the MTP head read)


SEQUENTIAL, CHUNKED, PROMPT = FORMS = ("sequential", "chunked", "prompt")


def _linear_sum(form: str) -> dict:
    """How every linear in `form` sums: the prompt GEMM's k-slices and fused promotion (D74), else each
    layer's own slices (plan.py) and decode's promotion."""
    return {"slices": plan.PROMPT_SLICES, "fused": True} if form == PROMPT else {}


class _AttentionLayer:
    def __init__(self, w: WeightSet, p: str, c: ModelConfig, mode: Mode):
        self.c, self.engine = c, mode == Mode.ENGINE
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            _linear(w, p + f"self_attn.{n}_proj.weight", mode) for n in "qkvo")
        self.q_norm, self.k_norm = w[p + "self_attn.q_norm.weight"], w[p + "self_attn.k_norm.weight"]

    def _attend(self, form: str):
        if not self.engine:
            return ops.attend
        return ops.attend_tiled if form == PROMPT else ops.attend_partitioned

    def __call__(self, h: np.ndarray, positions: np.ndarray, cache: KVCache, rope_theta: float,
                 form: str = SEQUENTIAL) -> np.ndarray:
        c, sums = self.c, _linear_sum(form)
        q, gate = ops.split_query_gate(self.q_proj(h, **sums), c.num_attention_heads, c.head_dim)
        q = ops.rms_norm_1p(q, self.q_norm, c.rms_norm_eps)
        k = ops.rms_norm_1p(self.k_proj(h, **sums).reshape(-1, c.num_key_value_heads, c.head_dim), self.k_norm,
                            c.rms_norm_eps)
        v = self.v_proj(h, **sums).reshape(-1, c.num_key_value_heads, c.head_dim)
        cos, sin = ops.rope_tables(positions, c.rotary_dim, rope_theta)
        q, k = ops.apply_rope(q, cos, sin), ops.apply_rope(k, cos, sin)
        cache.keys[positions], cache.values[positions] = k, v
        scale, attend = c.head_dim ** -0.5, self._attend(form)
        o = np.stack([attend(q[m], cache.keys[:p + 1], cache.values[:p + 1], scale)
                      for m, p in enumerate(positions)])
        return self.o_proj(ops.output_gate(o.reshape(len(positions), -1), gate), **sums)


class _GDNLayer:
    def __init__(self, w: WeightSet, p: str, c: ModelConfig, mode: Mode):
        self.c = c
        p += "linear_attn."
        self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a, self.out_proj = (
            _linear(w, p + f"{n}.weight", mode) for n in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a",
                                                          "out_proj"))
        self.conv_weight, self.a_log, self.dt_bias = w[p + "conv1d.weight"], w[p + "A_log"], w[p + "dt_bias"]
        self.norm_weight = w[p + "norm.weight"]

    def __call__(self, h: np.ndarray, first_position: int, ssm: np.ndarray, conv: np.ndarray,
                 form: str = SEQUENTIAL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c, sums = self.c, _linear_sum(form)
        rows = h.shape[0]
        mixed = self.in_proj_qkv(h, **sums)
        z = self.in_proj_z(h, **sums).reshape(rows, c.linear_num_value_heads, c.linear_value_head_dim)
        beta, g = gdn.gates(self.in_proj_b(h, **sums), self.in_proj_a(h, **sums), self.a_log, self.dt_bias)
        convolved = np.empty_like(mixed)
        for m in range(rows):
            convolved[m], conv = gdn.conv_step(mixed[m], conv, self.conv_weight)
        q, k, v = gdn.split_qkv(convolved, c.gdn_key_dim)
        shape = (rows, -1, c.linear_key_head_dim)
        q, k = gdn.prepare_qk(q.reshape(shape), k.reshape(shape), c.linear_num_value_heads)
        v = v.reshape(rows, c.linear_num_value_heads, c.linear_value_head_dim)
        if form in (CHUNKED, PROMPT):
            o, ssm = gdn.chunked(ssm, q, k, v, g, beta, first_position)
        else:
            o = np.empty_like(v)
            for m in range(rows):
                o[m], ssm = gdn.recurrent_step(ssm, q[m], k[m], v[m], g[m], beta[m])
        out = ops.gated_rms_norm(o, z, self.norm_weight, c.rms_norm_eps)
        return self.out_proj(out.reshape(rows, -1), **sums), ssm, conv


class _MLP:
    def __init__(self, w: WeightSet, p: str, mode: Mode):
        self.gate, self.up, self.down = (_linear(w, p + f"mlp.{n}_proj.weight", mode) for n in ("gate", "up", "down"))

    def __call__(self, h: np.ndarray, form: str = SEQUENTIAL) -> np.ndarray:
        sums = _linear_sum(form)
        return self.down(ops.swiglu(self.gate(h, **sums), self.up(h, **sums)), **sums)


def _linear(w: WeightSet, name: str, mode: Mode) -> ops.Linear:
    scale = w[scale_name(name)] if scale_name(name) in w else None
    return ops.Linear(w[name], scale, mode, plan.slices_by_weight(w.config)[name])


Layer = tuple  # (input norm weight, mixer, post-attention norm weight, MLP): one decoder layer


def build_layer(w: WeightSet, i: int, mode: Mode) -> Layer:
    """Decoder layer i for `mode`, from the weights it reads alone (w may hold only those: a 27B layer at a
    time, experiments/exact_distance.py)."""
    c, p = w.config, layer_prefix(i)
    mixer = _AttentionLayer(w, p, c, mode) if i in c.attention_layers else _GDNLayer(w, p, c, mode)
    return w[p + "input_layernorm.weight"], mixer, w[p + "post_attention_layernorm.weight"], _MLP(w, p, mode)


def layer_step(layer: Layer, i: int, x: np.ndarray, positions: np.ndarray, session: Session, c: ModelConfig,
               rope_theta: float, form: str = SEQUENTIAL) -> np.ndarray:
    """The residual rows x at `positions` through decoder layer i, reading and updating the layer's cache or
    state in `session` (whose position is positions[0]); in the caller's arithmetic and `form` (FORMS)."""
    norm_in, mixer, norm_post, mlp = layer
    h = ops.rms_norm_1p(x, norm_in, c.rms_norm_eps)
    if isinstance(mixer, _AttentionLayer):
        h = mixer(h, positions, session.kv[i], rope_theta, form)
    else:
        h, session.ssm[i], session.conv[i] = mixer(h, int(positions[0]), session.ssm[i], session.conv[i], form)
    x = bf16(x + h)
    return bf16(x + mlp(ops.rms_norm_1p(x, norm_post, c.rms_norm_eps), form))


def head_logits(lm_head: ops.Linear, hidden: np.ndarray, mode: Mode) -> np.ndarray:
    """The head's logits of the post-final-norm rows, in the caller's arithmetic: ORACLE rounds them to bf16;
    ENGINE keeps the fp32 accumulators (the GPU head takes its argmax before any rounding), EXACT float64."""
    acc = lm_head.accumulate(hidden)
    return bf16(acc) if mode == Mode.ORACLE else acc


def empty_session(c: ModelConfig, capacity: int, mtp: bool = False) -> Session:
    """A session at position 0 with zeroed caches and states, in the caller's arithmetic."""
    s = Session(capacity)
    for i in c.attention_layers:
        s.kv[i] = KVCache.empty(capacity, c)
    for i in c.gdn_layers:
        s.ssm[i] = np.zeros((c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim), REAL)
        s.conv[i] = np.zeros((c.linear_conv_kernel_dim - 1, c.gdn_conv_dim), REAL)
    if mtp:
        s.mtp_kv = KVCache.empty(capacity, c)
    return s


def _in_mode(method):
    """Run a ReferenceModel method in its mode's arithmetic (numerics.arithmetic)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with arithmetic(self.mode):
            return method(self, *args, **kwargs)
    return run


class ReferenceModel:
    """Qwen3.5 in NumPy. `mode` picks the rounding points (Mode.ORACLE or Mode.ENGINE) or none at all
    (Mode.EXACT: float64, sessions included)."""

    def __init__(self, weights: WeightSet, mode: Mode | str = Mode.ORACLE):
        self.config = c = weights.config
        self.mode = Mode(mode)
        self.rope_theta = c.rope_theta
        self.embed = weights[EMBED]
        self.layers = [build_layer(weights, i, self.mode) for i in range(c.num_hidden_layers)]
        self.final_norm = weights[FINAL_NORM]
        self.lm_head = _linear(weights, LM_HEAD, self.mode)
        self.mtp = _MTPHead(weights, c, self.mode) if c.mtp_num_hidden_layers else None

    @_in_mode
    def new_session(self, capacity: int = 4096) -> Session:
        return empty_session(self.config, capacity, self.mtp is not None)

    @_in_mode
    def forward(self, session: Session, tokens, form: str = SEQUENTIAL, last_logits_only: bool = False,
                layers_out: list | None = None) -> StepOutput:
        """Process len(tokens) rows at positions session.position..; advances the session. form: FORMS (the
        head is the decode head's in every form). last_logits_only:
        the head runs on the last row alone (a prompt needs no more; each row's logits are its own, so that
        row's bits are the same), logits [1, vocab]. layers_out: gets each layer's output rows (the
        residual stream after the layer, [M, hidden]), in layer order."""
        c = self.config
        if form not in FORMS:
            raise InputError(f"unknown form {form!r}: one of {', '.join(FORMS)}")
        tokens = self.check_tokens(tokens)
        positions = np.arange(session.position, session.position + len(tokens))
        if positions[-1] >= session.capacity:
            raise InputError(f"context_full: position {positions[-1]} is beyond the session capacity "
                             f"{session.capacity}")
        x = as_real(self.embed[tokens])
        for i, layer in enumerate(self.layers):
            x = layer_step(layer, i, x, positions, session, c, self.rope_theta, form)
            if layers_out is not None:
                layers_out.append(x.copy())
        session.position += len(tokens)
        hidden = ops.rms_norm_1p(x, self.final_norm, c.rms_norm_eps)
        return StepOutput(self.logits(hidden[-1:] if last_logits_only else hidden), hidden)

    @_in_mode
    def logits(self, hidden: np.ndarray) -> np.ndarray:
        return head_logits(self.lm_head, hidden, self.mode)

    def check_tokens(self, tokens) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if tokens.size == 0:
            raise InputError("no tokens to process")
        bad = tokens[(tokens < 0) | (tokens >= self.config.defined_vocab)]
        if bad.size:
            raise InputError(f"token id {int(bad[0])} is outside the vocabulary 0..{self.config.defined_vocab - 1}")
        return tokens

    @_in_mode
    def mtp_forward(self, session: Session, tokens, hidden: np.ndarray, positions, form: str = SEQUENTIAL,
                    head: bool = True) -> StepOutput | None:
        """MTP rows: row r pairs token x_{p+1} with the target's post-final-norm hidden h_p at position p
        (docs/SPEC-qwen35.md 4) and predicts x_{p+2}; writes the MTP KV cache at those positions. Returns the MTP logits
        and its post-mtp.norm hidden (fed back when chaining drafts); head=False: neither (a prefill that
        drafts nothing, as the MTP prompt program). form: FORMS, as forward's."""
        if self.mtp is None:
            raise InputError("this model has no MTP head")
        if form not in FORMS:
            raise InputError(f"unknown form {form!r}: one of {', '.join(FORMS)}")
        return self.mtp(self, session, self.check_tokens(tokens), hidden, np.asarray(positions).reshape(-1), form,
                        head)

    def mtp_prefill(self, session: Session, prompt_ids, hidden: np.ndarray, first_token: int) -> StepOutput:
        """Fill the MTP cache over every prompt position: row p pairs x_{p+1} with h_p at position p,
        x_n being the first generated token; hidden [n, H] is the target's post-final-norm hidden.
        The last row's output drafts x_{n+1}."""
        tokens = list(prompt_ids[1:]) + [first_token]
        return self.mtp_forward(session, tokens, hidden, np.arange(len(tokens)))

    def mtp_draft(self, session: Session, token: int, hidden: np.ndarray, position: int, k: int) -> list[int]:
        """k chained greedy drafts. The target produced `token` (x_{p+1}) from its hidden h_p at `position`
        p; draft i+1 feeds back draft i and the MTP's own post-mtp.norm hidden at position p + i."""
        drafts = []
        for i in range(k):
            out = self.mtp_forward(session, [token], hidden.reshape(1, -1), [position + i])
            token = greedy(out.logits[0], self.config.defined_vocab)
            drafts.append(token)
            hidden = out.hidden[0]
        return drafts


class _MTPHead:
    def __init__(self, w: WeightSet, c: ModelConfig, mode: Mode):
        self.c = c
        self.fc = _linear(w, MTP_PREFIX + "fc.weight", mode)
        self.norm_embedding = w[MTP_PREFIX + "pre_fc_norm_embedding.weight"]
        self.norm_hidden = w[MTP_PREFIX + "pre_fc_norm_hidden.weight"]
        p = mtp_layer_prefix()
        self.norm_in, self.norm_post = w[p + "input_layernorm.weight"], w[p + "post_attention_layernorm.weight"]
        self.attention = _AttentionLayer(w, p, c, mode)
        self.mlp = _MLP(w, p, mode)
        self.norm_out = w[MTP_PREFIX + "norm.weight"]

    def __call__(self, model: ReferenceModel, session: Session, tokens, hidden, positions, form: str = SEQUENTIAL,
                 head: bool = True) -> StepOutput | None:
        eps = self.c.rms_norm_eps
        e = ops.rms_norm_1p(as_real(model.embed[tokens]), self.norm_embedding, eps)
        h = ops.rms_norm_1p(as_real(hidden), self.norm_hidden, eps)
        x = self.fc(np.concatenate([e, h], axis=-1), **_linear_sum(form))  # embedding half first
        x = bf16(x + self.attention(ops.rms_norm_1p(x, self.norm_in, eps), positions, session.mtp_kv,
                                     model.rope_theta, form))
        x = bf16(x + self.mlp(ops.rms_norm_1p(x, self.norm_post, eps), form))
        if not head:
            return None
        out = ops.rms_norm_1p(x, self.norm_out, eps)
        return StepOutput(model.logits(out), out)
