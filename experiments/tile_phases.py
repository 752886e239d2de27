"""Where a GEMV word's time goes, tile by tile (discrete build, 27B synthetic weights generated on the GPU):
each main tile's phases by %clock64 (the input rows, split into addressing the prologue's inputs, staging
them and computing the rows (norm and f16 operand); the passes; the epilogue or split-K store) and its start and end by %globaltimer, for one GDN and one attention layer's GEMV words
and the head, at M = 1 and M = 8 rows. Each word is timed as bench_step times it (its launches repeated 10
times in a CUDA graph); the stamps are the last repetition's. Built with MEGAKERNEL_TILE_STAMPS
(gemv_tile.cuh tile_stamp: a block barrier at each stamp, so the probe's build is itself slightly slower).
Writes tile_phases.json.

With --step the words run inside whole steps instead (every launch of the step, captured in a CUDA graph),
so each tile starts with the caches the step leaves it, not those of its own word repeated (D41: a
repeated word likely keeps its records in L2; the step likely does not); --layers does not apply. After
each GEMV launch a device copy moves its tiles' stamps into an archive (one small copy node per GEMV
word); the launches are serial (`overlap=False`: D40 measured the overlap neutral). Writes
step_phases.json, every GEMV word of the step.

With --gdn the chosen layers' GDN_CORE words are probed too (gdn.cuh stamps the same slots: addressing =
every read issued, staging = every read landed, computing = conv and l2norm, passes = the rows and the
state's stores issued, epilogue = the gated norm and the stores' drain).

  python experiments/tile_phases.py --out DIR [--rows 1,8] [--layers 0,3] [--gdn] [--step [--raw]]
"""

from __future__ import annotations

import os

os.environ["MEGAKERNEL_TILE_STAMPS"] = "1"  # before any module is built

import argparse
import datetime
import json
import sys

import numpy as np
from bench_gemv import graph_us
from bench_step import TOKEN

from megakernel.measurement.budgets import instruction_bytes
from megakernel.provenance import git_commit

CONTEXT = 1024
STAMP_BLOCKS, STAMP_SLOTS = 8192, 10  # gemv_tile.cuh


def stamps_of(module):
    import cupy

    ptr = module.get_global("mk_tile_stamps")
    return cupy.ndarray((STAMP_BLOCKS, STAMP_SLOTS), dtype=cupy.uint64, memptr=ptr)


def summarize(s: np.ndarray, tiles: int) -> dict:
    """Per-phase medians and maxima (us) over a word's main tiles; the launch's spread by %globaltimer."""
    s = s[:tiles].astype(np.int64)
    wall = (s[:, 7] - s[:, 6]).astype(float)  # ns
    cycles = (s[:, 4] - s[:, 0]).astype(float)
    ghz = float(cycles.sum() / wall.sum())  # the SM clock over the word's tiles (globaltimer is coarse)
    phases = {"input": s[:, 1] - s[:, 0], "passes": s[:, 3] - s[:, 1], "epilogue": s[:, 4] - s[:, 3],
              "tile": s[:, 4] - s[:, 0]}
    if (s[:, 8] > 0).all() and (s[:, 9] > 0).all():  # the input rows: addressing, staging, computing
        phases["addressing"] = s[:, 8] - s[:, 0]
        phases["staging"] = s[:, 9] - s[:, 8]
        phases["computing"] = s[:, 1] - s[:, 9]
    out = {"tiles": tiles, "sm_ghz": round(ghz, 3)}
    for name, c in phases.items():
        us = c / ghz / 1e3
        out[name + "_us"] = {"median": round(float(np.median(us)), 2), "max": round(float(us.max()), 2)}
    start, end = s[:, 6], s[:, 7]
    out["start_spread_us"] = round(float(start.max() - start.min()) / 1e3, 2)
    out["span_us"] = round(float(end.max() - start.min()) / 1e3, 2)
    out["last_end_after_median_end_us"] = round(float(end.max() - np.median(end)) / 1e3, 2)
    out["max_tiles_per_sm"] = int(np.bincount(s[:, 5]).max())
    return out


def archive_plan(program) -> list[tuple[int, int]]:
    """(word index, tiles) of every GEMV word in program order: the archive's slots, one per word (the
    discrete build runs each GEMV word as one launch)."""
    from isa import GEMV_OPS

    return [(i, w.tiles) for i, w in enumerate(program.words) if w.opcode in GEMV_OPS]


def step_phases(program, runner, stamps, m: int, raw: str | None = None) -> tuple[float, list[dict]]:
    """Whole steps from a CUDA graph with each GEMV launch's stamps copied out after it; (the step's us
    with those copies, one summarize() row per GEMV word, from the last step replayed). With `raw`, every
    tile's stamps go there too (numpy .npz: `stamps` [word][tile][slot] as gemv_tile.cuh writes them,
    unused tiles zero; `names`, `tiles`), for questions the summary cannot answer (which SMs end late)."""
    import cupy

    plan = archive_plan(program)
    slot_of = {i: (j, tiles) for j, (i, tiles) in enumerate(plan)}  # word -> (archive slot, tiles)
    archive = cupy.zeros((len(plan), max(t for _, t in plan), STAMP_SLOTS), dtype=cupy.uint64)
    row_bytes = STAMP_SLOTS * 8

    def one_step(_):
        stream = cupy.cuda.get_current_stream().ptr
        for launch in runner.launches:
            runner._launch(launch, stream)
            if launch[0] in slot_of:
                slot, tiles = slot_of[launch[0]]
                cupy.cuda.runtime.memcpyAsync(archive[slot].data.ptr, stamps.data.ptr, tiles * row_bytes,
                                              cupy.cuda.runtime.memcpyDeviceToDevice, stream)

    us, _, _ = graph_us(one_step, 5, 1)
    names = program.meta["instructions"]
    host = cupy.asnumpy(archive)
    if raw is not None:
        np.savez_compressed(raw, stamps=host, names=np.array([names[i] for i, _ in plan]),
                            tiles=np.array([t for _, t in plan]))
    rows = []
    for j, (i, tiles) in enumerate(plan):
        w = program.words[i]
        row = {"rows": m, "name": names[i], "op": w.opcode.name, "k_slices": w.k_slices, "tile_rows": w.tile_rows,
               "bytes": instruction_bytes(program, w, CONTEXT)}
        row.update(summarize(host[j], tiles))
        rows.append(row)
    return us, rows


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.kernels import module
    from discrete.launcher import DiscreteProgram
    from isa import GEMV_OPS, Op
    from megakernel.runtime.device import DeviceSession
    from megakernel.model.models import model_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--layers", default="0,3", help="layers whose GEMV words are probed (the head always)")
    parser.add_argument("--gdn", action="store_true", help="the layers' GDN_CORE words too (not with --step)")
    parser.add_argument("--step", action="store_true", help="every GEMV word inside whole steps (step_phases.json)")
    parser.add_argument("--raw", action="store_true", help="with --step: every tile's stamps too (step_stamps_mM.npz)")
    args = parser.parse_args()
    if args.raw and not args.step:
        parser.error("--raw needs --step")
    if args.gdn and args.step:
        parser.error("--gdn probes words alone; --step covers the GEMV words only")
    probed = set(GEMV_OPS) | ({Op.GDN_CORE} if args.gdn else set())
    config = model_config(args.model)
    layers = {f"L{i}." for i in args.layers.split(",")}
    weights = None
    results, steps = [], []
    for m in (int(r) for r in args.rows.split(",")):
        # whole steps move the position (HANDOFF): nine of them at M = 8 take it 72 rows on
        program = lower(config, rows=m, sms=132, capacity=CONTEXT + (128 if args.step else 64))
        if weights is None:
            weights = device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        # --step: serial launches, so that no launch waits on a copy node programmatically (overlap was
        # neutral in the step, D40)
        runner = DiscreteProgram(program, weights, session, overlap=not args.step)
        session.set_tokens([TOKEN] * m, config.vocab_size)
        session.set_position(CONTEXT - 1)
        stamps = stamps_of(module())
        if args.step:
            os.makedirs(args.out, exist_ok=True)
            raw = os.path.join(args.out, f"step_stamps_m{m}.npz") if args.raw else None
            us, rows = step_phases(program, runner, stamps, m, raw)
            steps.append({"rows": m, "step_us_with_copies": round(us, 1), "gemv_words": len(rows)})
            print(json.dumps(steps[-1]), flush=True)
            results.extend(rows)
            runner = session = None
            cupy.get_default_memory_pool().free_all_blocks()
            continue
        names = program.meta["instructions"]
        for i, w in enumerate(program.words):
            if w.opcode not in probed or not (names[i][:3] in layers or names[i][:4] in layers
                                                 or w.opcode == Op.NORM_HEAD):
                continue
            mine = [launch for launch in runner.launches if launch[0] == i]
            stamps.fill(0)
            us, _, _ = graph_us(lambda _, mine=mine: [runner._launch(launch) for launch in mine], 5, 10)
            row = {"rows": m, "name": names[i], "op": w.opcode.name, "us": round(us, 2), "launches": len(mine),
                   "k_slices": w.k_slices, "tile_rows": w.tile_rows, "shared_bytes": mine[0][1].shared_bytes,
                   "bytes": instruction_bytes(program, w, CONTEXT)}
            row.update(summarize(cupy.asnumpy(stamps), w.tiles))
            print(json.dumps(row), flush=True)
            results.append(row)
        runner = session = None
        cupy.get_default_memory_pool().free_all_blocks()
    os.makedirs(args.out, exist_ok=True)
    result = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "git_commit": git_commit(),
              "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
              "model": args.model, "context": CONTEXT, "words": results}
    if args.step:
        result["steps"] = steps
    with open(os.path.join(args.out, "step_phases.json" if args.step else "tile_phases.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
