"""Dependency counters: which counters each instruction signals, and the fewest waits that order every
conflicting pair of accesses (read-after-write, write-after-read, write-after-write, arena reuse).

1. Counters. Every instruction gets completion counters, one per output slice; an instruction whose
   output is the k-sliced input of a split-K GEMV gets that GEMV's S slices (so the GEMV's slice s
   can start when slice s of its input is done), otherwise one. A split-K GEMV also gets an arrival
   counter per row group (its S partials; the slice that lands last finishes the group and zeroes it).
   Completion counters are monotonic: a wait's target is expected x (step + 1 - lag).
2. Waits within a step, instruction by instruction in program order: build the instruction's nodes
   (hb.py), find hazards against everything before it, and add a wait on the latest instruction
   involved (SLICE when it is this GEMV's sliced producer, else ALL), until none is left. A wait is
   only ever added to fix a hazard that no other wait fixes, so removing any one reopens a hazard.
3. Waits across steps: the same in the next step, with lag-1 waits.
"""

from __future__ import annotations

import numpy as np

from isa import GEMV_OPS, CounterEntry, Op, Program, Wait, WaitMode

from .hb import AccessIndex, HappensBefore, Hazard, completion_slice
from .tiling import row_groups

SLICED_INPUT_OPS = (Op.GEMV_RESIDUAL,)  # ops whose k-slice s reads only input slice s


def _units(program: Program, index: int) -> list[tuple[int, int]]:
    """(stage, tile) of the units that signal completion: the tiles, or a split-K GEMV's row-group finishes
    (stage 1, hb.py)."""
    w = program.words[index]
    stage = 1 if w.arrival_count else 0
    return [(stage, t) for t in range(w.arrival_count if stage else w.tiles)]


def _sliced_producers(program: Program) -> dict[int, int]:
    """Producer instruction -> the S of the split-K GEMV that reads its output slice by slice."""
    last_writer: dict[int, int] = {}
    out = {}
    for i, w in enumerate(program.words):
        if w.opcode in SLICED_INPUT_OPS and w.k_slices > 1 and w.buf_in in last_writer:
            out[last_writer[w.buf_in]] = w.k_slices
        for buf in (w.buf_out, w.buf_aux0, w.buf_aux1, w.buf_aux2):
            last_writer[buf] = i
    return out


def assign_counters(program: Program) -> None:
    counters: list[CounterEntry] = []
    names = program.meta.get("instructions", [])
    sliced = _sliced_producers(program)
    for i, w in enumerate(program.words):
        name = names[i] if i < len(names) else w.opcode.name
        units = _units(program, i)
        w.signal_count = sliced.get(i, 1)
        if w.signal_count > 1:
            per_slice = [0] * w.signal_count
            ok = w.n > 0  # completion_slice and _aligned divide by n
            if ok:
                for stage, tile in units:
                    per_slice[completion_slice(program, w, stage, tile)] += 1
            if not ok or len(set(per_slice)) != 1 or not _aligned(program, i, w.signal_count):
                w.signal_count = 1  # units straddle or are uneven: no slicing
        w.signal_base = len(counters)
        w.signal_expected = len(units) // w.signal_count
        counters += [CounterEntry(f"{name}.done[{s}]" if w.signal_count > 1 else f"{name}.done", i, w.signal_expected)
                     for s in range(w.signal_count)]
        w.arrival_base = len(counters) if w.arrival_count else 0
        counters += [CounterEntry(f"{name}.partials[{r}]", i, w.k_slices) for r in range(w.arrival_count)]
    program.counters = counters


def _aligned(program: Program, index: int, slices: int) -> bool:
    """Every unit of the producer writes inside one slice of its output."""
    w = program.words[index]
    if w.opcode in GEMV_OPS:
        bounds = {s * w.n // slices for s in range(slices + 1)}
        return all(rg.r0 * slices // w.n == (rg.r1 - 1) * slices // w.n for rg in row_groups(program, w)) and \
            all(b % w.tile_rows == 0 for b in bounds)
    if w.opcode == Op.GDN_CORE or w.opcode == Op.ATTN_MERGE:
        width = w.n // w.tiles
        return (w.n // slices) % width == 0
    return False


def _add_wait(program: Program, index: int, producer: int, lag: int) -> None:
    w, p = program.words[index], program.words[producer]
    waits = list(w.waits)
    mode = WaitMode.SLICE if (lag == 0 and w.k_slices > 1 and p.signal_count == w.k_slices
                              and w.opcode in SLICED_INPUT_OPS) else WaitMode.ALL
    for k, existing in enumerate(waits):
        if (existing.base, existing.lag) == (p.signal_base, lag):
            if existing.mode == WaitMode.ALL:
                raise RuntimeError(f"instruction {index} already waits on all of {producer}: hazard not fixable")
            waits[k] = Wait(p.signal_base, p.signal_count, WaitMode.ALL, p.signal_expected, lag)
            break
    else:
        if len(waits) == 4:
            raise RuntimeError(f"instruction {index} ({w.opcode.name}) needs more than 4 waits")
        waits.append(Wait(p.signal_base, p.signal_count, mode, p.signal_expected, lag))
    w.waits = tuple(waits)


def _latest(hb: HappensBefore, hazards: list[Hazard]) -> Hazard:
    return max(hazards, key=lambda h: (hb.step[h.first], hb.instr[h.first], hb.stage[h.first]))


def add_dependencies(program: Program, sms: int) -> None:
    """Fill in counters and waits (in place): one pass over two consecutive steps. Step 0 settles
    the waits within a step; step 1 adds lag-1 waits for what the previous step left unordered
    (a lag-1 wait changes nothing in step 0, so no step-0 node needs rebuilding)."""
    for w in program.words:
        w.waits = ()
    assign_counters(program)
    hb, index = HappensBefore(program, sms), AccessIndex(program)
    step0_end = None
    for step in (0, 1):
        if step == 1:
            step0_end = np.array(hb.seq_on_block) - 1  # the last step-0 node of each block
        for i in range(len(program.words)):
            for stage in hb.stages(i):
                while True:
                    ids = hb.add(step, i, stage)
                    if step == 1 and len(ids) and (hb.vc[ids.start:ids.stop].min(axis=0) >= step0_end).all():
                        break  # every step-0 node happens before these: no cross-step hazard possible
                    rows = index.gather(hb, ids)
                    hazards = index.hazards(hb, ids, latest=True, rows=rows) + index.alias_hazards(hb, ids, rows=rows)
                    if not hazards:
                        break
                    h = _latest(hb, hazards)
                    producer, lag = int(hb.instr[h.first]), step - int(hb.step[h.first])
                    if producer == i and lag == 0:
                        raise RuntimeError(f"hazard inside one instruction: {h.describe(hb)}")
                    if step == 1 and lag == 0:
                        raise RuntimeError(f"step 1 needs a wait step 0 did not: {h.describe(hb)}")
                    if stage == 1:  # it runs in its group's last slice tile, past every wait
                        raise RuntimeError(f"a split-K finish would need a wait of its own: {h.describe(hb)}")
                    hb.undo()
                    _add_wait(program, i, producer, lag)
                if step == 0:  # step-1 nodes are only checked against step 0, never indexed
                    index.add(hb, ids, rows)


__all__ = ["add_dependencies", "assign_counters"]
