"""`megakernel bench --spec-k K`: what speculative decoding costs and earns on the GPU builds.

Measured, per build (graph, megakernel), on one set of device weights:
* pass costs (CUDA events around the pass's launches, median of `iters`, at a fixed context): the
  target pass over M = 1..8 rows (a verify pass of k drafts has k + 1 rows), a one-row pass that first
  re-folds k + 1 pending rows (the rollback's price, D18), the MTP prefill pass over 1..8 rows and the
  chained one-row draft pass, over the full head and over the working vocabulary (megakernel/
  draft_vocab.py), and the rebuild of the working vocabulary's gathered head;
* end-to-end greedy decoding (host wall clock, every host round trip included): plain, speculative with
  the MTP head's drafts over the full or the working vocabulary (random synthetic weights: its
  acceptance means nothing), and speculative with
  drafts an oracle makes right with probability alpha each (the head still runs and costs what it
  costs); tokens per second after the first token;
* time to first token for prompts of several lengths through 8-row passes (and 1-row passes for the
  shortest).
Derived (marked so in the JSON): tokens per second against alpha for k = 1..7 from the measured pass
costs, E[tokens per verify pass] = (1 - alpha^(k+1)) / (1 - alpha).
"""

from __future__ import annotations

import time

import numpy as np

from isa.opcodes import CTRL_PENDING

from .abtest import median_event_ms
from ..generation.generate import MAX_PROMPT_ROWS
from ..model.sampling import greedy
from ..generation.speculative import mtp_batches, plain_batches, plain_greedy

RATES = (0.0, 0.5, 0.85, 1.0)


def pass_ms(backend, runner, context: int, iters: int, pending: int = 0) -> float:
    """Median device ms of one pass of `runner` at `context` (its lane's position set before every pass;
    `pending` rows re-folded first). The passes write the session: time them when its contents do not
    matter."""
    from discrete.backend import device_pass

    session = backend.session
    session.set_position(context - 1, runner.program)
    session.check_room(program=runner.program)  # here, since the timed launches skip the host's checks
    launch = device_pass(runner, backend.mode)  # no host-side checks inside the timing

    def one():
        session.set_position(context - 1, runner.program)
        launch()
    session.set_control(CTRL_PENDING, pending)
    try:
        return round(median_event_ms(one, iters), 4)
    finally:
        if backend.mode == "megakernel":
            runner.check()
        session.set_control(CTRL_PENDING, 0)


def pass_costs(backend, k: int, context: int, iters: int) -> dict:
    """Device ms of each pass kind at `context` (the session's position set before every pass)."""

    def timed(runner, pending: int = 0) -> float:
        return pass_ms(backend, runner, context, iters, pending)

    rows = range(1, MAX_PROMPT_ROWS + 1)
    target = {str(m): timed(backend._runner(m)) for m in rows}
    costs = {
        "context": context,
        "target_ms_by_rows": target,
        "target_relative_to_1_row": {m: round(t / target["1"], 4) for m, t in target.items()},
        "refold_pending_rows": k + 1,
        "one_row_with_refold_ms": timed(backend._runner(1), pending=k + 1),
        "mtp_prefill_ms_by_rows": {str(m): timed(backend._mtp_runner(m)) for m in rows},
        "mtp_chained_ms": timed(backend._mtp_runner(1, chained=True)),
    }
    # the same MTP passes drafting over the working vocabulary, and the price of rebuilding its head
    backend.set_draft_vocab()
    try:
        backend._sync_draft_vocab([])
        table = backend._draft_table
        costs["working_vocab"] = {
            "rows": len(table),
            "mtp_prefill_ms_by_rows": {str(m): timed(backend._mtp_runner(m)) for m in rows},
            "mtp_chained_ms": timed(backend._mtp_runner(1, chained=True)),
            "rebuild_ms": round(median_event_ms(lambda: backend._write_draft_vocab(table), iters), 4),
        }
    finally:
        backend.set_draft_vocab(None)
    return costs


def controlled(reference: list[int], alpha: float, vocab: int, seed: int):
    """A Control whose draft i is the plain run's token with probability alpha, independently per draft
    (else another id): the per-draft acceptance rate of the literature."""
    rng = np.random.default_rng(seed)

    def control(emitted: int, guess: list[int]) -> list[int]:
        out = []
        for i in range(len(guess)):
            right = reference[min(emitted + i, len(reference) - 1)]
            out.append(right if rng.random() < alpha else (right + 1) % vocab)
        return out
    return control


def _decode(batches, tokens: int) -> dict:
    """Drain (tokens, accepted) batches until `tokens` tokens; wall time after the first."""
    import cupy

    emitted, accepted, t_first = [], [], None
    for out, kept in batches:
        emitted += out
        if kept is not None:
            accepted.append(kept)
        if t_first is None:
            cupy.cuda.Device().synchronize()
            t_first = time.perf_counter()
        if len(emitted) >= tokens:
            break
    cupy.cuda.Device().synchronize()
    seconds = time.perf_counter() - t_first
    return {"tokens": emitted, "verify_passes": len(accepted), "drafts_accepted": sum(accepted),
            "tokens_per_s": round((len(emitted) - 1) / seconds, 2), "ms_per_token": round(seconds * 1e3 / (len(emitted) - 1), 3)}


def end_to_end(backend, prompt: list[int], k: int, tokens: int, seed: int) -> dict:
    """Plain greedy, MTP-head speculation and oracle-controlled speculation at RATES; each run's tokens
    checked against the plain run's."""
    vocab, dv, cap = backend.vocab, backend.defined_vocab, backend.capacity
    plain = _decode(plain_batches(backend, prompt, dv), tokens)
    reference = plain_greedy(backend, prompt, tokens + k + 2, dv)
    runs = {"plain": {**plain, "k": 0}}
    runs["mtp_head"] = {**_decode(mtp_batches(backend, prompt, k, dv, cap), tokens), "k": k}
    backend.set_draft_vocab()
    try:
        runs["mtp_head_working_vocab"] = {**_decode(mtp_batches(backend, prompt, k, dv, cap), tokens), "k": k}
    finally:
        backend.set_draft_vocab(None)
    for alpha in RATES:
        control = controlled(reference, alpha, vocab, seed)
        runs[f"alpha_{alpha:g}"] = {**_decode(mtp_batches(backend, prompt, k, dv, cap, control=control), tokens),
                                    "k": k, "alpha": alpha}
    for name, run in runs.items():
        got = run.pop("tokens")
        if got[:tokens] != reference[:tokens]:
            raise AssertionError(f"{name}: speculative tokens differ from plain greedy's")
        if run["verify_passes"]:
            run["accepted_fraction"] = round(run["drafts_accepted"] / (k * run["verify_passes"]), 4)
        run["speedup_over_plain"] = round(run["tokens_per_s"] / plain["tokens_per_s"], 4)
    return runs


def time_to_first_token(backend, lengths: list[int], seed: int) -> list[dict]:
    """Wall ms from the prompt's first pass to the first generated token's id on the host."""
    import cupy

    rng = np.random.default_rng(seed)
    out, before = [], backend.prompt_rows
    for n in lengths:
        prompt = rng.integers(0, backend.defined_vocab, n).tolist()
        for rows in (MAX_PROMPT_ROWS, 1) if n == min(lengths) else (MAX_PROMPT_ROWS,):
            backend.prompt_rows = rows
            backend.prepare(n)  # Programs built outside the timing
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            greedy(backend.start(prompt), backend.defined_vocab)
            out.append({"prompt_tokens": n, "prompt_rows": rows, "ms": round((time.perf_counter() - t0) * 1e3, 1)})
    backend.prompt_rows = before
    return out


def derived_curves(costs: dict, ks=range(1, 8), alphas=np.linspace(0, 1, 21), working_vocab: bool = False) -> dict:
    """Tokens/s against alpha for each k from one build's pass costs (derived, not measured): a verify
    pass of k + 1 rows that re-folds the previous pass's kept rows (~ E[kept] pending rows: bounded by
    the measured k + 1 refold overhead), an MTP prefill over E[kept] rows, k - 1 chained drafts (over the
    full head, or the working vocabulary's)."""
    target = costs["target_ms_by_rows"]
    drafts = costs["working_vocab"] if working_vocab else costs
    prefill, chained = drafts["mtp_prefill_ms_by_rows"], drafts["mtp_chained_ms"]
    refold = costs["one_row_with_refold_ms"] - target["1"]
    out = {}
    for k in ks:
        curve = []
        for a in alphas:
            per_pass = (k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)
            kept = max(1, min(MAX_PROMPT_ROWS, round(per_pass)))
            ms = target[str(k + 1)] + refold + prefill[str(kept)] + (k - 1) * chained
            curve.append(round(1e3 * per_pass / ms, 2))
        out[str(k)] = curve
    return {"alphas": [round(float(a), 3) for a in alphas], "tokens_per_s_by_k": out,
            "plain_tokens_per_s": round(1e3 / target["1"], 2)}


def run(model: str, k: int, modes: list[str], context: int, tokens: int, prompt_tokens: int,
        ttft_lengths: list[int], iters: int, seed: int = 0) -> dict:
    from discrete.backend import DiscreteBackend

    capacity = max([context + 16, max(ttft_lengths) + 16, prompt_tokens + tokens + 2 * k + 16])
    prompt = np.random.default_rng(seed).integers(0, 1 << 30, prompt_tokens).tolist()
    weights, result = None, {"k": k, "context": context, "prompt_tokens": prompt_tokens, "tokens": tokens,
                             "builds": {}}
    for mode in modes:
        backend = DiscreteBackend(model, capacity, mode, weights=weights)
        weights = backend.weights
        prompt = [t % backend.defined_vocab for t in prompt]
        costs = pass_costs(backend, k, context, iters)
        print(mode, "pass costs", costs, flush=True)
        runs = end_to_end(backend, prompt, k, tokens, seed)
        for name, r in runs.items():
            print(mode, name, r, flush=True)
        ttft = time_to_first_token(backend, ttft_lengths, seed)
        print(mode, "time to first token", ttft, flush=True)
        result["builds"][mode] = {"pass_costs": costs, "decode": runs, "time_to_first_token": ttft,
                                  "derived": derived_curves(costs),
                                  "derived_working_vocab": derived_curves(costs, working_vocab=True)}
        backend = None
    return result


def plot(result: dict, path: str) -> None:
    """Left: pass cost against rows (both builds). Right: tokens/s against alpha, derived curves for the
    run's k and measured points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    k = result["k"]
    for mode, b in result["builds"].items():
        relative = b["pass_costs"]["target_relative_to_1_row"]
        left.plot([int(m) for m in relative], list(relative.values()), marker="o", label=mode)
        d = b["derived"]
        line, = right.plot(d["alphas"], d["tokens_per_s_by_k"][str(k)], label=f"{mode}, derived (k = {k})")
        w = b["derived_working_vocab"]
        right.plot(w["alphas"], w["tokens_per_s_by_k"][str(k)], color=line.get_color(), linestyle="--",
                   label=f"{mode}, derived, working-vocabulary drafts")
        runs = [r for r in b["decode"].values() if "alpha" in r]
        right.scatter([r["alpha"] for r in runs], [r["tokens_per_s"] for r in runs], color=line.get_color(),
                      label=f"{mode}, measured")
        right.axhline(b["decode"]["plain"]["tokens_per_s"], color=line.get_color(), linestyle=":", linewidth=0.8)
    left.axhline(1.15, color="grey", linestyle="--", linewidth=0.8, label="target 1.15")
    left.set_xlabel("rows M of the pass (k + 1)")
    left.set_ylabel("pass time / 1-row pass time")
    left.legend()
    right.set_xlabel("per-draft acceptance rate alpha (oracle-controlled)")
    right.set_ylabel("tokens / s (dotted: plain decoding, measured)")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


__all__ = ["RATES", "controlled", "derived_curves", "end_to_end", "pass_costs", "pass_ms", "plot", "run",
           "time_to_first_token"]
