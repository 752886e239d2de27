"""How an instruction's work is cut into tiles and tiles into blocks (the ISA's partitioning rules).

Shared by the compiler, the validator, the interpreter and (as ISA.md text) the CUDA decoder:

* every word's tiles 0..T-1 go to the G blocks in contiguous ranges: block b runs
  [b * T // G, (b + 1) * T // G), in order;
* GEMV ops: row groups are `tile_rows` output rows of one weight segment (segments concatenated in
  weight-table order; NORM_GATE_UP's row groups index the intermediate rows and cover gate and up);
  tile t computes k-slice s = t // RG of row group t % RG (slice-major); with S > 1 the group's
  finish (stage 1, run by whichever of its S slice tiles lands last) adds its S partials in order and
  applies the epilogue;
* prompt GEMMs (GEMM_OPS): the same row groups, one k-slice, times token tiles of plan.PROMPT_TOKEN_TILE
  rows of the chunk: tile t computes row group t // TT over token rows tile t % TT (TT token tiles), so
  consecutive tiles share their weights; their prepare words (PREPARE_OPS): token tile by token tile,
  tile_rows k-blocks a tile;
* other ops: see `tile_meaning`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from isa import GEMM_OPS, GEMV_OPS, PREPARE_OPS, Op, Program, Word
from isa.opcodes import PARAMS
from isa.word import bits_f32
from megakernel.model import plan
from megakernel.model.config import DEVICE_MAX_VALUE_HEAD_DIM

PAIRED_OPS = (Op.NORM_GATE_UP, Op.GEMM_GATE_UP)  # row groups over gate and up's shared rows


@dataclass(frozen=True)
class RowGroup:
    index: int
    r0: int  # first output row (GATE_UP: intermediate row)
    r1: int
    segment: int  # weight segment (index into the word's weights)
    seg_r0: int  # the segment's first output row

    def local(self) -> tuple[int, int]:
        """Rows within the segment's weight."""
        return self.r0 - self.seg_r0, self.r1 - self.seg_r0


def block_range(tiles: int, sms: int, block: int) -> range:
    return range(block * tiles // sms, (block + 1) * tiles // sms)


@functools.lru_cache(maxsize=4096)
def _decoded(opcode: Op, raw: tuple[int, ...]) -> dict[str, float | int]:
    out = {}
    for i, (name, kind) in enumerate(PARAMS[opcode]):
        value = raw[i] if i < len(raw) else 0
        out[name] = bits_f32(value) if kind == "f" else value
    return out


def params(word: Word) -> dict[str, float | int]:
    """The word's p0.. as named values (floats decoded). Treat the result as read-only."""
    return _decoded(word.opcode, word.params)


@functools.cache
def segment_row_groups(segment_rows: tuple[int, ...], tile_rows: int, shared: bool) -> tuple[RowGroup, ...]:
    """Row groups of weight segments with these output rows; shared: NORM_GATE_UP's."""
    groups = []
    if shared:  # NORM_GATE_UP: row groups over the intermediate rows, covering both segments
        for r0 in range(0, segment_rows[0], tile_rows):
            groups.append(RowGroup(len(groups), r0, min(segment_rows[0], r0 + tile_rows), 0, 0))
        return tuple(groups)
    start = 0
    for seg, rows in enumerate(segment_rows):
        for r0 in range(0, rows, tile_rows):
            groups.append(RowGroup(len(groups), start + r0, start + min(rows, r0 + tile_rows), seg, start))
        start += rows
    return tuple(groups)


def single_segment(word: Word) -> bool:
    """One segment of `n` rows: gate_up (gate and up share the intermediate rows), a single weight,
    or none (NORM_HEAD over the session's working-vocabulary rows, Flag.WORKING_VOCAB)."""
    return word.opcode in PAIRED_OPS or word.weight_count <= 1


_BY_WORD: dict[int, tuple[Word, tuple, tuple[RowGroup, ...]]] = {}  # id(word) -> (word, key, groups)


def row_groups(program: Program, word: Word) -> tuple[RowGroup, ...]:
    key = (word.weight_first, word.weight_count, word.tile_rows, word.opcode, word.n)
    cached = _BY_WORD.get(id(word))
    if cached is None or cached[0] is not word or cached[1] != key:
        if single_segment(word):  # n is the segment's rows (gemv_tile.cuh reads no weight record either)
            rows = (word.n,)
        else:
            rows = tuple(program.weights[word.weight_first + i].rows for i in range(word.weight_count))
        cached = (word, key, segment_row_groups(rows, word.tile_rows, word.opcode in PAIRED_OPS))
        if len(_BY_WORD) > 100_000:  # words of programs long gone
            _BY_WORD.clear()
        _BY_WORD[id(word)] = cached
    return cached[2]


def main_tile(program: Program, word: Word, tile: int) -> tuple[int, RowGroup]:
    """GEMV tile -> (k-slice, row group)."""
    groups = row_groups(program, word)
    return tile // len(groups), groups[tile % len(groups)]


def token_tiles(word: Word) -> int:
    return -(-word.chunk_rows // plan.PROMPT_TOKEN_TILE)


def gemm_tile(program: Program, word: Word, tile: int) -> tuple[RowGroup, tuple[int, int]]:
    """Prompt GEMM tile -> (row group, token rows [t0, t1) of the chunk)."""
    group, token_tile = divmod(tile, token_tiles(word))
    t0 = token_tile * plan.PROMPT_TOKEN_TILE
    return row_groups(program, word)[group], (t0, min(word.chunk_rows, t0 + plan.PROMPT_TOKEN_TILE))


def prepare_tiles(rows: int, n: int, blocks_per_tile: int) -> int:
    """A prepare word's tiles: every PROMPT_PREPARE_ROWS rows of each token tile (past the chunk's rows too:
    they write the zeros the GEMM reads) x its columns' groups of blocks_per_tile k-blocks."""
    row_tiles = -(-rows // plan.PROMPT_TOKEN_TILE) * (plan.PROMPT_TOKEN_TILE // plan.PROMPT_PREPARE_ROWS)
    return row_tiles * -(-(n // plan.K_BLOCK) // blocks_per_tile)


def prepare_tile(word: Word, tile: int) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """Prepare tile -> (token tile t, its rows [r0, r1) of the chunk, k-blocks [b0, b1)): tiles row group by
    row group (PROMPT_PREPARE_ROWS rows, one 8-token group of the slabs: isa/operand_layout.py), tile_rows
    k-blocks each; r1 may pass the chunk's rows (those rows are zero in the slabs)."""
    blocks = word.n // plan.K_BLOCK
    row_tile, g = divmod(tile, -(-blocks // word.tile_rows))
    r0 = row_tile * plan.PROMPT_PREPARE_ROWS
    return r0 // plan.PROMPT_TOKEN_TILE, (r0, r0 + plan.PROMPT_PREPARE_ROWS), (g * word.tile_rows,
                                                                             min(blocks, (g + 1) * word.tile_rows))


def gdn_chunk_columns(word: Word, tile: int) -> tuple[int, int]:
    """GDN_CHUNK tile -> its value columns [c0, c1) of its head (empty past the head's dv)."""
    part = DEVICE_MAX_VALUE_HEAD_DIM // plan.PROMPT_GDN_SPLIT  # prompt_gdn.cuh CHUNK_COLS
    dv = params(word)["value_dim"]
    c0 = min(dv, (tile % plan.PROMPT_GDN_SPLIT) * part)
    return c0, min(dv, c0 + part)


def merge_tile(word: Word, tile: int) -> tuple[int, int, int]:
    """ATTN_MERGE tile -> (query head, first column, end column) of the head's head_dim columns (the word's
    tiles a head: plan.merge_tiles_per_head)."""
    p = params(word)
    hd, per_head = p["head_dim"], word.tiles // p["heads"]
    head, part = divmod(tile, per_head)
    return head, part * hd // per_head, (part + 1) * hd // per_head


def qkv_tile(word: Word, tile: int) -> tuple[int, tuple[int, int]]:
    """PROMPT_QKV tile -> (head h: query heads, then KV heads; its rows [r0, r1) of the chunk)."""
    spans = -(-word.chunk_rows // word.tile_rows)
    head, span = divmod(tile, spans)
    return head, (span * word.tile_rows, min(word.chunk_rows, (span + 1) * word.tile_rows))


def query_tile(word: Word, tile: int) -> tuple[int, tuple[int, int]]:
    """ATTN_CAUSAL tile -> (query head, query rows [r0, r1) of the chunk): the last rows' tiles (the most keys)
    first, the heads side by side, so that the longest tiles start in the first wave (prompt_attention.cuh)."""
    from_end, head = divmod(tile, params(word)["heads"])
    q = -(-word.chunk_rows // word.tile_rows) - 1 - from_end
    return head, (q * word.tile_rows, min(word.chunk_rows, (q + 1) * word.tile_rows))


def tile_meaning(program: Program, word: Word, stage: int, tile: int) -> dict:
    """What a tile covers, for listings, the interpreter and the access rules."""
    op, p = word.opcode, params(word)
    if op in GEMM_OPS:
        rg, tokens = gemm_tile(program, word, tile)
        return {"row_group": rg, "tokens": tokens}
    if op in PREPARE_OPS:
        t, rows, blocks = prepare_tile(word, tile)
        return {"token_tile": t, "rows": rows, "blocks": blocks}
    if op == Op.ATTN_CAUSAL:
        head, rows = query_tile(word, tile)
        return {"head": head, "rows": rows}
    if op == Op.PROMPT_QKV:  # query heads, then KV heads (k and v of one head), each over row spans of tile_rows
        head, rows = qkv_tile(word, tile)
        return {"head": head, "rows": rows} if head < p["heads"] else {"kv_head": head - p["heads"], "rows": rows}
    if op in (Op.PROMPT_EMBED, Op.PROMPT_CONV):
        return {"cols": (tile * word.tile_rows, min(word.n, (tile + 1) * word.tile_rows))}
    if op == Op.GDN_CHUNK:  # value head tile / split, its value columns' part tile mod split
        return {"head": tile // plan.PROMPT_GDN_SPLIT, "cols": gdn_chunk_columns(word, tile)}
    if op == Op.PROMPT_NORM:
        return {"rows": (tile * word.tile_rows, min(word.chunk_rows, (tile + 1) * word.tile_rows))}
    if op in GEMV_OPS:
        if stage == 1:
            return {"row_group": row_groups(program, word)[tile]}
        s, rg = main_tile(program, word, tile)
        return {"slice": s, "row_group": rg}
    if op == Op.EMBED:
        return {"cols": (tile * word.tile_rows, min(word.n, (tile + 1) * word.tile_rows))}
    if op == Op.GDN_CORE:
        return {"head": tile}
    if op in (Op.ATTN_SCORES, Op.ATTN_PV):
        kv_head, part = divmod(tile, p["partitions"])
        return {"kv_head": kv_head, "partition": part}
    if op == Op.ATTN_MERGE:
        head, c0, c1 = merge_tile(word, tile)
        return {"head": head, "cols": (c0, c1)}
    if op == Op.ARGMAX:
        return {"row": tile}
    return {}
