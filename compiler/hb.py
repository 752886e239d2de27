"""Happens-before over a Program's tiles, by vector clocks, and the hazards it leaves unordered.

Model (the semantics every backend implements): each block runs, step after step, every instruction
in program order: its tiles (tiling.block_range). Before a tile runs, its waits are satisfied: a wait
on counter c for step t with lag L means every tile that signals c in step t - L has finished
(release/acquire). After it runs, the tile signals its counter. A split-K GEMV's tile counts itself on
its row group's arrival counter, and the group's finish (stage 1: the sum of its S partials and the
epilogue, which signals completion) runs in whichever of the S slice tiles lands last.

A node is a maximal run of one block's consecutive tiles of one (step, instruction) that wait on the
same counters. Each node carries a vector clock: for every block, the highest position in that
block's node sequence known to happen before it (its own position included). Node a happens before
node b iff vc[b, block(a)] >= seq(a).

A finish is a node once per slice tile it may run in: at that tile's node's place (block, position),
with the clock that joins the S slice nodes (the arrival counter's acquire). An access of the finish
is then ordered against another only if it is in each of the S places; the blocks' later nodes do not
inherit its clock.

Two accesses conflict when their rectangles overlap and one writes, except conv-ring HIST reads and
NEW writes of the same step and different row spans of one instruction (access.py). A hazard is a
conflicting pair with no happens-before in either direction.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from isa import GEMV_OPS, Kind, Op, Program, WaitMode, Word

from .access import HIST, NEW, SPAN_CODE, TAG_CODES, tile_rows
from .tiling import main_tile, params, row_groups


def _first_output(program: Program, w: Word, stage: int, tile: int) -> int:
    """The first output row/column a finishing unit writes: it decides the unit's completion slice."""
    if w.opcode in GEMV_OPS:
        return (row_groups(program, w)[tile] if stage == 1 else main_tile(program, w, tile)[1]).r0
    if w.opcode == Op.GDN_CORE:
        return tile * params(w)["value_dim"]
    return tile * w.n // w.tiles if w.n else 0


def completion_slice(program: Program, w: Word, stage: int, tile: int) -> int:
    if w.signal_count <= 1:
        return 0
    return _first_output(program, w, stage, tile) * w.signal_count // w.n


def signals(program: Program, w: Word, stage: int, tile: int) -> int | None:
    """The counter a finished tile increments (None: it signals nothing)."""
    if w.arrival_count and stage == 0:
        return w.arrival_base + main_tile(program, w, tile)[1].index
    if w.signal_expected == 0:
        return None
    return w.signal_base + completion_slice(program, w, stage, tile)


def waits_of(program: Program, w: Word, stage: int, tile: int) -> tuple[tuple[int, int, int], ...]:
    """(counter, expected per step, lag) the tile waits on; a finish (stage 1), on its S arrivals."""
    out = []
    for wt in w.waits if stage == 0 else ():
        if wt.mode == WaitMode.SLICE:
            out.append((wt.base + main_tile(program, w, tile)[0], wt.expected, wt.lag))
        else:
            out += [(c, wt.expected, wt.lag) for c in wt.counters()]
    if stage == 1:
        out.append((w.arrival_base + tile, w.k_slices, 0))
    return tuple(out)


class Plan:
    """The nodes one instruction stage makes in every step, as arrays. A node is a run of one block's
    consecutive tiles [t0, t1) with the same waits."""

    def __init__(self, t0: np.ndarray, t1: np.ndarray, block: np.ndarray, keys: list[tuple],
                 key_index: np.ndarray, sig: np.ndarray):
        self.t0, self.t1, self.block, self.keys, self.key_index = t0, t1, block, keys, key_index
        # rank of each node among its block's nodes (nodes come block by block)
        rank = np.arange(len(block)) - np.searchsorted(block, block, side="left")
        self.by_rank = [np.flatnonzero(rank == r) for r in range(int(rank.max(initial=-1)) + 1)]
        seg_of_tile = np.repeat(np.arange(len(t0)), t1 - t0)
        signalling = sig[t0[0]:t1[-1]] >= 0 if len(t0) else np.zeros(0, bool)
        pairs = np.unique(np.stack([sig[t0[0]:t1[-1]][signalling], seg_of_tile[signalling]], axis=1), axis=0) \
            if len(t0) else np.zeros((0, 2), np.int64)
        self.signallers = {int(c): pairs[pairs[:, 0] == c, 1] for c in np.unique(pairs[:, 0])}

    def __len__(self) -> int:
        return len(self.t0)


class TileTables:
    """Per (instruction, stage): every tile's signal counter and k-slice, which do not depend on waits
    (one table serves every rebuild), and the node plans per set of waits. Kept per Program (small LRU)."""

    _cache: ClassVar[list[tuple[Program, TileTables]]] = []

    def __init__(self, program: Program):
        self.program = program
        self._info: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self.plans: dict[tuple, Plan] = {}

    @classmethod
    def of(cls, program: Program) -> TileTables:
        for p, tables in cls._cache:
            if p is program:
                return tables
        tables = cls(program)
        cls._cache = [(program, tables)] + cls._cache[:3]
        return tables

    def info(self, index: int, stage: int) -> tuple[np.ndarray, np.ndarray]:
        """(signal counter per tile, -1 for none; k-slice per tile (stage 0))."""
        w = self.program.words[index]
        key = (index, stage, w.signal_base, w.signal_count, w.signal_expected, w.arrival_base)
        if key not in self._info:
            tiles = w.arrival_count if stage else w.tiles
            if w.opcode in GEMV_OPS:  # vectorised: GEMVs have most of the tiles
                r0 = np.array([g.r0 for g in row_groups(self.program, w)], np.int64)
                t = np.arange(tiles, dtype=np.int64)
                group = t if stage else t % len(r0)
                kslice = np.zeros(tiles, np.int64) if stage else t // len(r0)
                if w.arrival_count and stage == 0:
                    sig = w.arrival_base + group
                elif w.signal_expected == 0:
                    sig = np.full(tiles, -1, np.int64)
                else:
                    sig = w.signal_base + (r0[group] * w.signal_count // w.n if w.signal_count > 1 else 0 * group)
            else:
                sig = np.array([-1 if (c := signals(self.program, w, stage, t)) is None else c for t in range(tiles)],
                               np.int64)
                kslice = np.zeros(tiles, np.int64)
            self._info[key] = (sig, kslice)
        return self._info[key]


class HappensBefore:
    """Vector clocks of a Program's nodes over consecutive steps, built instruction by instruction."""

    def __init__(self, program: Program, sms: int):
        self.program, self.sms = program, sms
        self.tables = TileTables.of(program)
        cap = 16384
        self.step = np.zeros(cap, np.int32)
        self.instr = np.zeros(cap, np.int32)
        self.stage = np.zeros(cap, np.int8)
        self.block = np.zeros(cap, np.int32)
        self.seq = np.zeros(cap, np.int32)
        self.vc = np.zeros((cap, sms), np.int32)
        self.t0 = np.zeros(cap, np.int64)
        self.t1 = np.zeros(cap, np.int64)
        self.size = 0
        self.last_on_block = [-1] * sms
        self.seq_on_block = [0] * sms
        self.counter_vc: dict[tuple[int, int], np.ndarray] = {}  # (counter, step) -> join of its signallers
        self.arrivers: dict[tuple[int, int], np.ndarray] = {}  # (arrival counter, step) -> its slice nodes
        self._plans = self.tables.plans  # shared by every analysis of this Program (they only depend on waits)
        self._undo = None

    def __len__(self) -> int:
        return self.size

    def stages(self, index: int) -> tuple[int, ...]:
        return (0, 1) if self.program.words[index].arrival_count else (0,)

    def plan(self, index: int) -> Plan:
        """The nodes of an instruction's tiles (cached per set of waits)."""
        w = self.program.words[index]
        key = (index, self.sms, w.waits, w.signal_base, w.signal_count, w.signal_expected, w.arrival_base)
        if key in self._plans:
            return self._plans[key]
        sig, kslice = self.tables.info(index, 0)
        tiles = w.tiles
        fixed = tuple((c, wt.lag) for wt in w.waits if wt.mode != WaitMode.SLICE for c in wt.counters())
        sliced = [(wt.base, wt.lag) for wt in w.waits if wt.mode == WaitMode.SLICE]
        starts = np.arange(self.sms + 1) * tiles // self.sms  # block b runs tiles starts[b]..starts[b+1]
        cuts = [starts]
        if sliced:
            cuts.append(np.flatnonzero(np.diff(kslice)) + 1)
        bounds = np.unique(np.concatenate(cuts))
        t0, t1 = bounds[:-1], bounds[1:]
        block = np.searchsorted(starts, t0, side="right") - 1
        if sliced:
            values, key_index = np.unique(kslice[t0], return_inverse=True)
            keys = [fixed + tuple((base + int(v), lag) for base, lag in sliced) for v in values]
        else:
            keys, key_index = [fixed], np.zeros(len(t0), np.int64)
        plan = Plan(t0, t1, block, keys, key_index, sig)
        self._plans[key] = plan
        return plan

    def add(self, step: int, index: int, stage: int) -> range:
        """Create the nodes of (step, instruction, stage) with their clocks; `undo` takes them back."""
        if stage == 1:
            return self._add_finishes(step, index)
        pa = self.plan(index)
        self._undo = (list(self.last_on_block), list(self.seq_on_block), {}, self.size, [])
        first, count = self.size, len(pa)
        self._reserve(first + count)
        joined = np.full((len(pa.keys), self.sms), -1, np.int32)
        for k, waits in enumerate(pa.keys):
            for counter, lag in waits:
                source = self.counter_vc.get((counter, step - lag))
                if source is not None:
                    np.maximum(joined[k], source, out=joined[k])
        last = np.array(self.last_on_block)
        base_seq = np.array(self.seq_on_block)
        vcs = np.empty((count, self.sms), np.int32)
        seqs = np.empty(count, np.int32)
        for rank, sel in enumerate(pa.by_rank):
            blocks = pa.block[sel]
            if rank == 0:
                prev_nodes = last[blocks]
                prev = np.where(prev_nodes[:, None] >= 0, self.vc[np.maximum(prev_nodes, 0)], -1)
            else:
                prev = vcs[sel - 1]  # the same block's previous node of this call
            v = np.maximum(prev, joined[pa.key_index[sel]])
            seq = base_seq[blocks] + rank
            v[np.arange(len(sel)), blocks] = seq
            vcs[sel], seqs[sel] = v, seq
        ids = range(first, first + count)
        span = slice(first, first + count)
        self.vc[span], self.seq[span], self.block[span] = vcs, seqs, pa.block
        self.step[span], self.instr[span], self.stage[span] = step, index, stage
        self.t0[span], self.t1[span] = pa.t0, pa.t1
        self.size += count
        if count:
            lastpos = len(pa.block) - 1 - np.unique(pa.block[::-1], return_index=True)[1]
            for block, k in zip(np.unique(pa.block).tolist(), lastpos.tolist()):
                self.last_on_block[block] = first + k
            for block, n in zip(*np.unique(pa.block, return_counts=True)):
                self.seq_on_block[block] += int(n)
        for counter, sel in pa.signallers.items():
            self._signal(counter, step, vcs[sel].max(axis=0))
            if self.program.words[index].arrival_count:
                self.arrivers[(counter, step)] = first + sel
                self._undo[4].append((counter, step))
        return ids

    def _signal(self, counter: int, step: int, vc: np.ndarray) -> None:
        saved = self._undo[2]
        key = (counter, step)
        old = self.counter_vc.get(key)
        if key not in saved:
            saved[key] = old
        self.counter_vc[key] = vc if old is None else np.maximum(old, vc)

    def _add_finishes(self, step: int, index: int) -> range:
        """A split-K GEMV's row-group finishes of one step, each once per slice node it may run in (at that
        node's place, with the clock of the group's arrival counter: the join of its slice nodes)."""
        w = self.program.words[index]
        self._undo = (list(self.last_on_block), list(self.seq_on_block), {}, self.size, [])
        sig, _ = self.tables.info(index, 1)
        groups, places = [], []
        for g in range(w.arrival_count):
            nodes = self.arrivers[(w.arrival_base + g, step)]
            groups += [g] * len(nodes)
            places += nodes.tolist()
        first, count = self.size, len(places)
        self._reserve(first + count)
        span, at = slice(first, first + count), np.array(places, np.int64)
        group = np.array(groups, np.int64)
        self.vc[span] = np.stack([self.counter_vc[(w.arrival_base + g, step)] for g in groups])
        self.seq[span], self.block[span] = self.seq[at], self.block[at]
        self.step[span], self.instr[span], self.stage[span] = step, index, 1
        self.t0[span], self.t1[span] = group, group + 1
        self.size += count
        for g in range(w.arrival_count):
            if sig[g] >= 0:
                self._signal(int(sig[g]), step, self.counter_vc[(w.arrival_base + g, step)])
        return range(first, first + count)

    def _reserve(self, size: int) -> None:
        if size <= len(self.block):
            return
        grow = max(size, 4 * len(self.block))
        for name in ("step", "instr", "stage", "block", "seq", "t0", "t1"):
            old = getattr(self, name)
            new = np.zeros(grow, old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)
        vc = np.zeros((grow, self.sms), np.int32)
        vc[:len(self.vc)] = self.vc
        self.vc = vc

    def undo(self) -> None:
        last, seqs, saved, size, arrivals = self._undo
        for key in arrivals:
            self.arrivers.pop(key, None)
        self.last_on_block, self.seq_on_block = last, seqs
        for key, value in saved.items():
            if value is None:
                self.counter_vc.pop(key, None)
            else:
                self.counter_vc[key] = value
        self.size = size
        self._undo = None

    def tiles(self, n: int) -> range:
        return range(int(self.t0[n]), int(self.t1[n]))

    def label(self, n: int) -> str:
        names = self.program.meta.get("instructions", [])
        i = int(self.instr[n])
        name = names[i] if i < len(names) else self.program.words[i].opcode.name
        stage = " finish" if self.stage[n] else ""
        tiles = self.tiles(n)
        return f"step {self.step[n]} #{i} {name}{stage} block {self.block[n]} tiles {tiles[0]}..{tiles[-1]}"


@dataclass(frozen=True)
class Hazard:
    first: int  # node ids
    second: int
    buffer: int
    kind: str  # "RAW", "WAR" or "WAW", from the first node's point of view

    def describe(self, hb: HappensBefore) -> str:
        return (f"{self.kind} on {hb.program.buffers[self.buffer].name}: [{hb.label(self.first)}] and "
                f"[{hb.label(self.second)}] are not ordered")


# Access rows: [node, buffer, r0, r1, c0, c1, write, tag] as int64 columns.
NODE, BUF, R0, R1, C0, C1, WRITE, TAG = range(8)


class AccessIndex:
    """Every access of the indexed nodes, as arrays by buffer, for vectorised conflict search."""

    def __init__(self, program: Program):
        self.program = program
        self._chunks: dict[tuple[int, bool], list[np.ndarray]] = defaultdict(list)  # (buffer, writes only)
        self._tables: dict[tuple[int, bool], tuple[int, np.ndarray]] = {}
        self.aliases = _aliases(program)
        self.lane_last: dict[tuple[int, int], np.ndarray] = {}  # (buffer, step) -> latest accessor node per block

    def gather(self, hb: HappensBefore, ids) -> np.ndarray:
        """The accesses of the nodes of one (step, instruction, stage), NODE column = node id."""
        if len(ids) == 0:
            return np.zeros((0, 8), np.int64)
        rows, starts = tile_rows(self.program, int(hb.instr[ids.start]), int(hb.stage[ids.start]))
        t0, t1 = hb.t0[ids.start:ids.stop], hb.t1[ids.start:ids.stop]
        counts = starts[t1] - starts[t0]
        if hb.stage[ids.start]:  # finishes: a group's rows once per place, the groups in any order
            picks = np.concatenate([np.arange(starts[a], starts[b]) for a, b in zip(t0.tolist(), t1.tolist())])
            out = rows[picks].copy()
        else:  # tile runs in order, back to back
            out = rows[starts[t0[0]]:starts[t1[-1]]].copy()
        out[:, NODE] = np.repeat(np.arange(ids.start, ids.stop), counts)
        return out

    def add(self, hb: HappensBefore, ids, rows: np.ndarray | None = None) -> None:
        rows = self.gather(hb, ids) if rows is None else rows
        for buf in np.unique(rows[:, BUF]):
            mine = rows[rows[:, BUF] == buf]
            self._chunks[(int(buf), False)].append(mine)
            writes = mine[mine[:, WRITE] == 1]
            if len(writes):
                self._chunks[(int(buf), True)].append(writes)
            if int(buf) in self.aliases:
                step = int(hb.step[mine[0, NODE]])
                last = self.lane_last.setdefault((int(buf), step), np.full(hb.sms, -1, np.int64))
                np.maximum.at(last, hb.block[mine[:, NODE]], mine[:, NODE])

    def _table(self, buf: int, writes_only: bool) -> np.ndarray | None:
        key = (buf, writes_only)
        chunks = self._chunks.get(key)
        if not chunks:
            return None
        cached = self._tables.get(key)
        if cached is None or cached[0] != len(chunks):
            cached = (len(chunks), np.concatenate(chunks))
            self._tables[key] = cached
        return cached[1]

    def hazards(self, hb: HappensBefore, ids, limit: int | None = None, latest: bool = False,
                rows: np.ndarray | None = None) -> list[Hazard]:
        """Unordered conflicts between the nodes `ids` (the latest added) and the indexed nodes, at most
        `limit` of them. Once `ids` are indexed themselves, a conflict between two of them is reported
        once, lower node id first. latest=True returns just one hazard, one whose indexed node is latest
        in (step, instruction, stage) order."""
        rows = self.gather(hb, ids) if rows is None else rows
        found, best = [], None
        for buf in np.unique(rows[:, BUF]):
            mine = rows[rows[:, BUF] == buf]
            for writes_only, new in ((True, mine[mine[:, WRITE] == 0]), (False, mine[mine[:, WRITE] == 1])):
                t = self._table(int(buf), writes_only)  # a read only conflicts with writes
                if t is None or len(new) == 0:
                    continue
                hit = ((t[None, :, R0] < new[:, None, R1]) & (new[:, None, R0] < t[None, :, R1])
                       & (t[None, :, C0] < new[:, None, C1]) & (new[:, None, C0] < t[None, :, C1]))
                if new[:, TAG].any():  # HIST/NEW pairs of one step touch different ring rows
                    same_step = hb.step[t[:, NODE]][None, :] == hb.step[new[:, NODE]][:, None]
                    pair = (t[None, :, TAG] + new[:, None, TAG]) == TAG_CODES[HIST] + TAG_CODES[NEW]
                    hit &= ~(pair & same_step & (t[None, :, TAG] != new[:, None, TAG]))
                if (new[:, TAG] >= SPAN_CODE).any():  # one instruction's row spans append different rows
                    same_instr = ((hb.step[t[:, NODE]][None, :] == hb.step[new[:, NODE]][:, None])
                                  & (hb.instr[t[:, NODE]][None, :] == hb.instr[new[:, NODE]][:, None]))
                    spans = (t[None, :, TAG] >= SPAN_CODE) & (new[:, None, TAG] >= SPAN_CODE)
                    hit &= ~(spans & same_instr & (t[None, :, TAG] != new[:, None, TAG]))
                i, j = np.nonzero(hit)
                if i.size == 0:
                    continue
                n, m = new[i, NODE], t[j, NODE]
                # m >= n: the node itself, or the mirror of a pair within `ids` (every other indexed node is
                # older than `ids`, so m < n)
                ordered = (hb.vc[n, hb.block[m]] >= hb.seq[m]) | (hb.vc[m, hb.block[n]] >= hb.seq[n]) | (m >= n)
                bad = np.flatnonzero(~ordered)
                if bad.size == 0:
                    continue
                if latest:
                    mb = m[bad]
                    keys = (hb.step[mb].astype(np.int64) << 40) | (hb.instr[mb].astype(np.int64) << 8) | hb.stage[mb]
                    k = int(np.argmax(keys))
                    if best is None or keys[k] > best[0]:
                        kb = bad[k]
                        best = (keys[k], Hazard(int(m[kb]), int(n[kb]), int(buf),
                                                _kind(bool(new[i[kb], WRITE]), bool(t[j[kb], WRITE]))))
                    continue
                for k in bad:
                    found.append(Hazard(int(m[k]), int(n[k]), int(buf),
                                        _kind(bool(new[i[k], WRITE]), bool(t[j[k], WRITE]))))
                    if limit and len(found) >= limit:
                        return found
        return [best[1]] if latest and best else found

    def alias_hazards(self, hb: HappensBefore, ids, limit: int | None = None,
                      rows: np.ndarray | None = None) -> list[Hazard]:
        """Arena reuse: a node writing buffer B must come after every access, in this step or the
        previous one, to any other buffer sharing B's bytes (B's readers follow B's writers)."""
        rows = self.gather(hb, ids) if rows is None else rows
        rows = rows[rows[:, WRITE] == 1]
        found = []
        for buf in np.unique(rows[:, BUF]):
            if int(buf) not in self.aliases:
                continue
            nodes = np.unique(rows[rows[:, BUF] == buf, NODE])
            step = int(hb.step[nodes[0]])
            lasts = [last for other in self.aliases[int(buf)] for s in (step, step - 1)
                     if (last := self.lane_last.get((other, s))) is not None]
            if not lasts:
                continue
            last = np.max(lasts, axis=0)  # the latest accessor of any alias, per block
            earliest = hb.vc[nodes].min(axis=0)  # what every writer of buf already follows, per block
            lanes = np.flatnonzero(last >= 0)
            for lane in lanes[earliest[lanes] < hb.seq[last[lanes]]]:
                m = int(last[lane])
                n = int(next(n for n in nodes if hb.vc[n, lane] < hb.seq[m]))
                found.append(Hazard(m, n, int(buf), "reuse"))
                if limit and len(found) >= limit:
                    return found
        return found


def _kind(second_writes: bool, first_writes: bool) -> str:
    return "WAW" if second_writes and first_writes else ("RAW" if first_writes else "WAR")


def _aliases(program: Program) -> dict[int, list[int]]:
    """Activation buffer -> the other activation buffers whose arena bytes overlap it."""
    act = [i for i, b in enumerate(program.buffers) if b.kind == Kind.ACTIVATION]
    lo = np.array([program.buffers[i].offset for i in act])
    hi = lo + np.array([program.buffers[i].nbytes for i in act])
    out = {}
    for k, i in enumerate(act):
        hits = np.flatnonzero((lo < hi[k]) & (lo[k] < hi))
        others = [act[h] for h in hits if act[h] != i]
        if others:
            out[i] = others
    return out
