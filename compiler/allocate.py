"""Arena allocation: one byte range per buffer, activations reusing space whose value is dead.

Control and state buffers come first and never share. An activation buffer lives from the first to
the last instruction that names it (program order); it may take the space of an activation whose
life ended at least QUARANTINE instructions earlier, so that a block still finishing that old reader
rarely forces a wait (the dependency pass adds one when it does, and the validator proves the
result). First fit, in order of first use.
"""

from __future__ import annotations

from isa import Kind

from .ir import Lowered

ALIGN = 256
QUARANTINE = 2


def align(x: int) -> int:
    """x rounded up to a multiple of ALIGN (arena buffers and weights both start ALIGN-aligned)."""
    return -(-x // ALIGN) * ALIGN


def lifetimes(low: Lowered) -> dict[str, tuple[int, int]]:
    life: dict[str, tuple[int, int]] = {}
    for i, ins in enumerate(low.instrs):
        for name in ins.bufs.values():
            first, _ = life.get(name, (i, i))
            life[name] = (first, i)
    return life


def allocate(low: Lowered) -> dict[str, int]:
    """Buffer name -> byte offset. The control block is buffer 0 at offset 0."""
    offsets: dict[str, int] = {}
    top = 0
    fixed = sorted((b for b in low.buffers.values() if b.kind != Kind.ACTIVATION), key=lambda b: (b.kind, b.name))
    for b in fixed:
        offsets[b.name] = top
        top = align(top + b.nbytes)
    life = lifetimes(low)
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, end)
    for name in sorted((n for n, b in low.buffers.items() if b.kind == Kind.ACTIVATION), key=lambda n: life[n]):
        first, last = life[name]
        size = align(low.buffers[name].nbytes)
        busy = sorted((off, end) for f, l, off, end in placed if not (l + QUARANTINE < first or last < f))
        offset = top
        for off, end in busy:
            if offset + size <= off:
                break
            offset = max(offset, end)
        offsets[name] = offset
        placed.append((first, last, offset, offset + size))
    return offsets
