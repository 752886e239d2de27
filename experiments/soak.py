"""Soak (issue 8): --tokens (default 10,000) greedy tokens on the 27B synthetic model in the graph build and
in the megakernel, one session each on one copy of the weights: the two token streams and final session
states (control, KV and MTP caches, GDN states, rings, hidden rows) must be identical; the device's free
memory and CuPy's pool must not change from the first pass to the last; time per token is reported per
window of --window tokens (host wall clock, every round trip included) and, to separate drift from the
context's growth, one-row passes are timed at the same context (CUDA events) before and after. The
final session is then forked (DeviceSession.copy_from) and the fork's cost measured. Writes soak.json.

  python experiments/soak.py --out DIR [--tokens 10000] [--window 1000] [--model synthetic:qwen3.5-27b]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

PROMPT = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 6, 7, 12, 13, 14, 15, 16]
PROBE_CONTEXT = 1024


def probe_ms(backend, iters: int = 20) -> float:
    """Median device ms of the one-row pass at PROBE_CONTEXT (it writes that position: run it only when
    the session's contents no longer matter)."""
    from megakernel.measurement.specbench import pass_ms

    return pass_ms(backend, backend._runner(1), PROBE_CONTEXT, iters)


def fork_cost(session, prefix: int, repeats: int = 5) -> dict:
    """DeviceSession.copy_from (a fork, megakernel/runtime/session_pool.py) of `session` into a new session: ms
    between CUDA events around it (the host's enqueueing of one copy per buffer included), bytes copied."""
    import cupy

    from megakernel.measurement.abtest import event_ms
    from megakernel.runtime.device import DeviceSession

    child = DeviceSession(session.program, session.arena.size)
    sizes = []
    times = [event_ms(lambda: sizes.append(child.copy_from(session))) for _ in range(repeats)]
    copied = sizes[-1]
    equal = bool(cupy.array_equal(child.arena[:prefix], session.arena[:prefix]))
    return {"position": session.position, "bytes": copied, "ms_median": round(float(np.median(times)), 4),
            "gb_per_s": round(copied / (float(np.median(times)) * 1e-3) / 1e9, 1), "equal": equal}


def decode(backend, tokens: int, window: int) -> dict:
    """Greedy decoding from PROMPT to `tokens` tokens; ms/token per window; device memory around it."""
    import cupy

    from megakernel.model.sampling import greedy

    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    free0, used0, held0 = cupy.cuda.runtime.memGetInfo()[0], pool.used_bytes(), pool.total_bytes()
    out = [greedy(backend.start(PROMPT), backend.defined_vocab)]
    windows, t = [], time.perf_counter()
    while len(out) < tokens:
        out.append(backend.greedy_step(out[-1]))
        if len(out) % window == 0:
            now = time.perf_counter()
            windows.append(round((now - t) * 1e3 / window, 4))
            t = now
    cupy.cuda.Device().synchronize()
    free1, used1, held1 = cupy.cuda.runtime.memGetInfo()[0], pool.used_bytes(), pool.total_bytes()
    return {"tokens": out, "ms_per_token_by_window": windows,
            "device_free_bytes": [int(free0), int(free1)], "pool_used_bytes": [int(used0), int(used1)],
            "pool_held_bytes": [int(held0), int(held1)], "position": backend.position}


def main() -> None:
    import cupy

    from discrete.backend import DiscreteBackend
    from discrete.kernels import read_bandwidth_gbps
    from megakernel.provenance import git_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    capacity = max(len(PROMPT) + args.tokens + 16, PROBE_CONTEXT)  # room for the probe in short soaks
    builds, runs, probes = {}, {}, {}
    weights = None
    for mode in ("graph", "megakernel"):
        builds[mode] = DiscreteBackend(args.model, capacity, mode, weights=weights)
        weights = builds[mode].weights
    for mode, backend in builds.items():
        backend.prepare(len(PROMPT))  # every Program the run uses, built and loaded before it
        probes[mode] = [probe_ms(backend)]
        runs[mode] = decode(backend, args.tokens, args.window)
        print(mode, {k: v for k, v in runs[mode].items() if k != "tokens"}, flush=True)
    graph, mega = builds["graph"], builds["megakernel"]
    prefix = graph.session.program.state_end
    same_tokens = runs["graph"]["tokens"] == runs["megakernel"]["tokens"]
    same_state = bool(cupy.array_equal(graph.session.arena[:prefix], mega.session.arena[:prefix]))
    valid = all(0 <= t < graph.defined_vocab for t in runs["graph"]["tokens"])
    fork = fork_cost(mega.session, prefix)
    print("fork", fork, flush=True)
    for mode, backend in builds.items():  # after the comparison: the probe writes the session
        probes[mode].append(probe_ms(backend))
    checks = [{"name": "graph and megakernel tokens identical", "passed": same_tokens,
               "detail": sum(a != b for a, b in zip(runs["graph"]["tokens"], runs["megakernel"]["tokens"],
                                                    strict=True))},
              {"name": "final session states byte-identical", "passed": same_state, "detail": f"{prefix} bytes"},
              {"name": "every token a defined id", "passed": valid, "detail": ""},
              {"name": "a fork of the final session equals it", "passed": fork.pop("equal"), "detail": ""}]
    for mode, r in runs.items():
        windows = r["ms_per_token_by_window"]
        x = (np.arange(len(windows)) + 0.5) * args.window
        r["slope_ms_per_1k_tokens"] = round(float(np.polyfit(x, windows, 1)[0]) * 1e3, 4) if len(windows) > 1 else None
        r["probe_ms_at_context_1024"] = {"before": probes[mode][0], "after": probes[mode][1],
                                         "drift": round(probes[mode][1] / probes[mode][0] - 1, 4)}
        unchanged = r["device_free_bytes"][0] == r["device_free_bytes"][1] and \
            r["pool_used_bytes"][0] == r["pool_used_bytes"][1] and r["pool_held_bytes"][0] == r["pool_held_bytes"][1]
        checks.append({"name": f"{mode}: device memory unchanged over the decode", "passed": unchanged,
                       "detail": {k: r[k] for k in ("device_free_bytes", "pool_used_bytes", "pool_held_bytes")}})
        r["token_count"] = len(r.pop("tokens"))
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
        "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": args.model,
        "read_bandwidth_gbps": read_bandwidth_gbps(), "prompt_tokens": len(PROMPT), "capacity": capacity,
        "window": args.window, "runs": runs, "fork": fork, "checks": checks,
    }
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    for c in checks:
        print(("PASS " if c["passed"] else "FAIL ") + c["name"], flush=True)
    if not all(c["passed"] for c in checks):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
