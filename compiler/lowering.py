"""Lowering: model config + rows M -> instructions of one target forward pass (a step).

    EMBED -> per GDN layer:       NORM_GEMV (in_proj qkv|z|b|a), GDN_CORE (+ gated norm),
                                  GEMV_RESIDUAL (out_proj), NORM_GATE_UP, GEMV_RESIDUAL (down)
             per attention layer: NORM_GEMV_QKV (q|k|v, norms, RoPE, KV append), ATTN_SCORES, ATTN_PV,
                                  ATTN_MERGE (+ sigmoid gate), GEMV_RESIDUAL (o_proj), NORM_GATE_UP, GEMV_RESIDUAL
          -> NORM_HEAD (final norm + lm_head) -> ARGMAX -> HANDOFF
and the MTP draft pass (lower_mtp): MTP_FC, one attention layer, MLP, NORM_HEAD (mtp.norm), ARGMAX,
HANDOFF = 11 words.

Five words per GDN layer and seven per attention layer: 48 x 5 + 16 x 7 + 4 = 356 for the 27B.
Activations are named in SSA form (x0, x1, ... for the residual stream); the allocator maps them onto
reused arena space. Per-session state (KV caches, GDN states, conv rings) are STATE buffers. Ops that
need the position or the tokens read the control block (buffer 0) implicitly.
"""

from __future__ import annotations

import functools

from isa import DType, Flag, Kind, Op
from isa.opcodes import CTRL_WORDS, MAX_ROWS, MTP_LAYER, PROMPT_MAX_ROWS
from isa.operand_layout import SLAB_BYTES
from megakernel.model import plan
from megakernel.model.config import ModelConfig
from megakernel.model.draft_vocab import draft_rows
from megakernel.model.tensors import (
    EMBED,
    FINAL_NORM,
    LM_HEAD,
    MTP_PREFIX,
    layer_prefix,
    mtp_layer_prefix,
    tensor_specs,
)

from .ir import BufferDecl, Instr, Lowered

# conv (and gate) ring rows: >= (kernel - 1) + 2 MAX_ROWS, a power of two for cheap modulo. A pass reads
# the kernel - 1 rows before its first pending row (up to MAX_ROWS rows of a speculative pass, re-folded)
# and writes its own MAX_ROWS rows, all distinct.
CONV_RING = 32
EMBED_TILE_COLS = 1024  # columns of the residual one EMBED tile writes


def lower(c: ModelConfig, rows: int, capacity: int, debug_logits: bool = False) -> Lowered:
    """The target forward over `rows` tokens: embedding to chosen tokens."""
    b = _Builder(c, rows, capacity)
    x = b.residual()
    b.emit(Instr(Op.EMBED, "embed", -1, n=c.hidden_size, bufs={"in": "ctrl", "out": x},
                 params={"embed_weight": EMBED}))
    x = b.decoder_layers(x)
    b.head(x, FINAL_NORM, "hidden", debug_logits)
    return Lowered(b.instrs, b.buffers, rows, capacity)


def lower_mtp(c: ModelConfig, rows: int, capacity: int, chained: bool = False,
              debug_logits: bool = False, working_vocab: bool = False) -> Lowered:
    """One MTP draft pass over `rows` rows at the MTP lane's position (docs/SPEC-qwen35.md 4): row r pairs the MTP
    lane's token r with hidden row r, the target's post-final-norm `hidden` (first draft, prompt rows)
    or, chained, the MTP's own post-mtp.norm `mtp_hidden` of the previous draft. working_vocab: the head
    reads the session's working-vocabulary rows (megakernel/model/draft_vocab.py) instead of the lm_head."""
    if not c.mtp_num_hidden_layers:
        raise ValueError(f"config {c.name!r} has no MTP layer")
    b = _Builder(c, rows, capacity, MTP_LAYER)
    x = b.residual()
    b.emit(Instr(Op.MTP_FC, "mtp.fc", MTP_LAYER, n=c.hidden_size, k=2 * c.hidden_size,
                 weights=[MTP_PREFIX + "fc.weight"], bufs={"in": "mtp_hidden" if chained else "hidden", "out": x},
                 params={"embed_weight": EMBED, "norm_embedding": MTP_PREFIX + "pre_fc_norm_embedding.weight",
                         "norm_hidden": MTP_PREFIX + "pre_fc_norm_hidden.weight", "eps": c.rms_norm_eps}))
    x = b.attention_layer(MTP_LAYER, x)
    x = b.mlp(MTP_LAYER, x)
    b.head(x, MTP_PREFIX + "norm.weight", "mtp_hidden", debug_logits, working_vocab)
    return Lowered(b.instrs, b.buffers, rows, capacity)


def lower_prompt(c: ModelConfig, rows: int, capacity: int) -> Lowered:
    """One chunk of a prompt through every decoder layer in the prompt path's arithmetic (the reference's
    form="prompt", docs/NUMERICS.md "The prompt path"): up to `rows` rows, the chunk's own rows r in the
    control block (CTRL_ROWS), its tokens in prompt_tokens, at the control block's position; the KV caches,
    GDN states and conv rings are left as decode reads them, and the position advanced by r. No head: the
    prompt's last token goes through a decode pass, which chooses the first token.

        PROMPT_EMBED -> per GDN layer:       NORM_PREPARE, GEMM (in_proj qkv|z|b|a), PROMPT_CONV, GDN_CHUNK,
                                             GATED_PREPARE (gated norm), GEMM_RESIDUAL (out_proj),
                                             NORM_PREPARE, GEMM_GATE_UP, PREPARE, GEMM_RESIDUAL (down)
                        per attention layer: NORM_PREPARE, GEMM (q|k|v), PROMPT_QKV (norms, RoPE, cache append),
                                             ATTN_CAUSAL (+ sigmoid gate), PREPARE, GEMM_RESIDUAL (o_proj), MLP
                     -> PROMPT_NORM (final norm -> prompt_hidden, with an MTP head) -> PROMPT_ADVANCE
    """
    b = _PromptBuilder(c, rows, capacity)
    x = b.residual()
    b.emit(Instr(Op.PROMPT_EMBED, "embed", -1, n=c.hidden_size, bufs={"in": "prompt_tokens", "out": x},
                 params={"embed_weight": EMBED}))
    x = b.decoder_layers(x)
    if c.mtp_num_hidden_layers:  # the rows the MTP head's prefill reads (lower_mtp_prompt)
        b.emit(Instr(Op.PROMPT_NORM, "final_norm", -1, n=c.hidden_size, bufs={"in": x, "out": "prompt_hidden"},
                     params={"norm_weight": FINAL_NORM, "eps": c.rms_norm_eps}))
    b.emit(Instr(Op.PROMPT_ADVANCE, "advance", -1, bufs={"in": "ctrl", "out": "ctrl"}))
    return Lowered(b.instrs, b.buffers, rows, capacity)


def lower_mtp_prompt(c: ModelConfig, rows: int, capacity: int) -> Lowered:
    """The MTP head's prefill over one prompt chunk (docs/SPEC-qwen35.md 4), in the prompt path's arithmetic, on
    the MTP control lane: row i pairs prompt_tokens[i] (the host writes the tokens one position ahead: the
    token at position + i + 1) with the target's prompt_hidden row i (the prompt program's), and writes the MTP
    KV cache at position + i; no head. The prompt's last row goes through the one-row MTP pass after the
    target's last-token pass, which drafts."""
    if not c.mtp_num_hidden_layers:
        raise ValueError(f"config {c.name!r} has no MTP layer")
    b = _PromptBuilder(c, rows, capacity, MTP_LAYER)
    x = b.residual()
    fc = MTP_PREFIX + "fc.weight"
    operand = b.operand("mtp.fc", Op.MTP_PREPARE, MTP_LAYER, "prompt_hidden", 2 * c.hidden_size, [fc],
                        {"embed_weight": EMBED, "norm_embedding": MTP_PREFIX + "pre_fc_norm_embedding.weight",
                         "norm_hidden": MTP_PREFIX + "pre_fc_norm_hidden.weight", "eps": c.rms_norm_eps},
                        aux0="prompt_tokens")
    b.emit_gemm(Op.GEMM, "mtp.fc", MTP_LAYER, c.hidden_size, 2 * c.hidden_size, [fc], operand, x)
    x = b.attention_layer(MTP_LAYER, x)
    b.mlp(MTP_LAYER, x)
    b.emit(Instr(Op.PROMPT_ADVANCE, "mtp.advance", MTP_LAYER, bufs={"in": "ctrl", "out": "ctrl"}))
    return Lowered(b.instrs, b.buffers, rows, capacity)


def session_buffers(c: ModelConfig, capacity: int) -> list[BufferDecl]:
    """Everything a session keeps between passes, identical (names, sizes, order) in every Program of
    the config, so that the target, verify and MTP programs share one session arena."""
    out = [BufferDecl("ctrl", 1, CTRL_WORDS, DType.I32, Kind.CONTROL)]
    kv = c.num_key_value_heads * c.head_dim
    for i in c.attention_layers:
        out += [BufferDecl(f"L{i}.k_cache", capacity, kv, DType.BF16, Kind.STATE),
                BufferDecl(f"L{i}.v_cache", capacity, kv, DType.BF16, Kind.STATE)]
    for i in c.gdn_layers:
        out += [BufferDecl(f"L{i}.ssm", c.linear_num_value_heads, c.linear_value_head_dim * c.linear_key_head_dim,
                           DType.F32, Kind.STATE),
                BufferDecl(f"L{i}.conv_ring", CONV_RING, c.gdn_conv_dim, DType.BF16, Kind.STATE),
                # b and a of speculative rows, by position like the conv ring: what a re-fold needs beside it
                BufferDecl(f"L{i}.gate_ring", CONV_RING, 2 * c.linear_num_value_heads, DType.BF16, Kind.STATE)]
    out.append(BufferDecl("hidden", MAX_ROWS, c.hidden_size, DType.BF16, Kind.STATE))
    out.append(BufferDecl("prompt_tokens", 1, PROMPT_MAX_ROWS, DType.I32, Kind.STATE))  # a prompt chunk's (host)
    if c.mtp_num_hidden_layers:  # a prompt chunk's post-final-norm rows, which the MTP's prefill reads
        out.append(BufferDecl("prompt_hidden", PROMPT_MAX_ROWS, c.hidden_size, DType.BF16, Kind.STATE))
    if c.mtp_num_hidden_layers:
        draft = draft_rows(c)
        out += [BufferDecl("mtp.k_cache", capacity, kv, DType.BF16, Kind.STATE),
                BufferDecl("mtp.v_cache", capacity, kv, DType.BF16, Kind.STATE),
                BufferDecl("mtp_hidden", MAX_ROWS, c.hidden_size, DType.BF16, Kind.STATE),
                # the working-vocabulary draft head: lm_head rows of the ids in mtp.draft_ids (host-written)
                BufferDecl("mtp.draft_head", draft, c.hidden_size, DType.BF16, Kind.STATE),
                BufferDecl("mtp.draft_ids", 1, draft, DType.I32, Kind.STATE)]
    return out


class _Builder:
    max_rows = MAX_ROWS

    def __init__(self, c: ModelConfig, rows: int, capacity: int, layer: int | None = None):
        if not 1 <= rows <= self.max_rows:
            raise ValueError(f"rows M = {rows} outside 1..{self.max_rows}")
        if CONV_RING < c.linear_conv_kernel_dim - 1 + 2 * MAX_ROWS:
            raise ValueError("conv ring too short for the kernel, the pending rows and MAX_ROWS")
        self.c, self.m, self.capacity = c, rows, capacity
        self.layer = layer  # MTP_LAYER for the draft program: every word reads the MTP control lane
        self.instrs: list[Instr] = []
        self.buffers: dict[str, BufferDecl] = {b.name: b for b in session_buffers(c, capacity)}
        self.residuals = 0
        self.prefix = "mtp." if layer == MTP_LAYER else ""

    def buffer(self, name: str, rows: int, cols: int, dtype: DType, kind: Kind = Kind.ACTIVATION) -> str:
        self.buffers[name] = BufferDecl(name, rows, cols, dtype, kind)
        return name

    def residual(self) -> str:
        name = self.buffer(f"{self.prefix}x{self.residuals}", self.m, self.c.hidden_size, DType.BF16)
        self.residuals += 1
        return name

    def emit(self, instr: Instr) -> None:
        if self.layer is not None:
            instr.layer = self.layer
        self.instrs.append(instr)

    def decoder_layers(self, x: str) -> str:
        """Every decoder layer (its mixer, then its MLP) from the residual x; the last layer's residual."""
        for i in range(self.c.num_hidden_layers):
            x = (self.attention_layer if i in self.c.attention_layers else self.gdn_layer)(i, x)
            x = self.mlp(i, x)
        return x

    def gdn_layer(self, i: int, x: str) -> str:
        c, m, p = self.c, self.m, layer_prefix(i)
        g = p + "linear_attn."
        width = c.gdn_conv_dim + c.gdn_value_dim + 2 * c.linear_num_value_heads
        mixed = self.buffer(f"L{i}.mixed", m, width, DType.BF16)
        core = self.buffer(f"L{i}.gdn_out", m, c.gdn_value_dim, DType.BF16)
        state, ring, gates = f"L{i}.ssm", f"L{i}.conv_ring", f"L{i}.gate_ring"
        self.emit(Instr(Op.NORM_GEMV, f"L{i}.in_proj", i, n=width, k=c.hidden_size,
                        weights=[g + "in_proj_qkv.weight", g + "in_proj_z.weight", g + "in_proj_b.weight",
                                 g + "in_proj_a.weight"],
                        bufs={"in": x, "out": mixed},
                        params={"norm_weight": p + "input_layernorm.weight", "eps": c.rms_norm_eps}))
        self.emit(Instr(Op.GDN_CORE, f"L{i}.gdn_core", i, n=c.gdn_value_dim,
                        bufs={"in": mixed, "out": core, "aux0": state, "aux1": ring, "aux2": gates},
                        params={"conv_weight": g + "conv1d.weight", "a_log": g + "A_log", "dt_bias": g + "dt_bias",
                                "key_heads": c.linear_num_key_heads, "value_heads": c.linear_num_value_heads,
                                "key_dim": c.linear_key_head_dim, "value_dim": c.linear_value_head_dim,
                                "conv_kernel": c.linear_conv_kernel_dim, "ring": CONV_RING,
                                "norm_weight": g + "norm.weight", "eps": c.rms_norm_eps}))
        out = self.residual()
        self.emit(Instr(Op.GEMV_RESIDUAL, f"L{i}.out_proj", i, n=c.hidden_size, k=c.gdn_value_dim,
                        weights=[g + "out_proj.weight"], bufs={"in": core, "aux0": x, "out": out}))
        return out

    def _names(self, i: int) -> tuple[str, str]:
        """(weight prefix, buffer prefix) of layer i, or of the MTP layer."""
        return (mtp_layer_prefix(), "mtp.") if i == MTP_LAYER else (layer_prefix(i), f"L{i}.")

    def attention_layer(self, i: int, x: str) -> str:
        c, m = self.c, self.m
        p, L = self._names(i)
        a = p + "self_attn."
        heads, kv_heads, hd, parts = c.num_attention_heads, c.num_key_value_heads, c.head_dim, plan.ATTENTION_PARTITIONS
        q = self.buffer(f"{L}q", m, heads * hd, DType.BF16)
        gate = self.buffer(f"{L}gate", m, heads * hd, DType.BF16)
        keys, values = f"{L}k_cache", f"{L}v_cache"
        # a scores row padded to whole 16-byte pieces: ATTN_PV stages 8-key pieces of it (attention.cuh KvStream)
        scores = self.buffer(f"{L}scores", heads * m, -(-self.capacity // 8) * 8, DType.BF16)
        stats = self.buffer(f"{L}softmax_stats", heads * m, 2 * parts, DType.F32)
        partial = self.buffer(f"{L}attn_partial", heads * m, parts * hd, DType.F32)
        attn = self.buffer(f"{L}attn_out", m, heads * hd, DType.BF16)
        shape = {"heads": heads, "kv_heads": kv_heads, "head_dim": hd}
        self.emit(Instr(Op.NORM_GEMV_QKV, f"{L}qkv", i, n=c.q_proj_rows + 2 * c.kv_dim, k=c.hidden_size,
                        weights=[a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"],
                        bufs={"in": x, "out": q, "aux0": gate, "aux1": keys, "aux2": values},
                        params={"norm_weight": p + "input_layernorm.weight", "eps": c.rms_norm_eps,
                                "q_norm_weight": a + "q_norm.weight", "k_norm_weight": a + "k_norm.weight",
                                **shape, "rotary_dim": c.rotary_dim, "rope_theta": c.rope_theta,
                                "capacity": self.capacity}))
        self.emit(Instr(Op.ATTN_SCORES, f"{L}scores", i, bufs={"in": q, "aux0": keys, "out": scores, "aux1": stats},
                        params={**shape, "partitions": parts, "scale": hd ** -0.5, "capacity": self.capacity}))
        self.emit(Instr(Op.ATTN_PV, f"{L}pv", i, bufs={"in": scores, "aux0": values, "aux1": stats, "out": partial},
                        params={**shape, "partitions": parts, "capacity": self.capacity}))
        self.emit(Instr(Op.ATTN_MERGE, f"{L}merge", i, n=heads * hd, bufs={"in": partial, "aux0": gate, "out": attn},
                        params={"heads": heads, "head_dim": hd, "partitions": parts}))
        out = self.residual()
        self.emit(Instr(Op.GEMV_RESIDUAL, f"{L}o_proj", i, n=c.hidden_size, k=c.attn_out_dim,
                        weights=[a + "o_proj.weight"], bufs={"in": attn, "aux0": x, "out": out}))
        return out

    def mlp(self, i: int, x: str) -> str:
        c, m = self.c, self.m
        p, L = self._names(i)
        h = self.buffer(f"{L}mlp_h", m, c.intermediate_size, DType.BF16)
        self.emit(Instr(Op.NORM_GATE_UP, f"{L}gate_up", i, n=c.intermediate_size, k=c.hidden_size,
                        weights=[p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"], bufs={"in": x, "out": h},
                        params={"norm_weight": p + "post_attention_layernorm.weight", "eps": c.rms_norm_eps}))
        out = self.residual()
        self.emit(Instr(Op.GEMV_RESIDUAL, f"{L}down", i, n=c.hidden_size, k=c.intermediate_size,
                        weights=[p + "mlp.down_proj.weight"], bufs={"in": h, "aux0": x, "out": out}))
        return out

    def head(self, x: str, norm: str, hidden: str, debug_logits: bool, working_vocab: bool = False) -> None:
        """Norm + lm_head + argmax + hand-off; the normalised input is kept in `hidden` (for the MTP).
        working_vocab: the head's rows are the session's gathered mtp.draft_head, the chosen row is mapped
        to its id through mtp.draft_ids."""
        c, m, L = self.c, self.m, self.prefix
        n = draft_rows(c) if working_vocab else c.vocab_size
        groups = -(-n // plan.HEAD_TILE_ROWS)
        candidates = self.buffer(f"{L}head_candidates", m, 2 * groups, DType.I32)
        bufs = {"in": x, "out": candidates, "aux1": hidden}
        argmax_bufs = {"in": candidates, "out": "ctrl"}
        flags = Flag.DEBUG_LOGITS if debug_logits else Flag.NONE
        if debug_logits:
            bufs["aux0"] = self.buffer(f"{L}logits", m, n, DType.F32)
        weights, vocab_flag = [LM_HEAD], Flag.NONE
        if working_vocab:  # every row of the table is a defined id (padding repeats the first)
            weights, vocab_flag = [], Flag.WORKING_VOCAB
            bufs["aux2"], argmax_bufs["aux0"] = "mtp.draft_head", "mtp.draft_ids"
        self.emit(Instr(Op.NORM_HEAD, f"{L}head", -1, n=n, k=c.hidden_size, weights=weights, bufs=bufs,
                        params={"norm_weight": norm, "eps": c.rms_norm_eps,
                                "defined_vocab": n if working_vocab else c.defined_vocab},
                        flags=flags | vocab_flag))
        self.emit(Instr(Op.ARGMAX, f"{L}argmax", -1, bufs=argmax_bufs, params={"candidates": groups},
                        flags=vocab_flag))
        self.emit(Instr(Op.HANDOFF, f"{L}handoff", -1, bufs={"in": "ctrl", "out": "ctrl"}))


@functools.cache
def _fp8_weights(c: ModelConfig) -> frozenset[str]:
    return frozenset(spec.name for spec in tensor_specs(c) if spec.is_fp8)


class _PromptBuilder(_Builder):
    """The prompt programs' words: the decode builder's buffers and names, GEMM-shaped words over `rows`, each
    GEMM reading operand slabs (isa/operand_layout.py) that the prepare word before it writes."""

    max_rows = PROMPT_MAX_ROWS

    def operand(self, name: str, op: Op, layer: int, x: str, k: int, weights: list[str], params: dict,
                aux0: str | None = None) -> str:
        """Emit the prepare word of GEMM `name` (input x of k columns; aux0: the MTP's tokens, GATED_PREPARE's gate
        rows); its operand buffer.
        bf16 weight segments (in_proj's b and a) multiply the bf16 rows, as decode's GEMV does: a second set of
        slabs holds them, unscaled (buf_aux1)."""
        slab_rows = -(-self.m // plan.PROMPT_TOKEN_TILE) * (k // plan.K_BLOCK)
        operand = self.buffer(f"{name}.operand", slab_rows, SLAB_BYTES // 4, DType.I32)
        bufs = {"in": x, "out": operand, **({"aux0": aux0} if aux0 else {})}
        if any(w not in _fp8_weights(self.c) for w in weights):
            bufs["aux1"] = self.buffer(f"{name}.operand_bf16", slab_rows, SLAB_BYTES // 4, DType.I32)
        self.emit(Instr(op, f"{name}.prepare", layer, n=k, bufs=bufs, params=params))
        return operand

    def gemm(self, op: Op, name: str, i: int, n: int, k: int, weights: list[str], x: str, out: str,
             norm: str | None = None, residual: str | None = None) -> None:
        """A prepare word (RMSNorm with weight `norm` first when given) and the GEMM reading its slabs."""
        params = {"norm_weight": norm, "eps": self.c.rms_norm_eps} if norm else {}
        operand = self.operand(name, Op.NORM_PREPARE if norm else Op.PREPARE, i, x, k, weights, params)
        self.emit_gemm(op, name, i, n, k, weights, operand, out, residual)

    def emit_gemm(self, op: Op, name: str, i: int, n: int, k: int, weights: list[str], operand: str, out: str,
                  residual: str | None = None) -> None:
        """The GEMM word reading `operand` (and its bf16 slabs, when its prepare word writes them)."""
        bufs = {"in": operand, "out": out, **({"aux0": residual} if residual else {})}
        if f"{name}.operand_bf16" in self.buffers:
            bufs["aux1"] = f"{name}.operand_bf16"
        self.emit(Instr(op, name, i, n=n, k=k, weights=weights, bufs=bufs))

    def gdn_layer(self, i: int, x: str) -> str:
        c, m, p = self.c, self.m, layer_prefix(i)
        g = p + "linear_attn."
        width = c.gdn_conv_dim + c.gdn_value_dim + 2 * c.linear_num_value_heads
        mixed = self.buffer(f"L{i}.mixed", m, width, DType.BF16)
        convolved = self.buffer(f"L{i}.convolved", m, c.gdn_conv_dim, DType.BF16)
        core = self.buffer(f"L{i}.gdn_o", m, c.gdn_value_dim, DType.BF16)  # before the gated norm
        self.gemm(Op.GEMM, f"L{i}.in_proj", i, width, c.hidden_size,
                  [g + "in_proj_qkv.weight", g + "in_proj_z.weight", g + "in_proj_b.weight", g + "in_proj_a.weight"],
                  x, mixed, norm=p + "input_layernorm.weight")
        self.emit(Instr(Op.PROMPT_CONV, f"L{i}.conv", i, n=c.gdn_conv_dim,
                        bufs={"in": mixed, "out": convolved, "aux1": f"L{i}.conv_ring"},
                        params={"conv_weight": g + "conv1d.weight", "conv_kernel": c.linear_conv_kernel_dim,
                                "ring": CONV_RING}))
        self.emit(Instr(Op.GDN_CHUNK, f"L{i}.gdn_chunk", i, n=c.gdn_value_dim,
                        bufs={"in": convolved, "aux1": mixed, "aux0": f"L{i}.ssm", "out": core},
                        params={"a_log": g + "A_log", "dt_bias": g + "dt_bias", "key_heads": c.linear_num_key_heads,
                                "value_heads": c.linear_num_value_heads, "key_dim": c.linear_key_head_dim,
                                "value_dim": c.linear_value_head_dim}))
        out, name = self.residual(), f"L{i}.out_proj"
        if c.linear_value_head_dim != plan.K_BLOCK:
            raise ValueError(f"GATED_PREPARE normalises a value head as one k-block of the operand: the prompt "
                             f"program takes value_dim {plan.K_BLOCK}, the model has {c.linear_value_head_dim}")
        operand = self.operand(name, Op.GATED_PREPARE, i, core, c.gdn_value_dim, [g + "out_proj.weight"],
                               {"norm_weight": g + "norm.weight", "eps": c.rms_norm_eps,
                                "value_dim": c.linear_value_head_dim, "z_column": c.gdn_conv_dim}, aux0=mixed)
        self.emit_gemm(Op.GEMM_RESIDUAL, name, i, c.hidden_size, c.gdn_value_dim, [g + "out_proj.weight"], operand,
                       out, residual=x)
        return out

    def attention_layer(self, i: int, x: str) -> str:
        c, m = self.c, self.m
        p, L = self._names(i)
        a = p + "self_attn."
        heads, kv_heads, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        raw = self.buffer(f"{L}qkv_raw", m, c.q_proj_rows + 2 * c.kv_dim, DType.BF16)
        q = self.buffer(f"{L}q", m, heads * hd, DType.BF16)
        gate = self.buffer(f"{L}gate", m, heads * hd, DType.BF16)
        attn = self.buffer(f"{L}attn_out", m, heads * hd, DType.BF16)
        keys, values = f"{L}k_cache", f"{L}v_cache"
        shape = {"heads": heads, "kv_heads": kv_heads, "head_dim": hd, "capacity": self.capacity}
        self.gemm(Op.GEMM, f"{L}qkv", i, c.q_proj_rows + 2 * c.kv_dim, c.hidden_size,
                  [a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"], x, raw,
                  norm=p + "input_layernorm.weight")
        self.emit(Instr(Op.PROMPT_QKV, f"{L}qk_norm_rope", i, n=c.q_proj_rows + 2 * c.kv_dim,
                        bufs={"in": raw, "out": q, "aux0": gate, "aux1": keys, "aux2": values},
                        params={"eps": c.rms_norm_eps, "q_norm_weight": a + "q_norm.weight",
                                "k_norm_weight": a + "k_norm.weight", "rotary_dim": c.rotary_dim,
                                "rope_theta": c.rope_theta, **shape}))
        self.emit(Instr(Op.ATTN_CAUSAL, f"{L}attention", i, n=heads * hd,
                        bufs={"in": q, "aux0": keys, "aux1": values, "aux2": gate, "out": attn},
                        params={**shape, "key_tile": plan.PROMPT_KEY_TILE, "scale": hd ** -0.5}))
        out = self.residual()
        self.gemm(Op.GEMM_RESIDUAL, f"{L}o_proj", i, c.hidden_size, c.attn_out_dim, [a + "o_proj.weight"], attn, out,
                  residual=x)
        return out

    def mlp(self, i: int, x: str) -> str:
        c, m = self.c, self.m
        p, L = self._names(i)
        h = self.buffer(f"{L}mlp_h", m, c.intermediate_size, DType.BF16)
        self.gemm(Op.GEMM_GATE_UP, f"{L}gate_up", i, c.intermediate_size, c.hidden_size,
                  [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"], x, h,
                  norm=p + "post_attention_layernorm.weight")
        out = self.residual()
        self.gemm(Op.GEMM_RESIDUAL, f"{L}down", i, c.hidden_size, c.intermediate_size, [p + "mlp.down_proj.weight"],
                  h, out, residual=x)
        return out
