"""Reading the megakernel's trace (megakernel_trace, megakernel/runtime/persistent.py): a Chrome / Perfetto trace
with one track per block, a per-opcode table of work, wait and bandwidth, and an SM x time timeline.

A record covers one block's tiles of one (pass, word): start (before its first tile's waits),
ready (those waits done) and end (its last tile signalled), %globaltimer ns, and its tile count with the
number of sleeping wait polls above it (tiles | polls << 32; the graph build's records, experiments/graph_trace.py,
hold the block's SM + 1 there instead). Wait is ready - start; work
is end - ready, which also holds the waits of the block's later tiles of the same word (rare: a word
gives a block at most a few tiles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .budgets import instruction_bytes


@dataclass(frozen=True)
class Slice:
    step: int
    word: int
    block: int
    start: int  # ns since the trace's first start
    ready: int
    end: int
    tiles: int
    polls: int  # wait polls that slept (back-off) before the block's tiles could start


def current_layout(records: np.ndarray) -> np.ndarray:
    """Saved records as [steps, words, blocks, 4]. Records from before the reduce stage left the ISA (D50:
    [steps, words, 2 stages, blocks, 4]) become one record per block and word: the earliest start, the
    main stage's ready, the latest end, the tiles and polls of both (a reduce tile's time counts as its
    block's work on the word)."""
    if records.ndim == 4:
        return records
    if records.ndim != 5 or records.shape[2] != 2 or records.shape[-1] != 4:
        raise ValueError(f"trace records of shape {records.shape}: expected [steps, words, blocks, 4]")
    rec = records.astype(np.uint64)
    ran = (rec[..., 3] & np.uint64(0xFFFFFFFF)) > 0
    start = np.where(ran, rec[..., 0], np.uint64(np.iinfo(np.uint64).max)).min(axis=2)
    out = np.zeros(rec.shape[:2] + rec.shape[3:], np.uint64)
    out[..., 0] = np.where(ran.any(axis=2), start, 0)
    out[..., 1] = np.where(ran[:, :, 0], rec[:, :, 0, :, 1], rec[:, :, 1, :, 1])
    out[..., 2] = rec[..., 2].max(axis=2)
    out[..., 3] = rec[..., 3].sum(axis=2)  # tiles in the low word, polls in the high one: both add
    return out


def slices(records: np.ndarray) -> list[Slice]:
    """The records [steps, words, blocks, 4] of blocks that ran tiles, times from the earliest start."""
    ran = (records[..., 3] & 0xFFFFFFFF) > 0
    if not ran.any():
        return []
    t0 = int(records[..., 0][ran].min())
    out = []
    for step, word, block in zip(*np.nonzero(ran), strict=True):
        start, ready, end, packed = (int(v) for v in records[step, word, block])
        out.append(Slice(int(step), int(word), int(block), start - t0, ready - t0, end - t0,
                         packed & 0xFFFFFFFF, packed >> 32))
    return out


def _name(program, word: int) -> str:
    names = program.meta.get("instructions") or []
    return names[word] if word < len(names) else f"word {word}"


def chrome_trace(records: np.ndarray, program) -> dict:
    """Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one thread per block; a wait slice and
    a work slice per record, in microseconds."""
    events = []
    for s in slices(records):
        name = _name(program, s.word)
        op = program.words[s.word].opcode.name
        common = {"pid": 0, "tid": s.block, "args": {"pass": s.step, "word": s.word, "tiles": s.tiles,
                                                     "polls": s.polls}}
        if s.ready > s.start:
            events.append({**common, "name": f"wait {name}", "cat": "wait", "ph": "X", "ts": s.start / 1e3,
                           "dur": (s.ready - s.start) / 1e3})
        events.append({**common, "name": name, "cat": op, "ph": "X", "ts": s.ready / 1e3,
                       "dur": (s.end - s.ready) / 1e3})
    events += [{"pid": 0, "tid": b, "ph": "M", "name": "thread_name", "args": {"name": f"block {b}"}}
               for b in range(records.shape[2])]
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def opcode_table(records: np.ndarray, program, context: int, read_gbps: float | None = None) -> list[dict]:
    """Per opcode, summed over passes and blocks: instructions, work and wait (block-microseconds), the
    span of its instructions (first start to last end over blocks, microseconds, summed), bytes and the
    bandwidth bytes / span (and its fraction of `read_gbps` when given)."""
    rows: dict[str, dict] = {}
    spans: dict[tuple[int, int], list[int]] = {}
    for s in slices(records):
        op = program.words[s.word].opcode.name
        r = rows.setdefault(op, {"opcode": op, "instructions": 0, "work_us": 0.0, "wait_us": 0.0, "span_us": 0.0,
                                 "bytes": 0})
        r["work_us"] += (s.end - s.ready) / 1e3
        r["wait_us"] += (s.ready - s.start) / 1e3
        span = spans.setdefault((s.step, s.word), [s.start, s.end])
        span[0], span[1] = min(span[0], s.start), max(span[1], s.end)
    for (_, word), (first, last) in spans.items():
        r = rows[program.words[word].opcode.name]
        r["instructions"] += 1
        r["span_us"] += (last - first) / 1e3
        r["bytes"] += instruction_bytes(program, program.words[word], context)
    for r in rows.values():
        r["gbps"] = r["bytes"] / (r["span_us"] * 1e3) if r["bytes"] and r["span_us"] else None
        if read_gbps:
            r["fraction_of_bandwidth"] = r["gbps"] / read_gbps if r["gbps"] else None
    return sorted(rows.values(), key=lambda r: -r["span_us"])


def critical_path(records: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Per word of pass `step` (>= 1), in nanoseconds: the time from the latest tile end so far (the
    previous pass's last tile for the first word) to this word's last tile end (0 when it ends earlier),
    and from that same point to its first tile past its waits (the signal-to-start latency). The first
    column sums to the pass's time from last tile to last tile."""
    rec = records.astype(np.int64)
    if step < 1:
        raise ValueError("the critical path of pass `step` starts at pass step - 1's end: step >= 1")
    ran = (rec[step][..., 3] & 0xFFFFFFFF) > 0
    ends = np.where(ran, rec[step][..., 2], 0).max(axis=1)
    readies = np.where(ran, rec[step][..., 1], np.iinfo(np.int64).max).min(axis=1)
    latest = int(rec[step - 1][..., 2].max())
    added, gaps = np.zeros(len(ends), np.int64), np.zeros(len(ends), np.int64)
    for w, (end, ready) in enumerate(zip(ends, readies, strict=True)):
        if end:
            added[w], gaps[w] = max(0, end - latest), max(0, ready - latest)
            latest = max(latest, int(end))
    return added, gaps


def table_text(rows: list[dict]) -> str:
    lines = [f"{'opcode':<26}{'instr':>7}{'span us':>11}{'work us':>12}{'wait us':>12}{'GB/s':>9}"]
    for r in rows:
        gbps = f"{r['gbps']:.0f}" if r["gbps"] else "-"
        lines.append(f"{r['opcode']:<26}{r['instructions']:>7}{r['span_us']:>11.1f}{r['work_us']:>12.1f}"
                     f"{r['wait_us']:>12.1f}{gbps:>9}")
    return "\n".join(lines)


def timeline_png(records: np.ndarray, program, path: str, step: int = 0,
                 window: tuple[float, float] | None = None) -> None:
    """One pass as blocks (y) over time (x): work dark, waits light, instruction starts as faint lines;
    `window`: microseconds from the pass's first start to show (default: all of it). Drawn as two
    rectangle collections (a pass has ~10^5 slices; one artist each takes minutes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PolyCollection

    rec = records[step].astype(np.int64)  # [words, blocks, 4]
    ran = rec[..., 3] > 0
    t0 = rec[..., 0][ran].min()
    word, block = np.nonzero(ran)
    start, ready, end = ((rec[..., k][ran] - t0) / 1e3 for k in range(3))

    def boxes(left, right):
        lo, hi = block - 0.4, block + 0.4
        return np.stack([np.stack([left, lo], 1), np.stack([right, lo], 1), np.stack([right, hi], 1),
                         np.stack([left, hi], 1)], 1)

    fig, ax = plt.subplots(figsize=(14, 6))
    ax.add_collection(PolyCollection(boxes(start, ready), facecolors="#f4a582", edgecolors="none"))
    ax.add_collection(PolyCollection(boxes(ready, end), facecolors="#2166ac", edgecolors="none"))
    firsts = np.full(rec.shape[0], np.inf)
    np.minimum.at(firsts, word, start)
    firsts = firsts[np.isfinite(firsts)]
    top = rec.shape[1]
    ax.add_collection(LineCollection([[(x, -0.5), (x, top - 0.5)] for x in firsts], colors="grey", linewidths=0.2))
    ax.set_xlim(*(window or (0, end.max())))
    ax.set_ylim(-0.5, top - 0.5)
    ax.set_xlabel("microseconds")
    ax.set_ylabel("block (SM)")
    ax.set_title(f"megakernel pass {step}: work (blue), waits (orange); grey: instruction starts")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


__all__ = ["Slice", "current_layout", "slices", "chrome_trace", "opcode_table", "critical_path", "table_text", "timeline_png"]
