"""The k-slices of NORM_GATE_UP on the GPU: ms per token of the graph build and the megakernel for each
candidate slice count S, interleaved in one process on the same weights (tiling_bench.json, DESIGN.md
results contract).

Why: the 27B's gate_up has 136 row groups (17,408 rows / 128) for 132 SMs, so with one k-slice four
blocks run a second tile alone (the trace shows ~60 us a layer with 128 SMs idle). More slices cut the
tiles smaller (272, 544, .. tiles) at the price of partial sums and a reduce stage.

  python experiments/bench_tiling.py --out DIR [--slices 1,2,4,5,8] [--context 1024]

Only gate_up's S changes (plan.k_slices is wrapped for its shape while each Program is lowered); the
timing is all this measures: a Program with a non-default S does not match the reference's engine sums.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys

from megakernel import abtest, plan
from megakernel.provenance import git_commit


@contextlib.contextmanager
def gate_up_slices(config, slices: int):
    """plan.k_slices answers `slices` for the gate_up shape (both halves' rows over the hidden size)."""
    original = plan.k_slices

    def patched(rows: int, k: int) -> int:
        return slices if (rows, k) == (2 * config.intermediate_size, config.hidden_size) else original(rows, k)

    plan.k_slices = patched
    try:
        yield
    finally:
        plan.k_slices = original


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.kernels import read_bandwidth_gbps
    from discrete.launcher import DiscreteProgram
    from megakernel.device import DeviceSession
    from megakernel.models import model_config
    from megakernel.persistent import Megakernel

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--slices", default="1,2,4,5,8")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=16, help="timed passes per variant per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    config = model_config(args.model)
    capacity = args.context + args.tokens + 1
    variants = {}
    weights = None
    for s in (int(v) for v in args.slices.split(",")):
        with gate_up_slices(config, s):
            program = lower(config, rows=1, sms=132, capacity=capacity)
        gate_up = next(w for w in program.words if w.opcode.name == "NORM_GATE_UP")
        assert gate_up.k_slices == s, (gate_up.k_slices, s)
        weights = weights or device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        session.set_tokens([9707], config.vocab_size)
        graph, mega = DiscreteProgram(program, weights, session), Megakernel(program, weights, session)
        variants[s] = (session, graph, mega, gate_up.tiles, gate_up.reduce_tiles)
        print(f"S = {s}: gate_up {gate_up.tiles} main tiles, {gate_up.reduce_tiles} reduce tiles", flush=True)
    backends = {}
    for s, (_, graph, mega, _, _) in variants.items():
        backends[f"graph S={s}"] = graph.launch_graph
        backends[f"megakernel S={s}"] = lambda mega=mega: mega.launch(1)

    def start_at(context: int) -> None:
        for session, *_ in variants.values():
            session.set_position(context - 1)

    def timer(step) -> float:
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        step()
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop)

    start_at(args.context)
    for step in backends.values():  # warm-up: graph capture, module load
        step()
    samples = abtest.interleave(backends, [args.context], args.tokens, args.rounds, start_at, timer)
    for _, _, mega, _, _ in variants.values():
        mega.check()
    rows = []
    for name in backends:
        backend, s = name.split(" S=")
        values = [x.ms for x in samples if x.backend == name]
        st = abtest._stats(values)
        _, _, _, tiles, reduce_tiles = variants[int(s)]
        rows.append({"backend": backend, "gate_up_slices": int(s), "gate_up_tiles": tiles,
                     "gate_up_reduce_tiles": reduce_tiles, "context": args.context, "rows": 1,
                     "ms_per_token": st["median"], "p10": st["p10"], "p90": st["p90"]})
        print(f"{name:<16} {st['median']:.3f} ms/token (p10 {st['p10']:.3f}, p90 {st['p90']:.3f})", flush=True)
    os.makedirs(args.out, exist_ok=True)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
        "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": args.model,
        "read_bandwidth_gbps": read_bandwidth_gbps(), "steps": rows,
        "samples": [{"backend": x.backend, "round": x.round, "ms": x.ms} for x in samples],
    }
    with open(os.path.join(args.out, "tiling_bench.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
