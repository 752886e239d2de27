"""ms per token of the graph build and the megakernel on the 27B synthetic model (weights generated on the
GPU) at one context, for M-row passes: the quick number to compare source trees run one after another
on the same device (each tree in its own process; alternate them and repeat, as the device drifts by a
few per cent between calls). Writes time_step.json (docs/RESULTS_FILES.md).

  python experiments/time_step.py --out DIR [--rows 1,8] [--context 1024] [--iters 20] [--tag NAME]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys

from bench_step import TOKEN, at_context

from megakernel.measurement.abtest import median_event_ms
from megakernel.provenance import git_commit


def add_tagged_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every tagged per-tree timing script shares (time_step, time_words)."""
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--tag", default="", help="a name for this tree in the output file's name and record")


def row_sessions(args):
    """For each M of --rows: (M, program, weights, session) of the M-row Program at --context (capacity for
    one more pass), its input tokens set; weights are made once. The caller drops what it built on the
    session before asking for the next M, whose arena then reuses the freed device memory."""
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from megakernel.model.models import model_config
    from megakernel.runtime.device import DeviceSession

    config = model_config(args.model)
    weights = None
    for m in (int(r) for r in args.rows.split(",")):
        program = lower(config, rows=m, sms=132, capacity=args.context + 64)
        if weights is None:
            weights = device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        session.set_tokens([TOKEN] * m, config.vocab_size)
        yield m, program, weights, session
        session = None
        cupy.get_default_memory_pool().free_all_blocks()


def main() -> None:
    from discrete.launcher import DiscreteProgram
    from megakernel.runtime.persistent import Megakernel

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tagged_arguments(parser)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    results = []
    for m, program, weights, session in row_sessions(args):
        runner, mega = DiscreteProgram(program, weights, session), Megakernel(program, weights, session)
        graph = median_event_ms(at_context(runner, args.context, runner.launch_graph), args.iters)
        persistent = median_event_ms(at_context(runner, args.context, functools.partial(mega.launch, 1)),
                                     args.iters)
        mega.check()
        results.append({"rows": m, "graph_ms": round(graph, 3), "megakernel_ms": round(persistent, 3)})
        print(json.dumps({"tag": args.tag, **results[-1]}), flush=True)
        runner = mega = session = None
    write_tagged(args, "time_step", results)


def write_tagged(args, stem: str, passes: list[dict]) -> None:
    """DIR/STEM[_TAG].json with the results contract's provenance (docs/RESULTS_FILES.md) and `passes`."""
    import cupy

    os.makedirs(args.out, exist_ok=True)
    result = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "git_commit": git_commit(),
              "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
              "model": args.model, "context": args.context, "tag": args.tag, "passes": passes}
    name = f"{stem}_{args.tag}.json" if args.tag else f"{stem}.json"
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
