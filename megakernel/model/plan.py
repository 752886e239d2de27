"""The work decomposition that engine numerics depend on, shared by the reference (engine mode), the
compiler and the CUDA kernels, so that all of them sum in the same order.

* GEMV: the reduction axis is cut into 128-wide blocks (the fp8 scale grid). Each block's products
  give one fp32 partial; a k-slice accumulates scale x partial over its blocks in order; the slices
  are added in order 0..S-1. S depends only on the fused instruction's shape (never on the number of
  SMs or on the rows M), so every build and every M computes the same bits.
* Fused GEMVs: the weights one instruction computes together (e.g. in_proj_qkv | z | b | a) share
  one S, computed from their row groups (the tiles of one k-slice).
* Row groups are 128 rows (one scale block), or the strips that fit one wave where 128-row groups would
  spill a few tiles into a second (row_tile). The GPU cuts a group into passes at the scale blocks and
  deals a pass's k-blocks to more warps when it has fewer rows (gemv.cuh WarpRole); that order agrees
  with the slice sum to fp32 rounding and, like S, depends only on the shape.
* Attention: a row with L keys is split into P = 32 partitions, partition p holding keys
  [p * L // P, (p + 1) * L // P); softmax statistics are combined over partitions in order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .config import ModelConfig
from .tensors import LM_HEAD, MTP_PREFIX, layer_prefix, mtp_layer_prefix

ROW_BLOCK = 128  # rows of one scale block; GEMV row groups are counted in these
K_BLOCK = 128  # reduction elements of one scale block
ONE_WAVE_TILES = 132  # the H200's SM count: one wave of GEMV tiles, one per SM
MAX_K_SLICES = 8  # more slices add partial traffic for little extra parallelism
STRIP_ROWS = 16  # rows of one warp's mma tile (gemv.cuh WARP_ROWS): row groups are whole strips
MAX_TILE_ROWS = 256  # gemv_tile.cuh: the rows one GEMV tile keeps in shared memory
HEAD_TILE_ROWS = ROW_BLOCK  # the head's row groups: one argmax candidate per this many vocabulary rows (ISA.md)
ATTENTION_PARTITIONS = 32  # x 4 KV heads = 128 attention tiles on the 27B
MERGE_COLS = 64  # ATTN_MERGE: a tile sums a query head's partitions over runs of this many of its columns (D76)
TILE_THREADS = 512  # threads of every tile (common.cuh; discrete/kernels.py check_shared_constants)
# The prompt path (issue 21): softmax statistics over key tiles of this many keys from position 0, combined
# online in key order (ops.attend_tiled); every linear in one k-slice (the prompt GEMM's promotion order).
PROMPT_KEY_TILE = 64
PROMPT_SLICES = 1
# Prompt program tiles (compiler/partition.py): a GEMM tile is PROMPT_TILE_ROWS weight rows (gate_up: half
# of them gate, half up) x PROMPT_TOKEN_TILE rows of the chunk, the prompt GEMM's block (D67); attention
# tiles are one query head over PROMPT_ATTN_ROWS query rows (two warpgroups of 64: D75), final
# norm tiles PROMPT_QUERY_TILE rows; conv tiles PROMPT_CONV_COLS channels; q/k/v tiles a head over PROMPT_QKV_ROWS rows.
PROMPT_TILE_ROWS = 128
PROMPT_TOKEN_TILE = 128
PROMPT_QUERY_TILE = 64
PROMPT_ATTN_ROWS = 128
PROMPT_GDN_SPLIT = 2  # D71: GDN_CHUNK tiles a value head (its value columns in halves): 96 tiles for the 27B
PROMPT_QKV_ROWS = 128  # D71: 28 tiles of 1,024 rows (a head each) left 104 of 132 SMs idle
PROMPT_CONV_COLS = 80  # D73: 128 tiles for the 27B, one wave (64: 160 tiles; at 512 a thread walked 1,024 rows alone)
PROMPT_PREPARE_BLOCKS = 8  # k-blocks of a staged prepare tile (MTP_PREPARE, GATED_PREPARE; the others take whole rows)
PROMPT_PREPARE_ROWS = 8  # rows of one prepare tile: one 8-token group of the operand slabs (D71)


def row_groups(segment_rows: tuple[int, ...], tile_rows: int, paired: bool = False) -> int:
    """The row groups (tiles per k-slice) of a GEMV whose weight segments have these output rows, cut
    into tile_rows (each segment on its own); paired: gate_up, whose row groups cover the same rows of
    both segments."""
    if paired:
        return -(-segment_rows[0] // tile_rows)
    return sum(-(-rows // tile_rows) for rows in segment_rows)


def k_slices(groups: int, k: int) -> int:
    """Slices of the reduction axis for a GEMV of `groups` row groups over `k` inputs, at most
    MAX_K_SLICES and the k-block count. Up to one wave of row groups: the largest S whose tiles still fit
    one wave (D14, measured: a second, partly filled wave costs more than the slices it adds). Beyond one
    wave: one slice, the tiles already fill the GPU (gate_up's 136 groups: S = 1 measured 3 % faster a
    step than S = 2 in both builds, one row or eight, D26; D17's kernels had chosen 2). Slices need not
    divide the k-blocks evenly (slice_blocks)."""
    limit = max(1, min(MAX_K_SLICES, -(-k // K_BLOCK)))
    if groups <= ONE_WAVE_TILES:
        return max(1, min(ONE_WAVE_TILES // groups, limit))
    return 1


def row_tile(segment_rows: tuple[int, ...], k: int, paired: bool = False) -> int:
    """Output rows of a GEMV's row groups: 128 (one scale block), except where 128-row groups are more
    than one wave but at most two (the 27B's gate_up: 136 groups for 132 SMs, a second wave of 4 tiles
    wherever a tile has an SM to itself, as at M = 8): then the fewest 16-row strips per group that fit one
    wave (gate_up: 144 rows, 121 groups; the kernels cut a group's passes at the scale blocks, D28).
    Never fewer than 128: each tile repeats the input's prologue, and D28 measured 64- and 32-row groups
    slower in every case."""
    groups = row_groups(segment_rows, ROW_BLOCK, paired)
    if ONE_WAVE_TILES < groups <= 2 * ONE_WAVE_TILES:
        strips = row_groups(segment_rows, STRIP_ROWS, paired)
        rows = STRIP_ROWS * -(-strips // ONE_WAVE_TILES)
        if rows <= MAX_TILE_ROWS and row_groups(segment_rows, rows, paired) <= ONE_WAVE_TILES:
            return rows
    return ROW_BLOCK


def slice_blocks(k: int, slices: int, s: int) -> tuple[int, int]:
    """k-blocks [first, last) of slice s."""
    blocks = -(-k // K_BLOCK)
    return s * blocks // slices, (s + 1) * blocks // slices


def widest_slice(k: int, slices: int) -> int:
    """Columns of the widest of the k-slices (what a tile's input rows take in shared memory)."""
    return max(b1 - b0 for b0, b1 in (slice_blocks(k, slices, s) for s in range(slices))) * K_BLOCK


def merge_tiles_per_head(head_dim: int, rows: int) -> int:
    """ATTN_MERGE's tiles a query head at an M-row pass: the fewest equal runs of MERGE_COLS columns that give
    a tile's threads one (row, column) element each (one tile a head where head_dim is no multiple of
    MERGE_COLS). A tile per head gave each thread of 24 tiles four elements' partition loads in turn at M = 8,
    the word 7.75 us against 2.71 at M = 1; four runs a head, 3.79 (D76). At M = 1 it stays one."""
    runs = head_dim // MERGE_COLS if head_dim % MERGE_COLS == 0 else 1
    need = -(-rows * head_dim // TILE_THREADS)
    return next((d for d in range(1, runs + 1) if runs % d == 0 and d >= need), runs)


def partition_bounds(length: int, p: int, partitions: int = ATTENTION_PARTITIONS) -> tuple[int, int]:
    return p * length // partitions, (p + 1) * length // partitions


@dataclass(frozen=True)
class GemvGroup:
    """Weights computed by one GEMV instruction, concatenated along the output rows."""

    name: str  # e.g. "layers.0.in_proj"
    weights: tuple[str, ...]
    segment_rows: tuple[int, ...]  # output rows of each weight
    k: int
    tile_rows: int  # rows of a row group (row_tile; qkv: one head, so its epilogue sees whole heads)
    paired: bool = False  # gate_up: a row group covers the same rows of gate and up

    @property
    def rows(self) -> int:
        return sum(self.segment_rows)

    @property
    def slices(self) -> int:
        return k_slices(row_groups(self.segment_rows, self.tile_rows, self.paired), self.k)


def gemv_groups(c: ModelConfig) -> list[GemvGroup]:
    """Every GEMV instruction of the target forward and the MTP head, in program order."""
    h, f = c.hidden_size, c.intermediate_size
    groups = []

    def group(name, weights, segment_rows, k, tile_rows=None, paired=False):
        rows = tile_rows or row_tile(tuple(segment_rows), k, paired)
        groups.append(GemvGroup(name, tuple(weights), tuple(segment_rows), k, rows, paired))

    for i in range(c.num_hidden_layers):
        p = layer_prefix(i)
        if i in c.attention_layers:
            a = p + "self_attn."
            group(f"layers.{i}.qkv", [a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"],
                  [c.q_proj_rows, c.kv_dim, c.kv_dim], h, tile_rows=c.head_dim)
            group(f"layers.{i}.o_proj", [a + "o_proj.weight"], [h], c.attn_out_dim)
        else:
            g = p + "linear_attn."
            nv = c.linear_num_value_heads
            group(f"layers.{i}.in_proj", [g + "in_proj_qkv.weight", g + "in_proj_z.weight", g + "in_proj_b.weight",
                                          g + "in_proj_a.weight"], [c.gdn_conv_dim, c.gdn_value_dim, nv, nv], h)
            group(f"layers.{i}.out_proj", [g + "out_proj.weight"], [h], c.gdn_value_dim)
        group(f"layers.{i}.gate_up", [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"], [f, f], h, paired=True)
        group(f"layers.{i}.down", [p + "mlp.down_proj.weight"], [h], f)
    group("lm_head", [LM_HEAD], [c.vocab_size], h, tile_rows=HEAD_TILE_ROWS)
    if c.mtp_num_hidden_layers:
        m = mtp_layer_prefix()
        group("mtp.fc", [MTP_PREFIX + "fc.weight"], [h], 2 * h)
        group("mtp.qkv", [m + "self_attn.q_proj.weight", m + "self_attn.k_proj.weight", m + "self_attn.v_proj.weight"],
              [c.q_proj_rows, c.kv_dim, c.kv_dim], h, tile_rows=c.head_dim)
        group("mtp.o_proj", [m + "self_attn.o_proj.weight"], [h], c.attn_out_dim)
        group("mtp.gate_up", [m + "mlp.gate_proj.weight", m + "mlp.up_proj.weight"], [f, f], h, paired=True)
        group("mtp.down", [m + "mlp.down_proj.weight"], [h], f)
    return groups


@functools.cache
def slices_by_weight(c: ModelConfig) -> dict[str, int]:
    return {w: g.slices for g in gemv_groups(c) for w in g.weights}
