"""Opcodes: one per fused device function. docs/ISA.md describes each one's buffers and parameters."""

from __future__ import annotations

import enum


class Op(enum.IntEnum):
    NOP = 0
    EMBED = 1  # x[m] = embed[token_in[m]]
    NORM_GEMV = 2  # RMSNorm(x) -> [W_0 | W_1 | ...] -> bf16   (GDN in_proj: qkv | z | b | a)
    NORM_GEMV_QKV = 3  # RMSNorm(x) -> q | k | v -> q_norm+RoPE, k_norm+RoPE+append, v append, gate
    NORM_GATE_UP = 4  # RMSNorm(x) -> gate, up -> bf16(bf16(silu(g)) * u)
    GEMV_RESIDUAL = 5  # a -> W -> x_out = bf16(x_in + bf16(W a))   (o_proj, down)
    # 6: retired (GATED_NORM_GEMV_RESIDUAL; the gated norm is GDN_CORE's since docs/DECISIONS.md D37)
    GDN_CORE = 7  # conv ring + silu, l2norm, gates, delta-rule recurrence over the M rows, gated RMSNorm
    ATTN_SCORES = 8  # bf16 scores and softmax statistics per (kv head, partition)
    ATTN_PV = 9  # P = bf16(exp(s - max) / sum); fp32 P.V per (kv head, partition)
    ATTN_MERGE = 10  # sum partitions in order -> bf16, times bf16(sigmoid(gate))
    NORM_HEAD = 11  # RMSNorm(x) -> lm_head -> per-tile (max, lowest id) candidates (+ fp32 logits if DEBUG)
    ARGMAX = 12  # candidates -> token per row (lowest id on ties)
    HANDOFF = 13  # chosen tokens -> control block; advance position and step
    MTP_FC = 14  # MTP: RMSNorm(embed(token)) | RMSNorm(hidden) -> fc -> bf16
    # The prompt programs (issue 21; docs/ISA.md "Prompt programs"): a chunk of up to `chunk_rows` rows, the
    # chunk's rows r in the control block (CTRL_ROWS), its tokens in the session buffer prompt_tokens. A GEMM
    # reads its input as operand slabs (isa/operand_layout.py) that a prepare word writes.
    PROMPT_EMBED = 15  # x[i] = embed[prompt_tokens[i]], i < r
    NORM_PREPARE = 16  # RMSNorm(x) -> the f16 operand slabs (and the bf16 ones for bf16 weight segments)
    PREPARE = 17  # an activation -> the f16 operand slabs
    MTP_PREPARE = 18  # RMSNorm(embed(prompt_tokens)) | RMSNorm(prompt_hidden) -> the MTP fc's operand slabs
    GEMM = 19  # operand -> [W_0 | W_1 | ...] -> bf16 (in_proj, qkv, the MTP fc)
    GEMM_GATE_UP = 20  # operand -> gate, up -> bf16(bf16(silu(g)) * u)
    GEMM_RESIDUAL = 21  # operand -> W -> x_out = bf16(x_in + bf16(W a))   (out_proj, o_proj, down)
    PROMPT_QKV = 22  # raw q|gate, k, v -> q_norm + RoPE, gate, k_norm + RoPE and v appended to the cache
    ATTN_CAUSAL = 23  # each row over the cache up to its own position (ops.attend_tiled), times sigmoid(gate)
    PROMPT_CONV = 24  # the causal conv + silu over the chunk per channel tile; the ring keeps the last rows
    GDN_CHUNK = 25  # gates, l2norm, the WY form over the chunk (gdn.chunked) -> bf16 o, per value head's column half
    PROMPT_NORM = 26  # RMSNorm of the chunk's rows -> prompt_hidden (the target's post-final-norm rows, for the MTP)
    PROMPT_ADVANCE = 27  # position += r
    GATED_PREPARE = 28  # GDN_CHUNK's o -> per value head the gated RMSNorm with z -> the f16 operand slabs


GEMV_OPS = frozenset({Op.NORM_GEMV, Op.NORM_GEMV_QKV, Op.NORM_GATE_UP, Op.GEMV_RESIDUAL, Op.NORM_HEAD, Op.MTP_FC})
GEMM_OPS = frozenset({Op.GEMM, Op.GEMM_GATE_UP, Op.GEMM_RESIDUAL})
PREPARE_OPS = frozenset({Op.NORM_PREPARE, Op.PREPARE, Op.MTP_PREPARE, Op.GATED_PREPARE})
PROMPT_OPS = GEMM_OPS | PREPARE_OPS | {Op.PROMPT_EMBED, Op.PROMPT_QKV, Op.ATTN_CAUSAL, Op.PROMPT_CONV,
                                       Op.GDN_CHUNK, Op.PROMPT_NORM, Op.PROMPT_ADVANCE}


class Flag(enum.IntFlag):
    NONE = 0
    DEBUG_LOGITS = 1  # NORM_HEAD also writes fp32 logits
    # NORM_HEAD: the head's rows are session buffer aux2 (bf16 [n, k], no scales) instead of a weight;
    # ARGMAX: the chosen row is mapped to a token id through session buffer aux0 (int32 [1, n]).
    # The MTP draft head restricted to a working vocabulary (megakernel/model/draft_vocab.py).
    WORKING_VOCAB = 2


class WaitMode(enum.IntEnum):
    NONE = 0
    ALL = 1  # every counter of the range
    SLICE = 2  # a tile with k-slice s waits on counter base + s only


NO_BUFFER = 0xFFFF
CONTROL_BUFFER = 0  # buffer 0 is always the control block
NO_LAYER = 0xFF
MTP_LAYER = 0xFE  # every word of the MTP draft program


# Per-opcode parameter slots p0.. (name, kind): kind "u" is an unsigned integer, "f" a float32 stored as
# its bits, "w" a weight-table index (the discrete build renumbers those per launch:
# discrete/launch_program.py); ISA.md explains each.
PARAMS: dict[Op, tuple[tuple[str, str], ...]] = {
    Op.NOP: (),
    Op.EMBED: (("embed_weight", "w"),),
    Op.NORM_GEMV: (("norm_weight", "w"), ("eps", "f")),
    Op.NORM_GEMV_QKV: (("norm_weight", "w"), ("eps", "f"), ("q_norm_weight", "w"), ("k_norm_weight", "w"),
                       ("heads", "u"), ("kv_heads", "u"), ("head_dim", "u"), ("rotary_dim", "u"), ("rope_theta", "f"),
                       ("capacity", "u")),
    Op.NORM_GATE_UP: (("norm_weight", "w"), ("eps", "f")),
    Op.GEMV_RESIDUAL: (),
    Op.GDN_CORE: (("conv_weight", "w"), ("a_log", "w"), ("dt_bias", "w"), ("key_heads", "u"), ("value_heads", "u"),
                  ("key_dim", "u"), ("value_dim", "u"), ("conv_kernel", "u"), ("ring", "u"), ("norm_weight", "w"),
                  ("eps", "f")),
    Op.ATTN_SCORES: (("heads", "u"), ("kv_heads", "u"), ("head_dim", "u"), ("partitions", "u"), ("scale", "f"),
                     ("capacity", "u")),
    Op.ATTN_PV: (("heads", "u"), ("kv_heads", "u"), ("head_dim", "u"), ("partitions", "u"), ("capacity", "u")),
    Op.ATTN_MERGE: (("heads", "u"), ("head_dim", "u"), ("partitions", "u")),
    Op.NORM_HEAD: (("norm_weight", "w"), ("eps", "f"), ("defined_vocab", "u")),
    Op.ARGMAX: (("candidates", "u"),),
    Op.HANDOFF: (),
    Op.MTP_FC: (("embed_weight", "w"), ("norm_embedding", "w"), ("norm_hidden", "w"), ("eps", "f")),
    Op.PROMPT_EMBED: (("embed_weight", "w"),),
    Op.NORM_PREPARE: (("norm_weight", "w"), ("eps", "f")),
    Op.PREPARE: (),
    Op.MTP_PREPARE: (("embed_weight", "w"), ("norm_embedding", "w"), ("norm_hidden", "w"), ("eps", "f")),
    Op.GEMM: (),
    Op.GEMM_GATE_UP: (),
    Op.GEMM_RESIDUAL: (),
    Op.PROMPT_QKV: (("eps", "f"), ("q_norm_weight", "w"), ("k_norm_weight", "w"), ("heads", "u"), ("kv_heads", "u"),
                    ("head_dim", "u"), ("rotary_dim", "u"), ("rope_theta", "f"), ("capacity", "u")),
    Op.ATTN_CAUSAL: (("heads", "u"), ("kv_heads", "u"), ("head_dim", "u"), ("key_tile", "u"), ("scale", "f"),
                     ("capacity", "u")),
    Op.PROMPT_CONV: (("conv_weight", "w"), ("conv_kernel", "u"), ("ring", "u")),
    Op.GDN_CHUNK: (("a_log", "w"), ("dt_bias", "w"), ("key_heads", "u"), ("value_heads", "u"), ("key_dim", "u"),
                   ("value_dim", "u")),
    Op.PROMPT_NORM: (("norm_weight", "w"), ("eps", "f")),
    Op.PROMPT_ADVANCE: (),
    Op.GATED_PREPARE: (("norm_weight", "w"), ("eps", "f"), ("value_dim", "u"), ("z_column", "u")),
}

# The control block (buffer 0, one row of int32): what every step reads and HANDOFF writes. Two lanes
# of the same layout: the target's at word 0, the MTP draft program's at word CTRL_LANE.
CTRL_LANE = 32
CTRL_STEP = 0  # steps completed since the session began
CTRL_POSITION = 1  # position of the pass's first row
CTRL_ROWS = 2  # M of the pass (decode words take M from their word); a prompt chunk's rows r (host-written)
CTRL_TOKENS_IN = 3  # 8 slots: the pass's input tokens
CTRL_TOKENS_OUT = 11  # 8 slots: the tokens chosen for each row
# Speculative decoding (the host writes both before a pass; docs/ISA.md "Speculative passes"):
CTRL_PENDING = 19  # rows at positions [position - pending, position) that GDN_CORE folds into its state first
CTRL_SPECULATIVE = 20  # 1: this pass's rows are provisional: GDN_CORE keeps them out of its stored state
CTRL_WORDS = 64
MAX_ROWS = 8
PROMPT_MAX_ROWS = 2048  # the largest prompt chunk a prompt program may take (the prompt_tokens buffer's width)


def control_base(layer: int) -> int:
    """The control-block lane a word reads and writes: the MTP program's own, or the target's."""
    return CTRL_LANE if layer == MTP_LAYER else 0
