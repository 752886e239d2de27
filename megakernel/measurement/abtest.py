"""The A/B experiment: backends run interleaved in one process on the same weights and session, one token
per timed pass, and the summary the results contract asks for (docs/RESULTS_FILES.md).

Interleaving: for each context, `rounds` rounds; in each round every backend runs `tokens` passes from
the same starting position, the backends' order rotating from round to round so that none always goes
first. The ratio megakernel / graph is taken per round (median over the round's passes), so its spread
across rounds is the experiment's own noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sample:
    backend: str
    context: int
    round: int
    ms: float  # one pass (one token)


def interleave(backends: dict[str, Callable[[], None]], contexts: list[int], tokens: int, rounds: int,
               start_at: Callable[[int], None], timer: Callable[[Callable[[], None]], float],
               context_done: Callable[[list[Sample]], None] | None = None) -> list[Sample]:
    """Time every backend's passes: start_at(context) puts the session at a context, timer(step) runs one
    pass and returns its milliseconds; context_done(samples so far), if given, after each context's rounds
    (the bench writes what it has, so that a run stopped at a time limit keeps its finished contexts)."""
    names = list(backends)
    samples = []
    for context in contexts:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                start_at(context)
                for _ in range(tokens):
                    samples.append(Sample(name, context, r, timer(backends[name])))
        if context_done is not None:
            context_done(list(samples))
    return samples


def event_ms(step: Callable[[], None]) -> float:
    """One call of step() timed between CUDA events on the current stream (GPU; cupy imported here)."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    step()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop)


def median_event_ms(step: Callable[[], None], iters: int) -> float:
    """Median of `iters` event_ms(step) after one untimed call (module loads, graph capture, first touch)."""
    step()
    return float(np.median([event_ms(step) for _ in range(iters)]))


def stats(values) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(v)), "p10": float(np.percentile(v, 10)), "p90": float(np.percentile(v, 90))}


def summarize(samples: list[Sample], floor_ms: dict[int, float]) -> dict:
    """`steps` (per backend and context: ms per token median, p10, p90 and the fraction of the floor) and
    `ratio_megakernel_over_graph` (per context, over rounds) in the results contract's layout."""
    steps = []
    keys = sorted({(s.backend, s.context) for s in samples}, key=lambda k: (k[1], k[0]))
    for backend, context in keys:
        st = stats([s.ms for s in samples if s.backend == backend and s.context == context])
        steps.append({"backend": backend, "context": context, "rows": 1, "ms_per_token": st["median"],
                      "p10": st["p10"], "p90": st["p90"], "floor_fraction": floor_ms[context] / st["median"]})
    ratios = {}
    if {"megakernel", "graph"} <= {s.backend for s in samples}:
        by_round: dict[tuple, list[float]] = {}
        for s in samples:
            by_round.setdefault((s.backend, s.context, s.round), []).append(s.ms)
        for context in sorted({s.context for s in samples}):
            rounds = sorted({s.round for s in samples if s.context == context})
            ratios[str(context)] = stats([np.median(by_round["megakernel", context, r]) /
                                           np.median(by_round["graph", context, r]) for r in rounds])
    return {"steps": steps, "ratio_megakernel_over_graph": ratios}


def plot(samples: list[Sample], path: str) -> None:
    """Per-token latency over the run, one panel per context, one line per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contexts = sorted({s.context for s in samples})
    fig, axes = plt.subplots(1, len(contexts), figsize=(5 * len(contexts), 4), squeeze=False)
    for ax, context in zip(axes[0], contexts, strict=True):
        for backend in sorted({s.backend for s in samples}):
            ms = [s.ms for s in samples if s.backend == backend and s.context == context]
            ax.plot(ms, label=backend, linewidth=0.8)
        ax.set_title(f"context {context}")
        ax.set_xlabel("pass (token), rounds in order")
        ax.set_ylabel("ms")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


__all__ = ["Sample", "event_ms", "interleave", "median_event_ms", "summarize", "plot"]
