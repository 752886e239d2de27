"""Lowering: model config + rows M -> instructions of one target forward pass (a step).

    EMBED -> per GDN layer:       NORM_GEMV (in_proj qkv|z|b|a), GDN_CORE,
                                  GATED_NORM_GEMV_RESIDUAL (out_proj), NORM_GATE_UP, GEMV_RESIDUAL (down)
             per attention layer: NORM_GEMV_QKV (q|k|v, norms, RoPE, KV append), ATTN_SCORES, ATTN_PV,
                                  ATTN_MERGE (+ sigmoid gate), GEMV_RESIDUAL (o_proj), NORM_GATE_UP, GEMV_RESIDUAL
          -> NORM_HEAD (final norm + lm_head) -> ARGMAX -> HANDOFF

Five words per GDN layer and seven per attention layer: 48 x 5 + 16 x 7 + 4 = 356 for the 27B.
Activations are named in SSA form (x0, x1, ... for the residual stream); the allocator maps them onto
reused arena space. Per-session state (KV caches, GDN states, conv rings) are STATE buffers. Ops that
need the position or the tokens read the control block (buffer 0) implicitly.
"""

from __future__ import annotations

from isa import DType, Flag, Kind, Op
from isa.opcodes import CTRL_WORDS, MAX_ROWS
from megakernel import plan
from megakernel.config import ModelConfig
from megakernel.tensors import EMBED, FINAL_NORM, LM_HEAD, layer_prefix

from .ir import BufferDecl, Instr, Lowered

CONV_RING = 16  # conv ring rows: >= (kernel - 1) + MAX_ROWS, a power of two for cheap modulo
EMBED_TILE_COLS = 1024  # columns of the residual one EMBED tile writes


def lower(c: ModelConfig, rows: int, capacity: int, debug_logits: bool = False) -> Lowered:
    if not 1 <= rows <= MAX_ROWS:
        raise ValueError(f"rows M = {rows} outside 1..{MAX_ROWS}")
    if CONV_RING < c.linear_conv_kernel_dim - 1 + MAX_ROWS:
        raise ValueError("conv ring too short for the kernel and MAX_ROWS")
    b = _Builder(c, rows, capacity)
    b.buffer("ctrl", 1, CTRL_WORDS, DType.I32, Kind.CONTROL)
    x = b.residual()
    b.emit(Instr(Op.EMBED, "embed", -1, n=c.hidden_size, bufs={"in": "ctrl", "out": x},
                 params={"embed_weight": EMBED}))
    for i in range(c.num_hidden_layers):
        x = (b.attention_layer if i in c.attention_layers else b.gdn_layer)(i, x)
        x = b.mlp(i, x)
    b.head(x, debug_logits)
    return Lowered(b.instrs, b.buffers, rows, capacity)


class _Builder:
    def __init__(self, c: ModelConfig, rows: int, capacity: int):
        self.c, self.m, self.capacity = c, rows, capacity
        self.instrs: list[Instr] = []
        self.buffers: dict[str, BufferDecl] = {}
        self.residuals = 0

    def buffer(self, name: str, rows: int, cols: int, dtype: DType, kind: Kind = Kind.ACTIVATION) -> str:
        self.buffers[name] = BufferDecl(name, rows, cols, dtype, kind)
        return name

    def residual(self) -> str:
        name = self.buffer(f"x{self.residuals}", self.m, self.c.hidden_size, DType.BF16)
        self.residuals += 1
        return name

    def emit(self, instr: Instr) -> None:
        self.instrs.append(instr)

    def gdn_layer(self, i: int, x: str) -> str:
        c, m, p = self.c, self.m, layer_prefix(i)
        g = p + "linear_attn."
        width = c.gdn_conv_dim + c.gdn_value_dim + 2 * c.linear_num_value_heads
        mixed = self.buffer(f"L{i}.mixed", m, width, DType.BF16)
        core = self.buffer(f"L{i}.gdn_out", m, c.gdn_value_dim, DType.BF16)
        state = self.buffer(f"L{i}.ssm", c.linear_num_value_heads, c.linear_value_head_dim * c.linear_key_head_dim,
                            DType.F32, Kind.STATE)
        ring = self.buffer(f"L{i}.conv_ring", CONV_RING, c.gdn_conv_dim, DType.BF16, Kind.STATE)
        self.emit(Instr(Op.NORM_GEMV, f"L{i}.in_proj", i, n=width, k=c.hidden_size,
                        weights=[g + "in_proj_qkv.weight", g + "in_proj_z.weight", g + "in_proj_b.weight",
                                 g + "in_proj_a.weight"],
                        bufs={"in": x, "out": mixed},
                        params={"norm_weight": p + "input_layernorm.weight", "eps": c.rms_norm_eps}))
        self.emit(Instr(Op.GDN_CORE, f"L{i}.gdn_core", i, n=c.gdn_value_dim,
                        bufs={"in": mixed, "out": core, "aux0": state, "aux1": ring},
                        params={"conv_weight": g + "conv1d.weight", "a_log": g + "A_log", "dt_bias": g + "dt_bias",
                                "key_heads": c.linear_num_key_heads, "value_heads": c.linear_num_value_heads,
                                "key_dim": c.linear_key_head_dim, "value_dim": c.linear_value_head_dim,
                                "conv_kernel": c.linear_conv_kernel_dim, "ring": CONV_RING, "column_groups": 1}))
        out = self.residual()
        self.emit(Instr(Op.GATED_NORM_GEMV_RESIDUAL, f"L{i}.out_proj", i, n=c.hidden_size, k=c.gdn_value_dim,
                        weights=[g + "out_proj.weight"], bufs={"in": core, "aux0": x, "aux1": mixed, "out": out},
                        params={"norm_weight": g + "norm.weight", "eps": c.rms_norm_eps,
                                "z_col": c.gdn_conv_dim, "head_dim": c.linear_value_head_dim}))
        return out

    def attention_layer(self, i: int, x: str) -> str:
        c, m, p = self.c, self.m, layer_prefix(i)
        a = p + "self_attn."
        heads, kv_heads, hd, parts = c.num_attention_heads, c.num_key_value_heads, c.head_dim, plan.ATTENTION_PARTITIONS
        q = self.buffer(f"L{i}.q", m, heads * hd, DType.BF16)
        gate = self.buffer(f"L{i}.gate", m, heads * hd, DType.BF16)
        keys = self.buffer(f"L{i}.k_cache", self.capacity, kv_heads * hd, DType.BF16, Kind.STATE)
        values = self.buffer(f"L{i}.v_cache", self.capacity, kv_heads * hd, DType.BF16, Kind.STATE)
        scores = self.buffer(f"L{i}.scores", heads * m, self.capacity, DType.BF16)
        stats = self.buffer(f"L{i}.softmax_stats", heads * m, 2 * parts, DType.F32)
        partial = self.buffer(f"L{i}.attn_partial", heads * m, parts * hd, DType.F32)
        attn = self.buffer(f"L{i}.attn_out", m, heads * hd, DType.BF16)
        shape = {"heads": heads, "kv_heads": kv_heads, "head_dim": hd}
        self.emit(Instr(Op.NORM_GEMV_QKV, f"L{i}.qkv", i, n=c.q_proj_rows + 2 * c.kv_dim, k=c.hidden_size,
                        weights=[a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"],
                        bufs={"in": x, "out": q, "aux0": gate, "aux1": keys, "aux2": values},
                        params={"norm_weight": p + "input_layernorm.weight", "eps": c.rms_norm_eps,
                                "q_norm_weight": a + "q_norm.weight", "k_norm_weight": a + "k_norm.weight",
                                **shape, "rotary_dim": c.rotary_dim, "rope_theta": c.rope_theta,
                                "capacity": self.capacity}))
        self.emit(Instr(Op.ATTN_SCORES, f"L{i}.scores", i, bufs={"in": q, "aux0": keys, "out": scores, "aux1": stats},
                        params={**shape, "partitions": parts, "scale": hd ** -0.5, "capacity": self.capacity}))
        self.emit(Instr(Op.ATTN_PV, f"L{i}.pv", i, bufs={"in": scores, "aux0": values, "aux1": stats, "out": partial},
                        params={**shape, "partitions": parts, "capacity": self.capacity}))
        self.emit(Instr(Op.ATTN_MERGE, f"L{i}.merge", i, n=heads * hd, bufs={"in": partial, "aux0": gate, "out": attn},
                        params={"heads": heads, "head_dim": hd, "partitions": parts}))
        out = self.residual()
        self.emit(Instr(Op.GEMV_RESIDUAL, f"L{i}.o_proj", i, n=c.hidden_size, k=c.attn_out_dim,
                        weights=[a + "o_proj.weight"], bufs={"in": attn, "aux0": x, "out": out}))
        return out

    def mlp(self, i: int, x: str) -> str:
        c, m, p = self.c, self.m, layer_prefix(i)
        h = self.buffer(f"L{i}.mlp_h", m, c.intermediate_size, DType.BF16)
        self.emit(Instr(Op.NORM_GATE_UP, f"L{i}.gate_up", i, n=c.intermediate_size, k=c.hidden_size,
                        weights=[p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"], bufs={"in": x, "out": h},
                        params={"norm_weight": p + "post_attention_layernorm.weight", "eps": c.rms_norm_eps}))
        out = self.residual()
        self.emit(Instr(Op.GEMV_RESIDUAL, f"L{i}.down", i, n=c.hidden_size, k=c.intermediate_size,
                        weights=[p + "mlp.down_proj.weight"], bufs={"in": h, "aux0": x, "out": out}))
        return out

    def head(self, x: str, debug_logits: bool) -> None:
        c, m = self.c, self.m
        groups = -(-c.vocab_size // plan.ROW_BLOCK)
        candidates = self.buffer("head_candidates", m, 2 * groups, DType.I32)
        bufs = {"in": x, "out": candidates}
        if debug_logits:
            bufs["aux0"] = self.buffer("logits", m, c.vocab_size, DType.F32)
        self.emit(Instr(Op.NORM_HEAD, "head", -1, n=c.vocab_size, k=c.hidden_size, weights=[LM_HEAD], bufs=bufs,
                        params={"norm_weight": FINAL_NORM, "eps": c.rms_norm_eps, "defined_vocab": c.defined_vocab},
                        flags=Flag.DEBUG_LOGITS if debug_logits else Flag.NONE))
        self.emit(Instr(Op.ARGMAX, "argmax", -1, bufs={"in": candidates, "out": "ctrl"}, params={"candidates": groups}))
        self.emit(Instr(Op.HANDOFF, "handoff", -1, bufs={"in": "ctrl", "out": "ctrl"}))
