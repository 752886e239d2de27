"""Each kind of word in a traced step (CPU only, from graph_trace.py's files): per kind (the word's name after
its layer: in_proj, gate_up, .., head) the us a word adds to the step in the graph build, what its bytes
take at the measured read bandwidth, its release after the word before it, its tail (its last block's end
after its median block's), what it loses to uneven blocks (its last block's end after the end every block
would share were the word's work spread evenly over them: the mean ready time plus the mean time from ready
to end; for words of one wave, not the head's 1,940 tiles) and how far that unevenness follows the block
index (the correlation, between consecutive words of the kind, of each block's time from ready to end: near 1
where a block's placement decides its speed, near 0 where it is chance; `sm_persistence` the same by the SM a
block ran on, where the records hold it: a slow SM rather than a slow block), how far apart the blocks and the
SMs are on average over the kind's words (`block_spread_us`, `sm_spread_us`: the spread, over block indices or
SMs, of each one's mean time from ready to end after its word's median: the us each cause moves a block, D80),
and, where the megakernel was traced too, the us it adds there. Each word's time is also cut into its blocks'
median readiness after the latest end before it (`ready`), their median time from ready to end (`work`) and its
tail, in the graph and, where its records are beside the trace, in the megakernel (`megakernel_ready`, ..): which
part of a word a build loses (D80). Derived from the records of the traced graph's last pass (the one
graph_trace.json's words describe).

  python experiments/graph_trace_report.py experiments/results/graph_trace.json --gbps 4441.8 [--rows 1]
                                           [--against OTHER/graph_trace.json] [--out graph_trace_kinds.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from compiler import lower
from megakernel.measurement.budgets import instruction_bytes
from megakernel.model.models import model_config
from step_tail import kind_of  # the word's name after its layer, as the stamp reports group them


def word_phases(entry: dict, records: np.ndarray) -> dict[int, tuple[float, float, float]]:
    """Per word index (us): its blocks' median ready time after the latest block end of the words before it, their
    median time from ready to end, and its last end after its median end. `records` as kinds() takes them."""
    out, before = {}, None
    for row in entry["words"]:
        r = records[row["index"]]
        ran = (r[:, 3] & 0xFFFFFFFF) > 0
        if not ran.any():
            continue
        start, ready, ends = (r[ran, c].astype(np.int64) for c in (0, 1, 2))
        before = start.min() if before is None else before
        out[row["index"]] = (float(np.median(ready) - before) / 1e3, float(np.median(ends - ready)) / 1e3,
                             float(ends.max() - np.median(ends)) / 1e3)
        before = max(before, ends.max())
    return out


def kinds(program, entry: dict, records: np.ndarray, gbps: float, context: int,
          megakernel: np.ndarray | None = None) -> list[dict]:
    """One row per kind of word, in program order of first appearance. `records`: the pass's
    [words][blocks][4] (start, ready, end, tiles) of the graph build; `megakernel`: the megakernel's of the same
    pass, where traced."""
    table: dict[str, dict] = {}
    graph_phases = word_phases(entry, records)
    megakernel_phases = word_phases(entry, megakernel) if megakernel is not None else None
    spans: dict[str, list[np.ndarray]] = {}  # per kind, each word's ready-to-end times by block
    by_sm: dict[str, list[np.ndarray]] = {}  # and by SM (the records' high word: SM + 1; 0 where not recorded)
    for row in entry["words"]:
        i = row["index"]
        ran = (records[i][:, 3] & 0xFFFFFFFF) > 0
        if not ran.any():
            continue
        ends, ready = records[i][ran, 2].astype(np.int64), records[i][ran, 1].astype(np.int64)
        t = table.setdefault(kind_of(row["name"]), {"kind": kind_of(row["name"]), "words": 0, "added_us": 0.0,
                                                     "bytes_us": 0.0, "release_us": 0.0, "unbalanced_us": 0.0,
                                                     "megakernel_added_us": 0.0, "indices": []})
        t["words"] += 1
        t["indices"].append(i)
        t["added_us"] += row["added_us"]
        t["bytes_us"] += instruction_bytes(program, program.words[i], context) / (gbps * 1e3)
        t["release_us"] += row["release_us"]
        t["unbalanced_us"] += float(ends.max() - ready.mean() - (ends - ready).mean()) / 1e3
        span = np.full(len(ran), -1, np.int64)
        span[ran] = ends - ready
        spans.setdefault(t["kind"], []).append(span)
        after_median = (ends - ready) - np.median(ends - ready)
        _add(t, "block", np.nonzero(ran)[0], after_median, len(ran))
        sm = (records[i][ran, 3] >> np.uint64(32)).astype(np.int64) - 1
        if (sm >= 0).all():
            sms = np.full(SMS, -1, np.int64)
            sms[sm] = ends - ready
            by_sm.setdefault(t["kind"], []).append(sms)
            _add(t, "sm", sm, after_median, SMS)
        t["megakernel_added_us"] += row.get("megakernel_added_us", 0.0)
    out = []
    for t in table.values():
        n = t["words"]
        g_ready, g_work, g_tail = _phase_means(graph_phases, t["indices"])
        m_ready, m_work, m_tail = _phase_means(megakernel_phases, t["indices"])
        out.append({"kind": t["kind"], "words": n, "added_us_a_word": round(t["added_us"] / n, 2),
                    "bytes_us_a_word": round(t["bytes_us"] / n, 2), "release_us_a_word": round(t["release_us"] / n, 2),
                    "tail_us_a_word": g_tail,
                    "unbalanced_us_a_word": round(t["unbalanced_us"] / n, 2),
                    "block_persistence": block_persistence(spans[t["kind"]]),
                    "sm_persistence": block_persistence(by_sm[t["kind"]]) if t["kind"] in by_sm else None,
                    "block_spread_us": _spread(t, "block"), "sm_spread_us": _spread(t, "sm"),
                    "above_bytes_ms": round((t["added_us"] - t["bytes_us"]) / 1e3, 3),
                    "megakernel_added_us_a_word": round(t["megakernel_added_us"] / n, 2),
                    "ready_us_a_word": g_ready, "work_us_a_word": g_work, "megakernel_ready_us_a_word": m_ready,
                    "megakernel_work_us_a_word": m_work, "megakernel_tail_us_a_word": m_tail})
    return out


def _phase_means(by_word: dict | None, indices: list[int]) -> tuple:
    """A kind's mean (ready, work, tail) over its words that ran (us, 2 decimals), from word_phases; Nones where the
    build was not traced."""
    ran = [by_word[i] for i in indices if i in by_word] if by_word is not None else []
    if not ran:
        return None, None, None
    return tuple(round(float(np.mean([phases[p] for phases in ran])), 2) for p in range(3))


SMS = 1024  # above any GPU's SM count: the by-SM arrays' length


def _add(t: dict, by: str, where: np.ndarray, after_median: np.ndarray, size: int) -> None:
    """Each block's (or SM's) time from ready to end after its word's median (ns), summed with a count per index."""
    total, count = t.setdefault(f"{by}_after_median", (np.zeros(size), np.zeros(size)))
    np.add.at(total, where, after_median)
    np.add.at(count, where, 1)


def _spread(t: dict, by: str) -> float | None:
    """The standard deviation, over the indices seen in at least two words, of their mean time after the median
    (us); None where fewer than three such indices."""
    if f"{by}_after_median" not in t:
        return None
    total, count = t[f"{by}_after_median"]
    seen = count >= 2
    return round(float((total[seen] / count[seen]).std()) / 1e3, 2) if seen.sum() >= 3 else None


def block_persistence(spans: list[np.ndarray]) -> float | None:
    """The mean correlation between consecutive words' ready-to-end times of the blocks (or SMs) both ran (-1:
    did not run); None where fewer than two words, or fewer than three such blocks, or no spread."""
    r = []
    for a, b in zip(spans, spans[1:]):
        both = (a >= 0) & (b >= 0)
        if both.sum() >= 3 and a[both].std() > 0 and b[both].std() > 0:
            r.append(float(np.corrcoef(a[both], b[both])[0, 1]))
    return round(float(np.mean(r)), 2) if r else None


def load(trace: str, rows: int, gbps: float) -> tuple[dict, list[dict]]:
    """(graph_trace.json's content, its kinds at `rows`) from the JSON and the records beside it; one clear
    line (SystemExit) for a missing or malformed file or an M it does not hold."""
    try:
        result = json.load(open(trace))
        entry = next((p for p in result["passes"] if p["rows"] == rows), None)
        if entry is None:
            raise SystemExit(f"{trace} has no pass of {rows} rows")
        path = os.path.join(os.path.dirname(trace), f"graph_records_m{rows}.npz")
        saved = np.load(path, allow_pickle=False)
        records, capacity, context = saved["records"], int(saved["capacity"]), result["context"]
        mk_path = os.path.join(os.path.dirname(trace), f"megakernel_records_m{rows}.npz")  # where traced and kept
        megakernel = np.load(mk_path, allow_pickle=False)["records"] if os.path.exists(mk_path) else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{trace}: not a graph trace with its records beside it ({type(e).__name__}: {e})") from None
    program = lower(model_config(result["model"]), rows=rows, sms=132, capacity=capacity)  # as graph_trace.py lowered it
    if (records.shape[1] != len(program.words) or len(entry["words"]) != len(program.words)
            or (megakernel is not None and megakernel.shape[1] != len(program.words))):
        raise SystemExit(f"{trace}: its records do not match the Program of {result['model']} at {rows} rows")
    return result, kinds(program, entry, records[-1], gbps, context, None if megakernel is None else megakernel[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="graph_trace.json (its records beside it)")
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--gbps", type=float, required=True, help="the read bandwidth measured on the device")
    parser.add_argument("--against", help="another graph_trace.json: each kind's us a word in it, and the change")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    result, rows = load(args.trace, args.rows, args.gbps)
    other = {r["kind"]: r for r in load(args.against, args.rows, args.gbps)[1]} if args.against else {}
    print(f"{'kind':<10}{'words':>6}{'us a word':>11}{'bytes us':>10}{'release':>9}{'tail':>7}{'uneven':>8}"
          f"{'by block':>9}{'by SM':>7}{'block us':>9}{'SM us':>7}{'above bytes ms':>16}{'megakernel us':>15}"
          + (f"{'against':>9}{'change':>8}" if other else ""))
    for r in rows:
        line = (f"{r['kind']:<10}{r['words']:>6}{r['added_us_a_word']:>11.1f}{r['bytes_us_a_word']:>10.1f}"
                f"{r['release_us_a_word']:>9.2f}{r['tail_us_a_word']:>7.2f}{r['unbalanced_us_a_word']:>8.2f}"
                f"{'-' if r['block_persistence'] is None else r['block_persistence']:>9}"
                f"{'-' if r['sm_persistence'] is None else r['sm_persistence']:>7}"
                f"{'-' if r['block_spread_us'] is None else r['block_spread_us']:>9}"
                f"{'-' if r['sm_spread_us'] is None else r['sm_spread_us']:>7}{r['above_bytes_ms']:>16.3f}"
                f"{r['megakernel_added_us_a_word']:>15.1f}")
        if r["kind"] in other:
            them = other[r["kind"]]["added_us_a_word"]
            line += f"{them:>9.1f}{r['added_us_a_word'] - them:>+8.2f}"
        print(line)
    print(f"\n{'kind':<10}{'ready':>8}{'work':>8}{'tail':>8}  (us a word: graph" +
          (" | megakernel)" if rows and rows[0]["megakernel_work_us_a_word"] is not None else ")"))
    for r in rows:
        cells = [r["ready_us_a_word"], r["work_us_a_word"], r["tail_us_a_word"]]
        if r["megakernel_work_us_a_word"] is not None:
            cells += [r["megakernel_ready_us_a_word"], r["megakernel_work_us_a_word"], r["megakernel_tail_us_a_word"]]
        print(f"{r['kind']:<10}" + "".join(f"{'-' if c is None else round(c, 2):>8}" for c in cells))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": "python " + " ".join(sys.argv), "source": args.trace,
                       "git_commit": result["git_commit"], "rows": args.rows, "read_bandwidth_gbps": args.gbps,
                       "kinds": rows}, f, indent=2)


if __name__ == "__main__":
    main()
