"""Partitioning: how many tiles each instruction has and how big they are (the block assignment of
tiles is the fixed rule of tiling.block_range). Split-K GEMVs get a scratch buffer for their partials.

GEMV row groups are plan.row_tile rows (128, one scale block, or the 16-row strips that fit one wave
where 128-row groups would spill a few tiles into a second), except NORM_GEMV_QKV whose row groups are
one head (head_dim rows) so that the epilogue can normalise and rotate a whole head, and NORM_HEAD
(plan.HEAD_TILE_ROWS: one argmax candidate per group);
k-slices are plan.k_slices of the instruction's row groups and k (megakernel/model/plan.py), the numbers the
reference's engine mode sums with.
"""

from __future__ import annotations

from isa import GEMM_OPS, GEMV_OPS, PREPARE_OPS, DType, Flag, Kind, Op
from megakernel.model import plan
from megakernel.model.config import ModelConfig
from megakernel.model.tensors import tensor_specs

from .ir import BufferDecl, Lowered
from .lowering import EMBED_TILE_COLS
from .tiling import prepare_tiles


def token_tiles(rows: int) -> int:
    """A prompt GEMM's tiles along the chunk's rows."""
    return -(-rows // plan.PROMPT_TOKEN_TILE)


def partition(low: Lowered, c: ModelConfig) -> None:
    shapes = {s.name: s.shape for s in tensor_specs(c)}
    for ins in low.instrs:
        op, p = ins.op, ins.params
        if op in GEMV_OPS:
            seg_rows = tuple(shapes[w][0] for w in ins.weights)
            if ins.flags & Flag.WORKING_VOCAB:  # the head's rows are a session buffer
                seg_rows = (low.buffers[ins.bufs["aux2"]].rows,)
            paired = op == Op.NORM_GATE_UP
            ins.tile_rows = (c.head_dim if op == Op.NORM_GEMV_QKV else plan.HEAD_TILE_ROWS if op == Op.NORM_HEAD
                             else plan.row_tile(seg_rows, ins.k, paired))
            groups = plan.row_groups(seg_rows, ins.tile_rows, paired=paired)
            ins.k_slices = plan.k_slices(groups, ins.k)
            ins.tiles = groups * ins.k_slices
            ins.split_groups = groups if ins.k_slices > 1 else 0
            if ins.k_slices > 1:
                width = 2 * ins.n if op == Op.NORM_GATE_UP else ins.n
                scratch = f"{ins.name}.partials"
                low.buffers[scratch] = BufferDecl(scratch, ins.k_slices * low.rows, width, DType.F32, Kind.ACTIVATION)
                ins.bufs["scratch"] = scratch
        elif op in GEMM_OPS:  # one k-slice: the prompt GEMM's order (plan.PROMPT_SLICES)
            seg_rows = tuple(shapes[w][0] for w in ins.weights)
            paired = op == Op.GEMM_GATE_UP
            ins.tile_rows = plan.PROMPT_TILE_ROWS // 2 if paired else plan.PROMPT_TILE_ROWS
            ins.tiles = plan.row_groups(seg_rows, ins.tile_rows, paired=paired) * token_tiles(low.rows)
        elif op in (Op.EMBED, Op.PROMPT_EMBED):
            ins.tile_rows = EMBED_TILE_COLS
            ins.tiles = -(-ins.n // EMBED_TILE_COLS)
        elif op == Op.PROMPT_QKV:
            ins.tile_rows = plan.PROMPT_QKV_ROWS
            ins.tiles = (p["heads"] + p["kv_heads"]) * -(-low.rows // plan.PROMPT_QKV_ROWS)
        elif op in PREPARE_OPS:  # n: the operand's columns; tile_rows: k-blocks a tile (all but MTP_PREPARE
            # stream whole rows in registers, prompt_ops.cuh stream_prepare_tile / stream_gated_tile: D73)
            whole = op != Op.MTP_PREPARE
            ins.tile_rows = ins.n // plan.K_BLOCK if whole else plan.PROMPT_PREPARE_BLOCKS
            ins.tiles = prepare_tiles(low.rows, ins.n, ins.tile_rows)
        elif op == Op.PROMPT_NORM:
            ins.tile_rows = plan.PROMPT_QUERY_TILE
            ins.tiles = -(-low.rows // plan.PROMPT_QUERY_TILE)
        elif op == Op.ATTN_CAUSAL:
            ins.tile_rows = plan.PROMPT_ATTN_ROWS
            ins.tiles = p["heads"] * -(-low.rows // plan.PROMPT_ATTN_ROWS)
        elif op == Op.PROMPT_CONV:
            ins.tile_rows = plan.PROMPT_CONV_COLS
            ins.tiles = -(-ins.n // plan.PROMPT_CONV_COLS)
        elif op == Op.GDN_CHUNK:
            ins.tiles = p["value_heads"] * plan.PROMPT_GDN_SPLIT
        elif op == Op.PROMPT_ADVANCE:
            ins.tiles = 1
        elif op == Op.GDN_CORE:
            ins.tiles = p["value_heads"]
        elif op in (Op.ATTN_SCORES, Op.ATTN_PV):
            ins.tiles = p["kv_heads"] * p["partitions"]
        elif op == Op.ATTN_MERGE:
            ins.tiles = p["heads"] * plan.merge_tiles_per_head(p["head_dim"], low.rows)
        elif op == Op.ARGMAX:
            ins.tiles = low.rows
        elif op == Op.HANDOFF:
            ins.tiles = 1
        else:
            raise ValueError(f"no partitioning rule for {op.name}")
