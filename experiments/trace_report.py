"""Where the megakernel's time goes, from a saved trace (CPU only): per opcode, the critical-path time of
one traced pass against the graph build's per-word device time of the same commit (a step_bench.json, or
time_words.py's JSON of every word), and optionally a timeline PNG of a window of that pass.

  python experiments/trace_report.py --records experiments/results/trace_27b_records.npz \
      --graph experiments/results/step_bench.json [--plot layer.png --window 0,700]

The records come from `megakernel trace --records` (the raw per-block records, the model, the context
and the capacity the Program was lowered with, so the Program is rebuilt here bit for bit); records saved
before D50 (a reduce stage per word) are merged per block and word (trace.current_layout).
"""

from __future__ import annotations

import argparse
import collections
import json

import numpy as np

from compiler import lower
from megakernel.measurement import trace
from megakernel.model.models import model_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", required=True, help=".npz written by megakernel trace --records")
    parser.add_argument("--graph", required=True, help="the graph's per-word device time: step_bench.json, or "
                        "time_words.py's JSON of every word at one M (its 1-row pass)")
    parser.add_argument("--step", type=int, default=1, help="the traced pass to report (>= 1)")
    parser.add_argument("--plot", help="timeline PNG of the pass")
    parser.add_argument("--window", help="microseconds from the pass's first start, e.g. 0,700")
    args = parser.parse_args()
    saved = np.load(args.records, allow_pickle=False)
    records = trace.current_layout(saved["records"])
    program = lower(model_config(str(saved["model"])), rows=1, capacity=int(saved["capacity"]))
    timed = json.load(open(args.graph))
    kernels = timed["kernels"] if "kernels" in timed else next(p["kernels"] for p in timed["passes"] if p["rows"] == 1)
    graph = {k["index"]: k for k in kernels}
    if len(graph) != len(program.words):
        raise SystemExit(f"{args.graph} describes {len(graph)} words, the traced Program has {len(program.words)}")
    added, gaps = trace.critical_path(records, args.step)
    rows = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for i, w in enumerate(program.words):
        r = rows[w.opcode.name]
        r[0] += 1
        r[1] += added[i] / 1e3
        r[2] += graph[i]["us"]
        r[3] += gaps[i] / 1e3
    print(f"pass {args.step}: {added.sum() / 1e6:.3f} ms from the previous pass's last tile to its own; "
          f"the graph's words add up to {sum(k['us'] for k in graph.values()) / 1e3:.3f} ms\n")
    print("| opcode | words | megakernel critical path us | graph device us | difference | signal-to-start us |")
    print("|---|---|---|---|---|---|")
    total = np.zeros(4)
    for op, (n, mk, gr, gap) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"| {op} | {n} | {mk:.0f} | {gr:.0f} | {mk - gr:+.0f} | {gap:.0f} |")
        total += (n, mk, gr, gap)
    print(f"| all | {total[0]:.0f} | {total[1]:.0f} | {total[2]:.0f} | {total[1] - total[2]:+.0f} | {total[3]:.0f} |")
    if args.plot:
        window = tuple(float(v) for v in args.window.split(",")) if args.window else None
        trace.timeline_png(records, program, args.plot, step=args.step, window=window)
        print(f"\nwrote {args.plot}")


if __name__ == "__main__":
    main()
