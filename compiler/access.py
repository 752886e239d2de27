"""What each tile reads and writes: rectangles of buffers, the contract that the validator proves
ordered and that the interpreter enforces on every array access it makes.

Buffers are 2-D (rows x cols, row-major). Four conventions:
* dynamic rows (KV-cache rows at the current position, conv-ring rows modulo the ring) are declared
  as all rows: a conservative superset;
* the attention `scores` buffer is declared in partition units (column p stands for the keys of
  partition p of that row, whatever the length), since partitions of one row never overlap;
* conv-ring reads of past positions are tagged HIST and ring writes of the pass's positions NEW: in
  one step they never touch the same rows (the ring holds >= kernel - 1 + M rows), so the validator
  does not pair them within a step, only across steps;
* a prompt word's KV-cache appends (rows position + [r0, r1) of its tile's row span, declared as all rows)
  are tagged span(i) by the span: one instruction's spans never touch the same rows (the position is the
  word's), so the validator does not pair different spans of one instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import NO_BUFFER, PREPARE_OPS, Flag, Op, Program, operand_layout
from isa.opcodes import (
    CONTROL_BUFFER,
    CTRL_PENDING,
    CTRL_POSITION,
    CTRL_ROWS,
    CTRL_SPECULATIVE,
    CTRL_STEP,
    CTRL_TOKENS_IN,
    CTRL_TOKENS_OUT,
    MAX_ROWS,
    control_base,
)
from megakernel.model import plan

from .tiling import (gdn_chunk_columns, gemm_tile, main_tile, merge_tile, params, prepare_tile, qkv_tile, query_tile,
                     row_groups, tile_meaning)

HIST, NEW = "hist", "new"


@dataclass(frozen=True)
class Access:
    buffer: int
    r0: int
    r1: int
    c0: int
    c1: int
    write: bool
    tag: str | None = None


def _rows(program: Program, buf: int) -> int:
    return program.buffers[buf].rows


def _cols(program: Program, buf: int) -> int:
    return program.buffers[buf].cols


def read(buf, r0, r1, c0, c1, tag=None):
    return Access(buf, r0, r1, c0, c1, False, tag)


def write(buf, r0, r1, c0, c1, tag=None):
    return Access(buf, r0, r1, c0, c1, True, tag)


def position_read(w) -> Access:
    column = control_base(w.layer) + CTRL_POSITION
    return read(CONTROL_BUFFER, 0, 1, column, column + 1)


def tokens_read(w) -> Access:
    first = control_base(w.layer) + CTRL_TOKENS_IN
    return read(CONTROL_BUFFER, 0, 1, first, first + w.rows)


def accesses(program: Program, index: int, stage: int, tile: int) -> list[Access]:
    """The tile's declared accesses (decoded from the instruction's table: one source of truth)."""
    rows, starts = tile_rows(program, index, stage)
    return [Access(int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), bool(r[6]), tag_name(int(r[7])))
            for r in rows[starts[tile]:starts[tile + 1]]]


TAG_CODES = {None: 0, HIST: 1, NEW: 2}
_TAG_NAMES = {v: k for k, v in TAG_CODES.items()}
SPAN_CODE = 16  # span(i)'s code: SPAN_CODE + i


def span(i: int) -> str:
    return f"span{i}"


def tag_code(tag: str | None) -> int:
    return SPAN_CODE + int(tag[4:]) if tag is not None and tag.startswith("span") else TAG_CODES[tag]


def tag_name(code: int) -> str | None:
    return span(code - SPAN_CODE) if code >= SPAN_CODE else _TAG_NAMES[code]


_TABLES: list[tuple[Program, dict]] = []  # a few recent programs' tables


def tile_rows(program: Program, index: int, stage: int) -> tuple[np.ndarray, np.ndarray]:
    """Every tile's accesses as int64 rows [tile, buffer, r0, r1, c0, c1, write, tag] in tile order,
    and the first row of each tile (starts[t]..starts[t + 1])."""
    global _TABLES
    cache = next((c for p, c in _TABLES if p is program), None)
    if cache is None:
        cache = {}
        _TABLES = [(program, cache)] + _TABLES[:3]
    key = (index, stage)
    if key not in cache:
        w = program.words[index]
        if w.opcode in _VECTOR_RULES:
            cache[key] = _VECTOR_RULES[w.opcode](program, w, stage)
        else:
            rows, starts = [], [0]
            for t in range(w.arrival_count if stage else w.tiles):
                rows += [(t, a.buffer, a.r0, a.r1, a.c0, a.c1, a.write, tag_code(a.tag))
                         for a in _RULES[w.opcode](program, w, stage, t)]
                starts.append(len(rows))
            cache[key] = (np.array(rows, np.int64).reshape(-1, 8), np.array(starts, np.int64))
    return cache[key]


def _gemv_table(program, w, stage):
    """The GEMV family's accesses (not QKV, whose epilogue varies by head), for all tiles at once."""
    m, op, S = w.rows, w.opcode, w.k_slices
    groups = row_groups(program, w)
    r0 = np.array([g.r0 for g in groups], np.int64)
    r1 = np.array([g.r1 for g in groups], np.int64)
    gi = np.arange(len(groups), dtype=np.int64)
    columns = []  # one [tiles, 8] array per access kind, each tile's accesses in this order

    def add(tile, buf, a0, a1, b0, b1, is_write):
        n = len(tile)
        columns.append(np.stack([tile, np.full(n, buf), np.broadcast_to(a0, n), np.broadcast_to(a1, n),
                                 np.broadcast_to(b0, n), np.broadcast_to(b1, n), np.full(n, int(is_write)),
                                 np.zeros(n, np.int64)], axis=1))

    if stage == 0:
        tiles = np.arange(len(groups) * S, dtype=np.int64)
        s, g = tiles // len(groups), tiles % len(groups)
        bounds = np.array([plan.slice_blocks(w.k, S, k) for k in range(S)], np.int64) * plan.K_BLOCK
        k0, k1 = bounds[s, 0], bounds[s, 1]
        if op in (Op.NORM_GEMV, Op.NORM_GATE_UP, Op.NORM_HEAD):
            add(tiles, w.buf_in, 0, m, 0, w.k, False)  # the RMSNorm prologue reads the whole residual
        elif op == Op.MTP_FC:  # both halves normalised whole: the tokens' embeddings and the hidden rows
            first = control_base(w.layer) + CTRL_TOKENS_IN
            add(tiles, CONTROL_BUFFER, 0, 1, first, first + m, False)
            add(tiles, w.buf_in, MAX_ROWS - m, MAX_ROWS, 0, w.k // 2, False)
        else:
            add(tiles, w.buf_in, 0, m, k0, k1, False)
        if op == Op.NORM_HEAD and w.buf_aux1 != NO_BUFFER:  # main tile 0 stores the normalised input,
            zero = (tiles == 0).astype(np.int64)  # right-aligned: the pass's last row is always row 7
            add(tiles, w.buf_aux1, (MAX_ROWS - m) * zero, MAX_ROWS * zero, 0, w.k * zero, True)
        if op == Op.NORM_HEAD and w.flags & Flag.WORKING_VOCAB:  # the head rows are a session buffer
            add(tiles, w.buf_aux2, r0[g], r1[g], k0, k1, False)
        if S > 1:
            if op == Op.GEMV_RESIDUAL:  # each slice asks for its group's residual before it arrives (D59)
                add(tiles, w.buf_aux0, 0, m, r0[g], r1[g], False)
            add(tiles, w.buf_scratch, s * m, (s + 1) * m, r0[g], r1[g], True)
            if op == Op.NORM_GATE_UP:
                add(tiles, w.buf_scratch, s * m, (s + 1) * m, w.n + r0[g], w.n + r1[g], True)
            return _interleave(columns, len(tiles))
    else:
        tiles, g = gi, gi
        add(tiles, w.buf_scratch, 0, S * m, r0[g], r1[g], False)
        if op == Op.NORM_GATE_UP:
            add(tiles, w.buf_scratch, 0, S * m, w.n + r0[g], w.n + r1[g], False)
    if op in (Op.NORM_GEMV, Op.NORM_GATE_UP, Op.MTP_FC):
        add(tiles, w.buf_out, 0, m, r0[g], r1[g], True)
    elif op == Op.GEMV_RESIDUAL:
        add(tiles, w.buf_aux0, 0, m, r0[g], r1[g], False)
        add(tiles, w.buf_out, 0, m, r0[g], r1[g], True)
    else:  # NORM_HEAD
        add(tiles, w.buf_out, 0, m, 2 * g, 2 * g + 2, True)
        if w.flags & Flag.DEBUG_LOGITS:
            add(tiles, w.buf_aux0, 0, m, r0[g], r1[g], True)
    return _interleave(columns, len(tiles))


def _interleave(columns, tiles):
    """Per-kind arrays [tiles, 8] -> rows in tile order, and each tile's first row."""
    rows = np.stack(columns, axis=1).reshape(-1, 8)
    return rows, np.arange(tiles + 1, dtype=np.int64) * len(columns)


def _qkv(program, w, stage, tile):
    """NORM_GEMV_QKV, tile by tile: its epilogue differs per head and per q/k/v segment."""
    m = w.rows
    if stage == 0:
        s, rg = main_tile(program, w, tile)
        out = [read(w.buf_in, 0, m, 0, w.k)]  # the RMSNorm prologue reads the whole residual
        if w.k_slices > 1:
            return out + [write(w.buf_scratch, s * m, (s + 1) * m, rg.r0, rg.r1)]
    else:
        rg = row_groups(program, w)[tile]
        out = [read(w.buf_scratch, 0, w.k_slices * m, rg.r0, rg.r1)]
    hd = params(w)["head_dim"]
    lr0, _ = rg.local()
    if rg.segment == 0:
        head, half = divmod(lr0, 2 * hd)
        if half == 0:  # query half: q_norm, RoPE
            return out + [position_read(w), write(w.buf_out, 0, m, head * hd, (head + 1) * hd)]
        return out + [write(w.buf_aux0, 0, m, head * hd, (head + 1) * hd)]  # output-gate half
    kv_head = lr0 // hd
    cache = w.buf_aux1 if rg.segment == 1 else w.buf_aux2
    return out + [position_read(w), write(cache, 0, _rows(program, cache), kv_head * hd, (kv_head + 1) * hd)]


def _embed(program, w, stage, tile):
    c0, c1 = tile_meaning(program, w, stage, tile)["cols"]
    return [tokens_read(w), write(w.buf_out, 0, w.rows, c0, c1)]


def _gdn_core(program, w, stage, tile):
    p, j = params(w), tile
    m, dk, dv = w.rows, p["key_dim"], p["value_dim"]
    per_key = p["value_heads"] // p["key_heads"]
    cols = gdn_head_columns(p, j)
    q, k, v, z = cols["q"], cols["k"], cols["v"], cols["z"]  # z: the gated norm's gate
    b_col, a_col = cols["b"][0], cols["a"][0]
    ring, ring_rows, gates, hv = w.buf_aux1, p["ring"], w.buf_aux2, p["value_heads"]
    base = control_base(w.layer)
    out = [position_read(w), read(CONTROL_BUFFER, 0, 1, base + CTRL_PENDING, base + CTRL_SPECULATIVE + 1)]
    out += [read(w.buf_in, 0, m, *cols) for cols in (q, k, v, z)]
    out += [read(w.buf_in, 0, m, b_col, b_col + 1), read(w.buf_in, 0, m, a_col, a_col + 1)]
    out += [read(ring, 0, ring_rows, *cols, tag=HIST) for cols in (q, k, v)]
    out.append(write(ring, 0, ring_rows, *v, tag=NEW))
    if j % per_key == 0:  # one tile per key head writes its q/k ring channels
        out += [write(ring, 0, ring_rows, *q, tag=NEW), write(ring, 0, ring_rows, *k, tag=NEW)]
    # the gates of pending rows (re-fold), and of this pass's rows when it is speculative
    out += [read(gates, 0, ring_rows, col, col + 1, tag=HIST) for col in (j, hv + j)]
    out += [write(gates, 0, ring_rows, col, col + 1, tag=NEW) for col in (j, hv + j)]
    out += [read(w.buf_aux0, j, j + 1, 0, dv * dk), write(w.buf_aux0, j, j + 1, 0, dv * dk)]
    out.append(write(w.buf_out, 0, m, j * dv, (j + 1) * dv))
    return out


def _group_rows(p, kv_head, m):
    group = p["heads"] // p["kv_heads"]
    return kv_head * group * m, (kv_head + 1) * group * m  # rows h * M + m of the heads of this KV head


def _attn_scores(program, w, stage, tile):
    p, t = params(w), tile_meaning(program, w, stage, tile)
    kv, part, m, hd = t["kv_head"], t["partition"], w.rows, p["head_dim"]
    group = p["heads"] // p["kv_heads"]
    r0, r1 = _group_rows(p, kv, m)
    return [position_read(w), read(w.buf_in, 0, m, kv * group * hd, (kv + 1) * group * hd),
            read(w.buf_aux0, 0, _rows(program, w.buf_aux0), kv * hd, (kv + 1) * hd),
            write(w.buf_out, r0, r1, part, part + 1),  # scores, in partition units
            write(w.buf_aux1, r0, r1, 2 * part, 2 * part + 2)]


def _attn_pv(program, w, stage, tile):
    p, t = params(w), tile_meaning(program, w, stage, tile)
    kv, part, m, hd = t["kv_head"], t["partition"], w.rows, p["head_dim"]
    r0, r1 = _group_rows(p, kv, m)
    return [position_read(w), read(w.buf_in, r0, r1, part, part + 1),
            read(w.buf_aux1, r0, r1, 0, _cols(program, w.buf_aux1)),
            read(w.buf_aux0, 0, _rows(program, w.buf_aux0), kv * hd, (kv + 1) * hd),
            write(w.buf_out, r0, r1, part * hd, (part + 1) * hd)]


def _attn_merge(program, w, stage, tile):
    (h, c0, c1), m, hd = merge_tile(w, tile), w.rows, params(w)["head_dim"]
    return [read(w.buf_in, h * m, (h + 1) * m, 0, _cols(program, w.buf_in)),
            read(w.buf_aux0, 0, m, h * hd + c0, h * hd + c1), write(w.buf_out, 0, m, h * hd + c0, h * hd + c1)]


def _argmax(program, w, stage, tile):
    out = control_base(w.layer) + CTRL_TOKENS_OUT + tile
    ids = [read(w.buf_aux0, 0, 1, 0, _cols(program, w.buf_aux0))] if w.flags & Flag.WORKING_VOCAB else []
    return [read(w.buf_in, tile, tile + 1, 0, _cols(program, w.buf_in)), *ids,
            write(CONTROL_BUFFER, 0, 1, out, out + 1)]


def _handoff(program, w, stage, tile):
    base = control_base(w.layer)
    return [read(CONTROL_BUFFER, 0, 1, base + CTRL_TOKENS_OUT, base + CTRL_TOKENS_OUT + w.rows),
            write(CONTROL_BUFFER, 0, 1, base + CTRL_STEP, base + CTRL_POSITION + 1),
            write(CONTROL_BUFFER, 0, 1, base + CTRL_TOKENS_IN, base + CTRL_TOKENS_IN + 1)]


# --- the prompt program: rows [0, chunk_rows) declared, the chunk's rows r <= chunk_rows run -------------------
def chunk_read(w) -> Access:
    """The chunk's position and rows (CTRL_POSITION, CTRL_ROWS) in the word's control lane."""
    base = control_base(w.layer)
    return read(CONTROL_BUFFER, 0, 1, base + CTRL_POSITION, base + CTRL_ROWS + 1)


def _prompt_embed(program, w, stage, tile):
    c0, c1 = tile_meaning(program, w, stage, tile)["cols"]
    return [chunk_read(w), read(w.buf_in, 0, 1, 0, w.chunk_rows), write(w.buf_out, 0, w.chunk_rows, c0, c1)]


def _slab_rows(w, token_tile: int, b0: int, b1: int) -> tuple[int, int]:
    """Operand slab rows of one token tile's k-blocks [b0, b1) (isa/operand_layout.py)."""
    blocks = (w.n if w.opcode in PREPARE_OPS else w.k) // plan.K_BLOCK
    return token_tile * blocks + b0, token_tile * blocks + b1


def _prepare(program, w, stage, tile):
    t, (r0, r1), (b0, b1) = prepare_tile(w, tile)
    out, t0, t1 = [chunk_read(w)], r0, min(r1, w.chunk_rows)
    if t0 >= t1:  # rows past the chunk's capacity: zeros written, nothing read
        pass
    elif w.opcode == Op.NORM_PREPARE:  # the norm reads whole rows
        out.append(read(w.buf_in, t0, t1, 0, w.n))
    elif w.opcode == Op.MTP_PREPARE:  # the tokens' embeddings and the target's hidden rows, each normalised whole
        out += [read(w.buf_aux0, 0, 1, t0, t1), read(w.buf_in, t0, t1, 0, w.n // 2)]
    elif w.opcode == Op.GATED_PREPARE:  # o of the tile's whole value heads and their gate rows z
        z = params(w)["z_column"]
        out += [read(w.buf_in, t0, t1, b0 * plan.K_BLOCK, b1 * plan.K_BLOCK),
                read(w.buf_aux0, t0, t1, z + b0 * plan.K_BLOCK, z + b1 * plan.K_BLOCK)]
    else:
        out.append(read(w.buf_in, t0, t1, b0 * plan.K_BLOCK, b1 * plan.K_BLOCK))
    rows = _slab_rows(w, t, b0, b1)
    t0 = t * plan.PROMPT_TOKEN_TILE
    values, unscales = operand_layout.group_columns(r0 - t0, r1 - t0)
    return out + [write(buf, *rows, *cols) for buf in (w.buf_out, w.buf_aux1) if buf != NO_BUFFER
                  for cols in (values, unscales)]


def _gemm(program, w, stage, tile):
    rg, (t0, t1) = gemm_tile(program, w, tile)
    rows = _slab_rows(w, t0 // plan.PROMPT_TOKEN_TILE, 0, w.k // plan.K_BLOCK)
    out = [chunk_read(w)] + [read(buf, *rows, 0, _cols(program, buf)) for buf in (w.buf_in, w.buf_aux1)
                             if buf != NO_BUFFER]
    if w.opcode == Op.GEMM_RESIDUAL:
        out.append(read(w.buf_aux0, t0, t1, rg.r0, rg.r1))
    return out + [write(w.buf_out, t0, t1, rg.r0, rg.r1)]


def _prompt_qkv(program, w, stage, tile):
    p, (head, (r0, r1)) = params(w), qkv_tile(w, tile)
    hd = p["head_dim"]
    if head < p["heads"]:  # query head: [query | gate] in, q and gate out
        return [chunk_read(w), read(w.buf_in, r0, r1, 2 * head * hd, 2 * (head + 1) * hd),
                write(w.buf_out, r0, r1, head * hd, (head + 1) * hd),
                write(w.buf_aux0, r0, r1, head * hd, (head + 1) * hd)]
    kv, q_rows, kv_dim = head - p["heads"], 2 * p["heads"] * hd, p["kv_heads"] * hd
    cols, at = (kv * hd, (kv + 1) * hd), span(r0 // w.tile_rows)
    return [chunk_read(w), read(w.buf_in, r0, r1, q_rows + cols[0], q_rows + cols[1]),
            read(w.buf_in, r0, r1, q_rows + kv_dim + cols[0], q_rows + kv_dim + cols[1]),
            write(w.buf_aux1, 0, _rows(program, w.buf_aux1), *cols, tag=at),
            write(w.buf_aux2, 0, _rows(program, w.buf_aux2), *cols, tag=at)]


def _attn_causal(program, w, stage, tile):
    p = params(w)
    h, (r0, r1) = query_tile(w, tile)
    hd, group = p["head_dim"], p["heads"] // p["kv_heads"]
    kv, heads = h // group, (h * hd, (h + 1) * hd)
    group_queries = (kv * group * hd, (kv + 1) * group * hd)  # the interpreter's (the reference's batch shape)
    return [chunk_read(w), read(w.buf_in, r0, r1, *group_queries), read(w.buf_aux2, r0, r1, *heads),
            read(w.buf_aux0, 0, _rows(program, w.buf_aux0), kv * hd, (kv + 1) * hd),
            read(w.buf_aux1, 0, _rows(program, w.buf_aux1), kv * hd, (kv + 1) * hd),
            write(w.buf_out, r0, r1, *heads)]


def _prompt_conv(program, w, stage, tile):
    c0, c1 = tile_meaning(program, w, stage, tile)["cols"]
    ring = _rows(program, w.buf_aux1)
    return [chunk_read(w), read(w.buf_in, 0, w.chunk_rows, c0, c1), read(w.buf_aux1, 0, ring, c0, c1, tag=HIST),
            write(w.buf_aux1, 0, ring, c0, c1, tag=NEW), write(w.buf_out, 0, w.chunk_rows, c0, c1)]


def gdn_head_columns(p, j: int) -> dict[str, tuple[int, int]]:
    """Value head j's columns of in_proj's output [q | k | v | z | b | a] (GDN_CORE's buf_in; GDN_CHUNK's q, k, v
    of the convolved rows, which keep those columns, and z, b, a of in_proj's): q and k its key head's."""
    dk, dv, hv = p["key_dim"], p["value_dim"], p["value_heads"]
    key_dim, kh = p["key_heads"] * dk, j // (hv // p["key_heads"])
    conv_dim = 2 * key_dim + hv * dv  # in_proj's output: [q | k | v | z | b | a]
    return {"q": (kh * dk, (kh + 1) * dk), "k": (key_dim + kh * dk, key_dim + (kh + 1) * dk),
            "v": (2 * key_dim + j * dv, 2 * key_dim + (j + 1) * dv), "z": (conv_dim + j * dv, conv_dim + (j + 1) * dv),
            "b": (conv_dim + hv * dv + j, conv_dim + hv * dv + j + 1),
            "a": (conv_dim + hv * dv + hv + j, conv_dim + hv * dv + hv + j + 1)}


def _gdn_chunk(program, w, stage, tile):
    p, R, (v0, v1) = params(w), w.chunk_rows, gdn_chunk_columns(w, tile)
    j = tile // plan.PROMPT_GDN_SPLIT
    cols, dk, dv = gdn_head_columns(p, j), p["key_dim"], p["value_dim"]
    if v1 <= v0:  # no value columns: the head's dv fits the tiles before this one
        return [chunk_read(w)]
    v = (cols["v"][0] + v0, cols["v"][0] + v1)
    return [chunk_read(w), read(w.buf_in, 0, R, *cols["q"]), read(w.buf_in, 0, R, *cols["k"]), read(w.buf_in, 0, R, *v),
            *(read(w.buf_aux1, 0, R, *cols[n]) for n in "ba"),
            read(w.buf_aux0, j, j + 1, v0 * dk, v1 * dk), write(w.buf_aux0, j, j + 1, v0 * dk, v1 * dk),
            write(w.buf_out, 0, R, j * dv + v0, j * dv + v1)]


def _prompt_norm(program, w, stage, tile):
    r0, r1 = tile_meaning(program, w, stage, tile)["rows"]
    return [chunk_read(w), read(w.buf_in, r0, r1, 0, w.n), write(w.buf_out, r0, r1, 0, w.n)]


def _prompt_advance(program, w, stage, tile):
    position = control_base(w.layer) + CTRL_POSITION
    return [chunk_read(w), write(CONTROL_BUFFER, 0, 1, position, position + 1)]


_VECTOR_RULES = {op: _gemv_table for op in (Op.NORM_GEMV, Op.NORM_GATE_UP, Op.GEMV_RESIDUAL, Op.NORM_HEAD,
                                            Op.MTP_FC)}

_RULES = {
    Op.EMBED: _embed, Op.NORM_GEMV_QKV: _qkv, Op.GDN_CORE: _gdn_core,
    Op.ATTN_SCORES: _attn_scores, Op.ATTN_PV: _attn_pv, Op.ATTN_MERGE: _attn_merge, Op.ARGMAX: _argmax,
    Op.HANDOFF: _handoff,
    Op.PROMPT_EMBED: _prompt_embed, Op.NORM_PREPARE: _prepare, Op.PREPARE: _prepare, Op.MTP_PREPARE: _prepare,
    Op.GATED_PREPARE: _prepare,
    Op.GEMM: _gemm, Op.GEMM_GATE_UP: _gemm, Op.GEMM_RESIDUAL: _gemm, Op.PROMPT_QKV: _prompt_qkv,
    Op.ATTN_CAUSAL: _attn_causal, Op.PROMPT_CONV: _prompt_conv, Op.GDN_CHUNK: _gdn_chunk,
    Op.PROMPT_NORM: _prompt_norm, Op.PROMPT_ADVANCE: _prompt_advance,
}
