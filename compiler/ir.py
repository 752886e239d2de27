"""The compiler's intermediate form: instructions over named buffers and weights, before encoding."""

from __future__ import annotations

from dataclasses import dataclass, field

from isa import BufferEntry, Flag, Op


class BufferDecl(BufferEntry):
    """A buffer as lowering declares it; its offset is set by allocation (allocate.py), in the Program."""


@dataclass
class Instr:
    op: Op
    name: str  # readable, e.g. "L3.qkv"
    layer: int
    n: int = 0
    k: int = 0
    weights: list[str] = field(default_factory=list)  # canonical tensor names, concatenated along rows
    bufs: dict[str, str] = field(default_factory=dict)  # role (in, out, aux0, aux1, aux2, scratch) -> buffer
    params: dict[str, float | int | str] = field(default_factory=dict)  # weight params hold tensor names
    flags: Flag = Flag.NONE
    # partitioning
    tile_rows: int = 0
    k_slices: int = 1
    tiles: int = 0
    split_groups: int = 0  # row groups a split-K GEMV finishes (S > 1), else 0


@dataclass
class Lowered:
    """The output of lowering: instructions and the buffers they name (activations in SSA form)."""

    instrs: list[Instr]
    buffers: dict[str, BufferDecl]
    rows: int
    capacity: int
