"""The instruction word: 32 little-endian u32 (128 bytes), fields at fixed bit ranges.

`FIELDS` is the single definition of the layout: encode, decode, the listing and docs/ISA.md all
read it. u32 index 0 is the first four bytes of the word.

    u32  bits   field            meaning
    0    0-7    opcode           isa.opcodes.Op
    0    8-15   flags            isa.opcodes.Flag
    0    16-23  layer            decoder layer, 0xFF for none (MTP instructions: the MTP layer is 0xFE)
    0    24-31  rows             M, the rows (tokens) of the pass, 1..8 (prompt words: 0, see chunk_rows)
    1    0-31   n                output features (GEMV: rows of the fused weight; other ops: see ISA.md)
    2    0-31   k                reduction length (GEMV) or the op's inner size
    3    0-15   tile_rows        output rows per tile (GEMV), or the op's tile width
    3    16-31  k_slices         GEMV k-slices S (1 = no split-K)
    4    0-31   tiles            tiles
    5    0-15   chunk_rows       prompt words: the most rows of a chunk (the rows run are CTRL_ROWS); else 0
    5    16-31  (reserved, 0)
    6    0-15   weight_first     first weight-table entry
    6    16-31  weight_count     weight-table entries, concatenated along the output rows
    7    0-15   buf_in           buffer ids (0xFFFF: none; buffer 0 is the control block)
    7    16-31  buf_out
    8    0-15   buf_aux0
    8    16-31  buf_aux1
    9    0-15   buf_aux2
    9    16-31  buf_scratch      split-K partials [S, M, n] fp32
    10   0-15   signal_base      first completion counter
    10   16-31  signal_count     completion counters (output slices)
    11   0-31   signal_expected  arrivals on each completion counter per step
    12   0-15   arrival_base     first split-K arrival counter (one per row group, S arrivals per step)
    12   16-31  arrival_count    split-K row groups (S > 1), else 0
    13+2w 0-15  wait_w_base      wait slot w = 0..3: first counter
    13+2w 16-23 wait_w_count     counters in the range
    13+2w 24-27 wait_w_mode      isa.opcodes.WaitMode
    13+2w 28-30 wait_w_lag       0: this step, 1: the previous step
    14+2w 0-31  wait_w_expected  arrivals per counter per step
    21..31 0-31 p0 .. p10        opcode parameters (ISA.md, per opcode)

A wait on a counter with `expected` E and lag L, in the block's step t (0-based since launch), is
satisfied when the counter reaches E * (t + 1 - L): completion counters only grow, nothing is reset per
step. A split-K GEMV's row group is finished by the slice tile that lands last on its arrival counter, which
that tile zeroes; nothing waits on an arrival counter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from .opcodes import NO_BUFFER, NO_LAYER, Op, WaitMode

WORD_U32 = 32
WORD_BYTES = 4 * WORD_U32
WAIT_SLOTS = 4
PARAM_SLOTS = 11
PARAM_BASE = 21


@dataclass(frozen=True)
class Wait:
    base: int
    count: int
    mode: WaitMode
    expected: int
    lag: int = 0

    def counters(self) -> range:
        return range(self.base, self.base + self.count)


@dataclass
class Word:
    opcode: Op
    flags: int = 0
    layer: int = NO_LAYER
    rows: int = 1
    n: int = 0
    k: int = 0
    tile_rows: int = 0
    k_slices: int = 1
    tiles: int = 0
    chunk_rows: int = 0
    weight_first: int = 0
    weight_count: int = 0
    buf_in: int = NO_BUFFER
    buf_out: int = NO_BUFFER
    buf_aux0: int = NO_BUFFER
    buf_aux1: int = NO_BUFFER
    buf_aux2: int = NO_BUFFER
    buf_scratch: int = NO_BUFFER
    signal_base: int = 0
    signal_count: int = 0
    signal_expected: int = 0
    arrival_base: int = 0
    arrival_count: int = 0
    waits: tuple[Wait, ...] = ()
    params: tuple[int, ...] = field(default_factory=tuple)


BUFFER_ROLES = ("in", "out", "aux0", "aux1", "aux2", "scratch")  # the buf_<role> fields

# (field, u32 index, first bit, bits) for the scalar fields; waits and params are laid out below.
FIELDS: tuple[tuple[str, int, int, int], ...] = (
    ("opcode", 0, 0, 8), ("flags", 0, 8, 8), ("layer", 0, 16, 8), ("rows", 0, 24, 8),
    ("n", 1, 0, 32), ("k", 2, 0, 32), ("tile_rows", 3, 0, 16), ("k_slices", 3, 16, 16),
    ("tiles", 4, 0, 32), ("chunk_rows", 5, 0, 16), ("weight_first", 6, 0, 16), ("weight_count", 6, 16, 16),
    ("buf_in", 7, 0, 16), ("buf_out", 7, 16, 16), ("buf_aux0", 8, 0, 16), ("buf_aux1", 8, 16, 16),
    ("buf_aux2", 9, 0, 16), ("buf_scratch", 9, 16, 16), ("signal_base", 10, 0, 16), ("signal_count", 10, 16, 16),
    ("signal_expected", 11, 0, 32), ("arrival_base", 12, 0, 16), ("arrival_count", 12, 16, 16),
)
WAIT_FIELDS = (("base", 0, 0, 16), ("count", 0, 16, 8), ("mode", 0, 24, 4), ("lag", 0, 28, 3),
               ("expected", 1, 0, 32))


def _put(out: np.ndarray, index: int, first: int, bits: int, value: int, name: str) -> None:
    value = int(value)
    if not 0 <= value < (1 << bits):
        raise ValueError(f"field {name} = {value} does not fit {bits} bits")
    out[index] |= np.uint32(value << first)


def _get(words: np.ndarray, index: int, first: int, bits: int) -> int:
    return (int(words[index]) >> first) & ((1 << bits) - 1)


def encode(w: Word) -> np.ndarray:
    """Word -> 32 little-endian u32."""
    out = np.zeros(WORD_U32, dtype="<u4")
    for name, index, first, bits in FIELDS:
        _put(out, index, first, bits, getattr(w, name), name)
    if len(w.waits) > WAIT_SLOTS:
        raise ValueError(f"{len(w.waits)} waits; a word has {WAIT_SLOTS} slots")
    for slot, wait in enumerate(w.waits):
        for name, offset, first, bits in WAIT_FIELDS:
            _put(out, 13 + 2 * slot + offset, first, bits, getattr(wait, name), f"wait{slot}.{name}")
    if len(w.params) > PARAM_SLOTS:
        raise ValueError(f"{len(w.params)} params; a word has {PARAM_SLOTS}")
    for i, value in enumerate(w.params):
        _put(out, PARAM_BASE + i, 0, 32, value, f"p{i}")
    return out


def decode(words: np.ndarray) -> Word:
    """32 u32 -> Word (trailing empty wait slots and zero params dropped)."""
    values = {name: _get(words, index, first, bits) for name, index, first, bits in FIELDS}
    values["opcode"] = Op(values["opcode"])
    waits = []
    for slot in range(WAIT_SLOTS):
        parts = {name: _get(words, 13 + 2 * slot + offset, first, bits) for name, offset, first, bits in WAIT_FIELDS}
        if parts["mode"] != WaitMode.NONE:
            waits.append(Wait(parts["base"], parts["count"], WaitMode(parts["mode"]), parts["expected"], parts["lag"]))
    params = [int(words[PARAM_BASE + i]) for i in range(PARAM_SLOTS)]
    while params and params[-1] == 0:
        params.pop()
    return Word(**values, waits=tuple(waits), params=tuple(params))


def canonical(w: Word) -> Word:
    """The Word that decode(encode(w)) returns: trailing zero params dropped."""
    params = list(w.params)
    while params and params[-1] == 0:
        params.pop()
    return Word(**{f.name: getattr(w, f.name) for f in fields(Word) if f.name != "params"}, params=tuple(params))


def f32_bits(x: float) -> int:
    """A float32 parameter as its u32 bit pattern."""
    return int(np.array(x, dtype="<f4").view("<u4"))


def bits_f32(u: int) -> float:
    return float(np.array(u, dtype="<u4").view("<f4"))
