"""The whole decode step on the 27B synthetic model (weights generated on the GPU): ms/token for the
discrete build (eager, graph) and the megakernel (one launch per pass, and 8 passes per launch) at
several contexts, interleaved on the same weights and session; per-instruction device time with its
bytes and fraction of the measured read bandwidth; graph-node count; the cost of an M-row pass for
M = 1..8 relative to M = 1 (graph and megakernel), and for M = 1, 4, 8 per instruction and by opcode. Writes step_bench.json (docs/RESULTS_FILES.md).

  python experiments/bench_step.py --out DIR [--iters 20] [--contexts 1024,4096,32768]

Contexts are reached by setting the control block's position (the KV rows read are the cache's zeros:
the same bytes and work as real keys). Every timing is CUDA events around device work in one process.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys
import time

from bench_gemv import graph_us, read_bandwidth

from megakernel.measurement.abtest import median_event_ms
from megakernel.measurement.budgets import instruction_bytes
from megakernel.provenance import git_commit

TOKEN = 9707
LOOP_STEPS = 8  # passes per launch in the in-kernel loop variant
PROFILED_ROWS = (1, 4, 8)  # M-row passes timed word by word too


def at_context(runner, context: int, fn):
    def run():
        runner.session.set_position(context - 1)
        fn()
    return run


def per_instruction(runner, program, context: int, reps: int = 10, iters: int = 5, only=None) -> list[dict]:
    """Device time of each word (its launches), by bench_gemv.graph_us: the launches
    repeated `reps` times in one CUDA graph, replayed `iters` times between CUDA events (host launch cost
    and event overhead excluded). Only HANDOFF moves the position, and only after its own timing.
    `only`: the word indices to time (default all)."""
    runner.session.set_position(context - 1)
    names = program.meta["instructions"]
    out = []
    for i in sorted({launch[0] for launch in runner.launches}):
        if only is not None and i not in only:
            continue
        mine = [launch for launch in runner.launches if launch[0] == i]
        us, _, _ = graph_us(lambda _, mine=mine: [runner._launch(launch) for launch in mine], iters, reps)
        out.append({"index": i, "name": names[i], "op": program.words[i].opcode.name, "us": round(us, 2),
                    "launches": len(mine), "bytes": instruction_bytes(program, program.words[i], context)})
    return out


def us_by_op(kernels: list[dict]) -> dict[str, float]:
    """Per-instruction device time summed by opcode."""
    out: dict[str, float] = {}
    for k in kernels:
        out[k["op"]] = round(out.get(k["op"], 0.0) + k["us"], 2)
    return out


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.launcher import DiscreteProgram
    from megakernel.runtime.device import DeviceSession
    from megakernel.model.models import model_config
    from megakernel.runtime.persistent import Megakernel

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--contexts", default="1024,4096,32768")
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    bandwidth = read_bandwidth(20)
    print(f"read bandwidth {bandwidth:.0f} GB/s", flush=True)
    config = model_config(args.model)
    capacity = max(contexts) + 64
    program = lower(config, rows=1, sms=132, capacity=capacity)
    t0 = time.perf_counter()
    weights = device_weights(program, args.model, progress=False)
    cupy.cuda.Device().synchronize()
    print(f"weights on the GPU in {time.perf_counter() - t0:.1f} s", flush=True)
    session = DeviceSession(program)
    runner = DiscreteProgram(program, weights, session)
    session.set_tokens([TOKEN], config.vocab_size)
    chosen = []
    for _ in range(4):
        runner.step()
        chosen.append(session.tokens_out()[0])
    print("greedy tokens from position 0:", chosen, flush=True)
    mega = Megakernel(program, weights, session)  # same weights, same session: interleaved A/B
    steps = []
    for context in contexts:
        eager = median_event_ms(at_context(runner, context, runner.launch_eager), args.iters)
        graph = median_event_ms(at_context(runner, context, runner.launch_graph), args.iters)
        persistent = median_event_ms(at_context(runner, context, functools.partial(mega.launch, 1)), args.iters)
        loop = median_event_ms(at_context(runner, context, functools.partial(mega.launch, LOOP_STEPS)), args.iters) / LOOP_STEPS
        mega.check()
        floor_bytes = sum(instruction_bytes(program, w, context) for w in program.words)
        floor_ms = floor_bytes / bandwidth / 1e6
        steps.append({"context": context, "eager_ms": round(eager, 3), "graph_ms": round(graph, 3),
                      "megakernel_ms": round(persistent, 3), f"megakernel_{LOOP_STEPS}_per_launch_ms": round(loop, 3),
                      "bytes": floor_bytes, "floor_ms": round(floor_ms, 3),
                      "graph_fraction_of_floor": round(floor_ms / graph, 4),
                      "megakernel_fraction_of_floor": round(floor_ms / persistent, 4),
                      "megakernel_over_graph": round(persistent / graph, 4)})
        print(steps[-1], flush=True)
    kernels = per_instruction(runner, program, contexts[0])
    for k in kernels:
        k["fraction_of_bandwidth"] = round(k["bytes"] / (k["us"] * 1e-6) / 1e9 / bandwidth, 4) if k["bytes"] else None
    nodes = runner.graph_nodes
    runner = session = mega = None  # free the session's arena before the M-row programs
    cupy.get_default_memory_pool().free_all_blocks()
    rows = []
    for m in range(1, 9):
        pm = lower(config, rows=m, sms=132, capacity=capacity)
        sm = DeviceSession(pm)
        rm, mm = DiscreteProgram(pm, weights, sm), Megakernel(pm, weights, sm)
        sm.set_tokens([TOKEN] * m, config.vocab_size)
        ms = median_event_ms(at_context(rm, contexts[0], rm.launch_graph), args.iters)
        mk_ms = median_event_ms(at_context(rm, contexts[0], functools.partial(mm.launch, 1)), args.iters)
        mm.check()
        rows.append({"rows": m, "graph_ms": round(ms, 3), "megakernel_ms": round(mk_ms, 3)})
        if m in PROFILED_ROWS:  # where an M-row pass's extra time goes, word by word
            rows[-1]["kernels"] = per_instruction(rm, pm, contexts[0])
            rows[-1]["us_by_op"] = us_by_op(rows[-1]["kernels"])
            print(m, "rows, us by opcode:", rows[-1]["us_by_op"], flush=True)
        rm = mm = sm = None
        cupy.get_default_memory_pool().free_all_blocks()
    for r in rows:
        r["relative_to_1"] = round(r["graph_ms"] / rows[0]["graph_ms"], 3)
        r["megakernel_relative_to_1"] = round(r["megakernel_ms"] / rows[0]["megakernel_ms"], 3)
    print(rows, flush=True)
    os.makedirs(args.out, exist_ok=True)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "git_commit": git_commit(),
        "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
        "model": args.model, "read_bandwidth_gbps": round(bandwidth, 1), "words": len(program.words),
        "graph_nodes": nodes,
        "greedy_tokens": chosen, "steps": steps, "kernels": kernels, "m_rows": rows,
    }
    with open(os.path.join(args.out, "step_bench.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
