"""GEMV tiling rules on the GPU: ms per token of the graph build and the megakernel for Programs that
differ only in some GEMVs' k-slices and row-group rows, interleaved in one process on the same weights
(tiling_bench.json, docs/RESULTS_FILES.md).

Why: the 27B's gate_up has 136 row groups for 132 SMs, its in_proj 130, its out_proj and down 40: more
k-slices cut tiles smaller at the price of partial sums and their reduction, fewer rows per group
(plan.row_tile) at the price of a prologue per tile.

  python experiments/bench_tiling.py --out DIR [--variants landed,v1,gate_up=4,out=1@16] [--context 1024] [--rows 8]

A variant is `landed` (plan.row_tile and plan.k_slices as they are), `v1` (the rule before D17: gate_up
and qkv one slice) or overrides joined by '+': name=S or name=S@R (R rows per row group), e.g.
gate_up=4+qkv=1 or in_proj=1@128+out=3@128 (names: a GEMV's last name part in plan.gemv_groups, e.g. gate_up,
qkv, down, in_proj; out is out_proj's shape, o_proj's too where attn_out_dim equals gdn_value_dim, as on
the 27B). A Program with
other slices than plan.k_slices does not match the reference's engine sums: only its timing is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys

from megakernel.measurement import abtest
from megakernel.model import plan
from megakernel.provenance import git_commit

V1 = "gate_up=1+qkv=1"


def overrides(config, variant: str) -> tuple[dict, dict]:
    """({(segment rows, k): rows per group}, {(row groups, k): slices}) of a variant for this config's
    GEMV shapes."""
    if variant == "landed":
        return {}, {}
    shapes = {}  # a GEMV's last name part -> its shape, from the plan's own list
    for g in plan.gemv_groups(config):
        shapes.setdefault(g.name.split(".")[-1], (g.segment_rows, g.k, g.paired))
    shapes["out"] = shapes["out_proj"]  # and o_proj, whose shape it is on the 27B
    rows_table, slices_table = {}, {}
    for item in (V1 if variant == "v1" else variant).split("+"):
        name, value = item.split("=")
        segment_rows, k, paired = shapes[name]
        slices, _, rows = value.partition("@")
        rows = int(rows) if rows else (config.head_dim if name == "qkv" else plan.row_tile(segment_rows, k, paired))
        if name != "qkv":
            rows_table[(segment_rows, k)] = rows
        slices_table[(plan.row_groups(segment_rows, rows, paired), k)] = int(slices)
    return rows_table, slices_table


@contextlib.contextmanager
def tiling_overridden(tables: tuple[dict, dict]):
    rows_table, slices_table = tables
    row_tile, k_slices = plan.row_tile, plan.k_slices
    plan.row_tile = lambda segment_rows, k, paired=False: rows_table.get((tuple(segment_rows), k)) or \
        row_tile(segment_rows, k, paired)
    plan.k_slices = lambda groups, k: slices_table.get((groups, k)) or k_slices(groups, k)
    try:
        yield
    finally:
        plan.row_tile, plan.k_slices = row_tile, k_slices


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.kernels import read_bandwidth_gbps
    from discrete.launcher import DiscreteProgram
    from megakernel.runtime.device import DeviceSession
    from megakernel.model.models import model_config
    from megakernel.runtime.persistent import Megakernel

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--variants", default="landed,v1")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=16, help="timed passes per variant per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1, help="rows M of every pass (1..8)")
    args = parser.parse_args()
    config = model_config(args.model)
    capacity = args.context + args.rows * (args.tokens + 1)
    variants = {}
    weights = None
    for v in args.variants.split(","):
        with tiling_overridden(overrides(config, v)):
            program = lower(config, rows=args.rows, sms=132, capacity=capacity)
        slices = {op: f"{w.k_slices}@{w.tile_rows}" for op in ("NORM_GEMV", "NORM_GATE_UP", "NORM_GEMV_QKV",
                                                               "GEMV_RESIDUAL")
                  for w in [next(w for w in program.words if w.opcode.name == op)]}
        weights = weights or device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        session.set_tokens([9707] * args.rows, config.vocab_size)
        graph, mega = DiscreteProgram(program, weights, session), Megakernel(program, weights, session)
        variants[v] = (session, graph, mega, slices)
        print(f"{v}: k-slices {slices}", flush=True)
    backends = {}
    for v, (_, graph, mega, _) in variants.items():
        backends[f"graph {v}"] = graph.launch_graph
        backends[f"megakernel {v}"] = lambda mega=mega: mega.launch(1)

    def start_at(context: int) -> None:
        for session, *_ in variants.values():
            session.set_position(context - 1)

    start_at(args.context)
    for step in backends.values():  # warm-up: graph capture, module load
        step()
    samples = abtest.interleave(backends, [args.context], args.tokens, args.rounds, start_at, abtest.event_ms)
    for _, _, mega, _ in variants.values():
        mega.check()
    rows = []
    for name in backends:
        backend, v = name.split(" ", 1)
        st = abtest.stats([x.ms for x in samples if x.backend == name])
        rows.append({"backend": backend, "variant": v, "k_slices": variants[v][3], "context": args.context,
                     "rows": args.rows, "ms_per_token": st["median"], "p10": st["p10"], "p90": st["p90"]})
        print(f"{name:<24} {st['median']:.3f} ms/token (p10 {st['p10']:.3f}, p90 {st['p90']:.3f})", flush=True)
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
