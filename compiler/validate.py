"""Static proof on a Program, for a given number of blocks G:

0. dataflow: every activation a word reads was written earlier in the step;
1. counters: each is signalled by exactly one (instruction, stage) and receives exactly its declared
   arrivals per step; every wait names such a counter with that expected count;
2. no deadlock: every wait targets a counter signalled strictly earlier in the order (step,
   instruction, stage), so for any interleaving the earliest unfinished tile can always run (its
   block's earlier tiles are done and everything it waits for is earlier); a split-K finish (stage 1)
   waits on nothing but its own slice tiles' arrivals; completion targets expected x (step + 1 - lag)
   only grow;
3. no race: over three consecutive steps, every pair of conflicting accesses (overlapping rectangles
   of one buffer, one a write; or different buffers sharing arena bytes) is ordered by
   happens-before (hb.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from isa import Kind, Program

from .access import tile_rows
from .hb import AccessIndex, HappensBefore, signals, waits_of


@dataclass
class Report:
    problems: list[str]
    nodes: int

    @property
    def ok(self) -> bool:
        return not self.problems


def check_counters(program: Program) -> list[str]:
    problems = []
    arrivals: dict[int, int] = {}
    signaller: dict[int, tuple[int, int]] = {}
    for i, w in enumerate(program.words):
        for stage in (0, 1) if w.arrival_count else (0,):
            for tile in range(w.arrival_count if stage else w.tiles):
                c = signals(program, w, stage, tile)
                if c is None:
                    continue
                if signaller.setdefault(c, (i, stage)) != (i, stage):
                    problems.append(f"counter {c} is signalled by instructions {signaller[c]} and {(i, stage)}")
                arrivals[c] = arrivals.get(c, 0) + 1
    for c, entry in enumerate(program.counters):
        if arrivals.get(c, 0) != entry.expected:
            problems.append(f"counter {c} ({entry.name}) gets {arrivals.get(c, 0)} arrivals per step, "
                            f"declares {entry.expected}")
    for i, w in enumerate(program.words):
        for stage in (0, 1) if w.arrival_count else (0,):
            for tile in range(w.arrival_count if stage else w.tiles):
                for c, expected, lag in waits_of(program, w, stage, tile):
                    if c >= len(program.counters) or program.counters[c].expected != expected:
                        problems.append(f"instruction {i} waits on counter {c} expecting {expected}")
                        continue
                    j, s = signaller.get(c, (None, None))
                    if j is None or (lag == 0 and (j, s) >= (i, stage)):
                        problems.append(f"instruction {i} stage {stage} waits on counter {c} signalled by {(j, s)}:"
                                        " not strictly earlier (possible deadlock)")
    return problems


def check_dataflow(program: Program) -> list[str]:
    """Every activation buffer a word reads was written by an earlier word (or stage) of the step."""
    written: set[int] = set()
    problems = []
    for i, w in enumerate(program.words):
        for stage in (0, 1) if w.arrival_count else (0,):
            rows, _ = tile_rows(program, i, stage)
            for buf in sorted(set(rows[rows[:, 6] == 0, 1].tolist()) - written):
                if program.buffers[buf].kind == Kind.ACTIVATION:
                    problems.append(f"instruction {i} reads {program.buffers[buf].name}, which nothing earlier writes")
            written.update(rows[rows[:, 6] == 1, 1].tolist())
    return problems


def validate(program: Program, sms: int, steps: int = 3, limit: int = 20,
             on_progress: Callable[[int, int], None] | None = None) -> Report:
    """Stops at `limit` problems: a failing program's report then counts only the nodes built so far.
    on_progress(done, total): called after each instruction stage of each step (the CLI's progress bar)."""
    problems = check_counters(program) + check_dataflow(program)
    hb, index = HappensBefore(program, sms), AccessIndex(program)
    total = steps * sum(len(hb.stages(i)) for i in range(len(program.words)))
    done = 0
    for step in range(steps):
        for i in range(len(program.words)):
            for stage in hb.stages(i):
                if problems and len(problems) >= limit:
                    return Report(problems, len(hb))
                room = max(limit - len(problems), 0)
                ids = hb.add(step, i, stage)
                rows = index.gather(hb, ids)
                reuse = index.alias_hazards(hb, ids, limit=room, rows=rows)
                index.add(hb, ids, rows)
                # once indexed, the stage's own nodes take part too: a hazard whose first node is one of
                # them is a conflict inside the instruction stage (e.g. two tiles writing one row)
                found = index.hazards(hb, ids, limit=room, rows=rows)
                inside = [h for h in found if h.first in ids]
                problems += ([h.describe(hb) for h in found if h.first not in ids] + [h.describe(hb) for h in reuse]
                             + ["within one instruction: " + h.describe(hb) for h in inside])[:room]
                done += 1
                if on_progress is not None:
                    on_progress(done, total)
    return Report(problems, len(hb))
