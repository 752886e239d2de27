"""Hang hunting (issue 8): the megakernel launched `--launches` times (default 1,000) on the tiny model with
the watchdog armed, each launch one pass of a random kind (the target over M = 1..8 rows, sometimes
speculative or re-folding pending rows; an MTP prefill pass over 1..8 rows; a chained draft pass) at a
random context with random input tokens, the same pass run by the graph build on its own session; after
every pass the two sessions' state (control, KV and MTP caches, GDN states, rings, hidden rows) and the
pass's logits must be byte-identical. A stall's report file (every block's place, every counter) is
copied to --out; the sessions are then reset and the run goes on. Writes stress.json.

  python experiments/stress.py --out DIR [--launches 1000] [--seed 0] [--capacity 512]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import time

import numpy as np

from isa.opcodes import MAX_ROWS


def main() -> None:
    import cupy

    from discrete.backend import DiscreteBackend
    from discrete.kernels import read_bandwidth_gbps
    from megakernel.runtime.persistent import MegakernelStall
    from megakernel.provenance import git_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--launches", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--capacity", type=int, default=512)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model = "synthetic:tiny"
    graph = DiscreteBackend(model, args.capacity, "graph")
    mega = DiscreteBackend(model, args.capacity, "megakernel", weights=graph.weights)
    vocab = graph.defined_vocab
    rng = np.random.default_rng(args.seed)
    prefix = graph.session.program.state_end  # the session buffers, identical in every Program
    kinds = {"target": 0, "speculative": 0, "refold": 0, "mtp": 0, "mtp-chained": 0}
    rows_seen, stalls, mismatches = np.zeros(MAX_ROWS + 1, int), [], []
    t0 = time.perf_counter()
    for launch in range(args.launches):
        kind = rng.choice(list(kinds), p=[0.4, 0.15, 0.15, 0.15, 0.15])
        m = 1 if kind == "mtp-chained" else int(rng.integers(1, MAX_ROWS + 1))
        position = int(rng.integers(MAX_ROWS, args.capacity - m + 1))  # room for up to 8 pending rows
        tokens = rng.integers(0, vocab, m).tolist()
        pending = int(rng.integers(1, MAX_ROWS + 1)) if kind == "refold" else 0
        mtp = kind.startswith("mtp")
        logits_name = "mtp.logits" if mtp else "logits"
        for backend in (graph, mega):
            runner = backend._mtp_runner(m, chained=kind == "mtp-chained") if mtp else backend._runner(m)
            backend.session.set_position(position, runner.program)
            try:
                if mtp:
                    backend._run_mtp(runner, tokens)
                else:
                    backend._run(runner, tokens, pending, speculative=kind == "speculative")
            except MegakernelStall as stall:
                kept = shutil.copy(stall.report_path, os.path.join(args.out, f"stall_{launch}.json"))
                stalls.append({"launch": launch, "kind": kind, "rows": m, "position": position, "report": kept})
                print(f"launch {launch}: STALL {kind} M={m} at {position}: {stall}", flush=True)
        kinds[kind] += 1
        rows_seen[m] += 1
        if stalls and stalls[-1]["launch"] == launch:
            graph.reset()
            mega.reset()
            continue
        program = runner.program
        same_state = bool(cupy.array_equal(graph.session.arena[:prefix], mega.session.arena[:prefix]))
        same_logits = bool(cupy.array_equal(graph.session.view(logits_name, program),
                                            mega.session.view(logits_name, program)))
        if not (same_state and same_logits):
            mismatches.append({"launch": launch, "kind": kind, "rows": m, "position": position, "pending": pending,
                               "state": same_state, "logits": same_logits})
            print(f"launch {launch}: MISMATCH {mismatches[-1]}", flush=True)
            mega.session.arena[:] = graph.session.arena  # go on from the same state
    seconds = time.perf_counter() - t0
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
        "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": model,
        "read_bandwidth_gbps": read_bandwidth_gbps(), "launches": args.launches, "seed": args.seed,
        "capacity": args.capacity, "watchdog_s": mega.watchdog_s, "seconds": round(seconds, 1),
        "kinds": kinds, "rows": {str(m): int(n) for m, n in enumerate(rows_seen) if n},
        "stalls": stalls, "mismatches": mismatches,
        "checks": [{"name": "no watchdog stall in any launch", "passed": not stalls, "detail": len(stalls)},
                   {"name": "megakernel state and logits byte-identical to the graph build's after every launch",
                    "passed": not mismatches, "detail": len(mismatches)}],
    }
    with open(os.path.join(args.out, "stress.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"{args.launches} launches in {seconds:.1f} s: {len(stalls)} stalls, {len(mismatches)} mismatches; "
          f"kinds {kinds}", flush=True)
    if stalls or mismatches:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
