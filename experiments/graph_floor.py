"""The step's bytes through the step's launches at the stream rate: what any CUDA graph of this Program's
words, one launch a word, could reach if every kernel were a bare streaming read (D57). Each word of the
27B Program (M-row pass at --context) becomes one launch of `read_after_previous` (discrete/kernels.cu: the
discrete kernels' wait for the launch before, then 16-byte streaming loads over the whole grid) over as
many bytes as the word reads (budgets.instruction_bytes); successive words read successive bytes of one
buffer larger than the step, so nothing is served from L2. The launches are captured in a CUDA graph,
overlapped as the discrete build overlaps its launches (programmatic dependent launch) or one after the
other, and replayed; a single launch over all the step's bytes is the floor itself. Writes graph_floor.json
(docs/RESULTS_FILES.md).

With --engine the 27B synthetic weights are generated on the GPU and the graph build's own launches of one
class of words (GEMV; GDN_CORE and attention) stand in for their bare reads, one class at a time and all
words together (the graph step itself), overlapped: what each class's kernels cost above their bytes in
the step's own launch structure; with --by-kind also each kind of GEMV word (in_proj, gate_up, .., head)
alone. A partly replaced step leaves garbage in the arena; the classes' own times did not move with it over
the rounds, but the whole step's did (0.13-0.18 ms slower after them, D57), so the bare graphs and the whole
step take all their rounds before any partly replaced step runs (timing_order).

  python experiments/graph_floor.py --out DIR [--context 1024] [--rows 1] [--iters 20] [--rounds 3]
                                    [--blocks-per-sm 4] [--engine [--by-kind]]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys

import numpy as np

from megakernel.provenance import git_commit

ALIGN = 256  # each word's bytes start on their own lines


def word_bytes(program, context: int) -> list[tuple[str, int]]:
    """(name, bytes) of every word the discrete build launches, in program order."""
    from isa import Op
    from megakernel.measurement.budgets import instruction_bytes

    names = program.meta["instructions"]
    return [(names[i], instruction_bytes(program, w, context)) for i, w in enumerate(program.words)
            if w.opcode != Op.NOP]


def word_class(word) -> str:
    """gemv, gdn, attention or other (embed, argmax, handoff)."""
    from isa import GEMV_OPS, Op

    if word.opcode in GEMV_OPS:
        return "gemv"
    if word.opcode == Op.GDN_CORE:
        return "gdn"
    if word.opcode in (Op.ATTN_SCORES, Op.ATTN_PV, Op.ATTN_MERGE):
        return "attention"
    return "other"


# The rest (embed, argmax, handoff) are not a variant of their own. With words replaced by reads the arena
# fills with garbage (residual rows that only grow, NaN logits), so argmax may hand the next pass's embed an
# index outside the table (an illegal address, seen): every replay sets its input tokens again, and the
# whole step runs first.
ENGINE_VARIANTS = (("engine_all", {"gemv", "gdn", "attention", "other"}), ("engine_gemv", {"gemv"}),
                   ("engine_gdn_attention", {"gdn", "attention"}))
CLEAN = ("one_launch_a_word_overlapped", "one_launch_a_word_serial", "one_launch", "engine_all")


def timing_order(names: list[str], rounds: int) -> list[str]:
    """The variants in turn, `rounds` times: first those that leave the arena as a real step leaves it (bare
    reads write nothing; the whole step), then the partly replaced steps, which leave garbage in it."""
    clean = [n for n in names if n in CLEAN]
    return clean * rounds + [n for n in names if n not in CLEAN] * rounds


def captured(launches):
    """A CUDA graph of `launches` (DependentLaunch) issued in order on a capturing stream."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            for launch in launches:
                launch.launch(stream.ptr)
        finally:
            graph = stream.end_capture()
    return graph


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.dependent_launch import DependentLaunch
    from discrete.kernels import module, read_bandwidth_gbps
    from megakernel.measurement.abtest import median_event_ms
    from megakernel.model.models import model_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="the variants timed in turn this many times")
    parser.add_argument("--blocks-per-sm", type=int, default=4, help="read blocks of 512 threads an SM")
    parser.add_argument("--engine", action="store_true",
                        help="also each class of words by the graph build's own launches (weights made on the GPU)")
    parser.add_argument("--by-kind", action="store_true", help="with --engine: each kind of GEMV word alone too")
    args = parser.parse_args()

    config = model_config(args.model)
    program = lower(config, rows=args.rows, sms=132, capacity=args.context + 64)
    words = word_bytes(program, args.context)
    offsets = np.cumsum([0] + [-(-b // ALIGN) * ALIGN for _, b in words])
    total = int(offsets[-1])
    bandwidth = read_bandwidth_gbps()
    buffer = cupy.empty(total + ALIGN, dtype=cupy.uint8)  # read, never written: its contents do not matter
    sink = cupy.zeros(1, dtype=cupy.uint32)
    kernel = module().get_function("read_after_previous")
    sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
    grid = sms * args.blocks_per_sm

    def launches(overlap: bool):
        return [DependentLaunch(kernel, grid, 512, 0,
                                (buffer[int(o):int(o) + b], np.uint32(-(-b // 16)), sink), overlap)
                for (_, b), o in zip(words, offsets)]

    step_bytes = sum(b for _, b in words)
    floor_ms = step_bytes / (bandwidth * 1e6)
    graphs = [("one_launch_a_word_overlapped", captured(launches(True))),
              ("one_launch_a_word_serial", captured(launches(False))),
              ("one_launch", captured([DependentLaunch(kernel, grid, 512, 0, (buffer, np.uint32(total // 16), sink),
                                                       False)]))]
    session = None
    if args.engine:
        from bench_step import TOKEN

        from discrete.backend import device_weights
        from discrete.launcher import DiscreteProgram
        from megakernel.runtime.device import DeviceSession

        weights = device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        session.set_tokens([TOKEN] * args.rows, config.vocab_size)
        runner = DiscreteProgram(program, weights, session)  # kept: its launches point into its counters
        engine = dict(runner.launches)  # word index -> its launch
        bare = launches(True)
        indices = [i for i, w in enumerate(program.words) if i in engine]
        assert len(indices) == len(bare), "one bare read a launched word"
        names = program.meta["instructions"]
        chosen = [(name, lambda i, classes=classes: word_class(program.words[i]) in classes)
                  for name, classes in ENGINE_VARIANTS]
        if args.by_kind:  # the GEMV words by the name after their layer: in_proj, gate_up, .., head
            kinds = sorted({names[i].split(".")[-1] for i in indices if word_class(program.words[i]) == "gemv"})
            chosen += [(f"engine_{kind}", lambda i, kind=kind: word_class(program.words[i]) == "gemv"
                        and names[i].split(".")[-1] == kind) for kind in kinds]
        for name, real in chosen:
            graphs.append((name, captured([engine[i] if real(i) else bare[j] for j, i in enumerate(indices)])))

    def replay(graph):
        if session is not None:  # the engine's HANDOFF moves the position on: each replay at --context
            session.set_position(args.context - 1)
            session.set_tokens([TOKEN] * args.rows, config.vocab_size)
        graph.launch(cupy.cuda.get_current_stream())

    # the variants in turn, --rounds times (timed once each, the first read 2 % slow in one process), each
    # variant's median over its rounds
    by_name = dict(graphs)
    times = {name: [] for name, _ in graphs}
    for name in timing_order([name for name, _ in graphs], args.rounds):
        times[name].append(median_event_ms(functools.partial(replay, by_name[name]), args.iters))
    variants = []
    for name, _ in graphs:
        ms = float(np.median(times[name]))
        variants.append({"variant": name, "launches": 1 if name == "one_launch" else len(words), "ms": round(ms, 4),
                         "rounds_ms": [round(t, 4) for t in times[name]], "floor_fraction": round(floor_ms / ms, 4)})
        print(f"{name:30s} {ms:7.3f} ms  {floor_ms / ms:6.1%} of the floor ({floor_ms:.3f} ms)", flush=True)
    os.makedirs(args.out, exist_ok=True)
    result = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "git_commit": git_commit(),
              "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
              "model": args.model, "read_bandwidth_gbps": round(bandwidth, 1), "context": args.context,
              "rows": args.rows, "grid": grid, "step_bytes": step_bytes, "floor_ms": round(floor_ms, 4),
              "variants": variants, "words": [{"name": n, "bytes": b} for n, b in words]}
    with open(os.path.join(args.out, "graph_floor.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
