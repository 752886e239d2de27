"""Where the graph build's step goes, block by block, with its launches overlapped as the engine runs them
(D58): every launch of `--steps` whole steps captured in one CUDA graph, each block stamping %globaltimer
at its start, past its wait for the launch before (griddepcontrol.wait) and at its end (common.cuh
graph_trace, built only with MEGAKERNEL_GRAPH_TRACE). The records have the megakernel trace's layout
([steps][words][blocks][start, ready, end, tiles]), so `trace.critical_path` reads both builds the same way:
per word, the time it adds to the step (from the latest block end before it to its own last end) and its
release (from that same point to its first block past the wait). With --megakernel the megakernel's own
trace of the same Program, weights and session is taken in the same process and reported beside it.

Writes graph_trace.json (per opcode and per word, both builds) and the raw records
(graph_records_mM.npz, megakernel_records_mM.npz: `megakernel trace --records`'s format, so
trace_report.py reads them too). The step's time with and without the stamps (the same graph with slot 0)
is timed in the same process: the probe's own cost.

  python experiments/graph_trace.py --out DIR [--rows 1,8] [--context 1024] [--steps 2] [--megakernel]
"""

from __future__ import annotations

import os

os.environ["MEGAKERNEL_GRAPH_TRACE"] = "1"  # before any module is built

import argparse
import collections
import datetime
import json
import sys

import numpy as np

from megakernel.provenance import git_commit


def traced_launches(runner, steps: int) -> list:
    """The runner's launches for `steps` steps, each with its launch program's trace slot set (word i of
    step s in slot s * words + i, stored plus one: 0 leaves a launch untraced)."""
    from discrete.launcher import launch_args

    words = len(runner.program.words)
    return [launch.with_args(launch_args(runner.program, i, runner.session.arena, runner.weights.data,
                                         runner.arrivals, s * words + i + 1))
            for s in range(steps) for i, launch in runner.launches]


def records_of(trace, steps: int, words: int, blocks: int) -> np.ndarray:
    """[steps][words][blocks][4] uint64 from the device's mk_graph_trace slots."""
    return trace[:steps * words, :blocks].get().reshape(steps, words, blocks, 4)


def per_word(program, records: np.ndarray, step: int) -> list[dict]:
    """Each word of pass `step`: us added to the step and us from the latest end before it to its release."""
    from megakernel.measurement import trace

    added, gaps = trace.critical_path(records, step)
    names = program.meta["instructions"]
    return [{"index": i, "name": names[i], "op": w.opcode.name, "added_us": round(added[i] / 1e3, 3),
             "release_us": round(gaps[i] / 1e3, 3)} for i, w in enumerate(program.words)]


def by_opcode(rows: list[dict]) -> dict[str, dict]:
    table = collections.defaultdict(lambda: {"words": 0, "added_us": 0.0, "release_us": 0.0})
    for r in rows:
        t = table[r["op"]]
        t["words"] += 1
        t["added_us"] += r["added_us"]
        t["release_us"] += r["release_us"]
    return {op: {k: round(v, 1) if isinstance(v, float) else v for k, v in t.items()} for op, t in table.items()}


def main() -> None:
    import cupy
    from bench_step import TOKEN
    from graph_floor import captured

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.kernels import module
    from discrete.launcher import DiscreteProgram
    from megakernel.measurement.abtest import median_event_ms
    from megakernel.model.models import model_config
    from megakernel.runtime import cuda_build
    from megakernel.runtime.device import DeviceSession
    from megakernel.runtime.persistent import Megakernel

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--steps", type=int, default=2, help="whole steps in the traced graph (>= 2: the first is "
                        "the second's start)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--megakernel", action="store_true", help="trace the megakernel too, same process")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2")

    config = model_config(args.model)
    common = cuda_build.CUDA_DIR / "common.cuh"
    shape = (cuda_build.define(common, "GRAPH_TRACE_SLOTS"), cuda_build.define(common, "GRAPH_TRACE_BLOCKS"), 4)
    trace = cupy.ndarray(shape, dtype=cupy.uint64, memptr=module().get_global("mk_graph_trace"))
    weights, results = None, []
    os.makedirs(args.out, exist_ok=True)
    for m in (int(r) for r in args.rows.split(",")):
        program = lower(config, rows=m, sms=132, capacity=args.context + m * (args.steps + 2) * 4)
        words = len(program.words)
        if args.steps * words > trace.shape[0]:
            raise SystemExit(f"{args.steps} steps of {words} words need more than {trace.shape[0]} trace slots")
        if weights is None:
            weights = device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        runner = DiscreteProgram(program, weights, session)
        blocks = max(w.tiles for w in program.words)
        if blocks > trace.shape[1]:
            raise SystemExit(f"a word of {blocks} tiles: the trace holds {trace.shape[1]} blocks a launch")
        plain = captured([launch for _ in range(args.steps) for _, launch in runner.launches])
        traced = captured(traced_launches(runner, args.steps))

        def replay(graph):
            session.set_position(args.context - 1)
            session.set_tokens([TOKEN] * m, config.vocab_size)
            graph.launch(cupy.cuda.get_current_stream())

        ms = {"plain": [], "traced": []}
        for _ in range(3):  # in turn: the probe's cost against the same graph without stamps
            for name, graph in (("plain", plain), ("traced", traced)):
                ms[name].append(median_event_ms(lambda g=graph: replay(g), args.iters) / args.steps)
        trace.fill(0)
        replay(traced)
        cupy.cuda.Device().synchronize()
        graph_records = records_of(trace, args.steps, words, blocks)
        np.savez_compressed(os.path.join(args.out, f"graph_records_m{m}.npz"), records=graph_records,
                            model=args.model, context=args.context, capacity=program.meta["capacity"])
        rows = per_word(program, graph_records, args.steps - 1)
        entry = {"rows": m, "step_ms_plain": round(float(np.median(ms["plain"])), 4),
                 "step_ms_traced": round(float(np.median(ms["traced"])), 4),
                 "graph_step_us": round(sum(r["added_us"] for r in rows), 1), "graph": by_opcode(rows)}
        print(f"M = {m}: graph {entry['step_ms_plain']:.3f} ms a step plain, {entry['step_ms_traced']:.3f} traced; "
              f"traced step {entry['graph_step_us']:.0f} us", flush=True)
        if args.megakernel:
            mega = Megakernel(program, weights, session)
            mega.reset()
            session.set_tokens([TOKEN] * m, config.vocab_size)
            session.set_position(args.context - 1)
            mega.run(1)  # module load, first touch
            session.set_position(args.context - 1)
            mk_records = mega.trace_buffer(args.steps)
            mega.run(args.steps, trace=mk_records)
            mk_records = mk_records.get()
            np.savez_compressed(os.path.join(args.out, f"megakernel_records_m{m}.npz"), records=mk_records,
                                model=args.model, context=args.context, capacity=program.meta["capacity"])
            mk_rows = per_word(program, mk_records, args.steps - 1)
            for r, k in zip(rows, mk_rows, strict=True):
                r["megakernel_added_us"], r["megakernel_release_us"] = k["added_us"], k["release_us"]
            entry["megakernel_step_us"] = round(sum(r["added_us"] for r in mk_rows), 1)
            entry["megakernel"] = by_opcode(mk_rows)
            print(f"       megakernel traced step {entry['megakernel_step_us']:.0f} us", flush=True)
            mega = None
        print(f"{'opcode':<16}{'words':>6}{'graph added':>13}{'release':>9}" +
              (f"{'mk added':>10}{'release':>9}" if args.megakernel else ""))
        for op, g in sorted(entry["graph"].items(), key=lambda kv: -kv[1]["added_us"]):
            line = f"{op:<16}{g['words']:>6}{g['added_us']:>13.1f}{g['release_us']:>9.1f}"
            if args.megakernel:
                k = entry["megakernel"][op]
                line += f"{k['added_us']:>10.1f}{k['release_us']:>9.1f}"
            print(line, flush=True)
        entry["words"] = rows
        results.append(entry)
        runner = session = None
        cupy.get_default_memory_pool().free_all_blocks()
    result = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "git_commit": git_commit(),
              "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
              "model": args.model, "context": args.context, "traced_steps": args.steps, "passes": results}
    with open(os.path.join(args.out, "graph_trace.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
