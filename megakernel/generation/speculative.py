"""Speculative decoding: k drafted tokens checked by one verify pass of k + 1 rows, accepted from the
front (greedy: while they equal the target's own choice; sampled: by the exact rejection rule), and the
session rolled back to the accepted rows.

Rollback (docs/ISA.md "Speculative passes"): KV caches and the conv ring are indexed by position, so
rows past the committed position are simply overwritten later; only the GDN recurrent state cannot be
rewound. A verify pass therefore stores the state as it was before its rows (they stay provisional,
their raw inputs kept in the conv and gate rings); commit(j + 1) moves the position back to the first
rejected row, and the next pass folds the j + 1 kept rows into the state before its own. The result is
the state plain decoding would have reached, bit for bit.

The backend (generate.ProgramBackend: the CPU interpreter, the graph and megakernel builds) offers
start / reset / run_rows / greedy_step (plain passes), verify / verify_logits / commit (a speculative
pass and its rollback) and mtp_prefill / mtp_next / mtp_logits (the MTP head on the same session).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from isa.opcodes import MAX_ROWS

from ..errors import InputError
from .passes import MAX_PROMPT_ROWS, prompt_chunks
from ..model.sampling import (
    SamplingParams,
    greedy,
    greedy_accept,
    inverse_cdf,
    make_rng,
    probabilities,
    sample,
    speculative_step,
)

MAX_DRAFTS = MAX_ROWS - 1  # a verify pass checks the current token and k drafts in at most MAX_ROWS rows


def check_draft_count(k: int) -> None:
    if not 1 <= k <= MAX_DRAFTS:
        raise InputError(f"--spec-k / k must be 1..{MAX_DRAFTS} (a verify pass has at most {MAX_ROWS} rows), got {k}")


# drafts(emitted, k): k guesses of the tokens after `emitted` (the tokens generated so far, the current
# input last)
Drafter = Callable[[list[int], int], list[int]]


def generate_greedy(backend, prompt_ids: list[int], max_new_tokens: int, k: int, drafts: Drafter,
                    defined_vocab: int) -> tuple[list[int], list[int]]:
    """Greedy generation with k drafts per verify pass. Returns the generated tokens (at least
    max_new_tokens: the last verify pass may emit up to k more; the session holds all but the last of
    them) and the number of drafts accepted at each verify pass."""
    check_draft_count(k)
    emitted = [greedy(backend.start(prompt_ids), defined_vocab)]
    accepted = []
    while len(emitted) < max_new_tokens:
        guess = [int(t) for t in drafts(emitted, k)]
        out = greedy_accept(backend.verify([emitted[-1], *guess]), guess)
        backend.commit(len(out))  # the current token and the accepted drafts: len(out) - 1 of them
        accepted.append(len(out) - 1)
        emitted += out
    return emitted, accepted


# control(emitted, drafts): the drafts a verify pass checks instead of the head's (benchmarks: acceptance
# set by an oracle while the head's drafting still runs and costs what it costs)
Control = Callable[[int, list[int]], list[int]]


def ingest_prompt(backend, prompt_ids: list[int], pick: Callable) -> tuple[int, int]:
    """A new session with the prompt in the target and the MTP head: (the target's token after the prompt,
    chosen by `pick` from its logits; the MTP head's first draft, the token after that). The prompt enters as
    8-row verify-width passes, each followed by the MTP's prefill over its rows, or (where the backend's
    prompt_path sends this prompt through them) through the prompt programs, the last row by one-row passes."""
    if backend.uses_prompt_program(len(prompt_ids)):
        current = pick(backend.start(prompt_ids, mtp=True))
        return current, backend.mtp_prefill([current], len(prompt_ids) - 1, MAX_PROMPT_ROWS - 1)
    backend.reset()
    for i, chunk in enumerate(prompt_chunks(prompt_ids, MAX_PROMPT_ROWS)):
        first = i * MAX_PROMPT_ROWS
        last = first + len(chunk) == len(prompt_ids)
        logits = backend.run_rows(chunk, logits=last)
        following = prompt_ids[first + 1:first + len(chunk) + 1]  # the token after each row's
        if last:
            current = pick(logits)
            following.append(current)
        draft = backend.mtp_prefill(following, first, MAX_PROMPT_ROWS - len(chunk))
    return current, draft


def mtp_batches(backend, prompt_ids: list[int], k: int, defined_vocab: int, capacity: int,
                params: SamplingParams = SamplingParams(),
                control: Control | None = None) -> Iterator[tuple[list[int], int | None]]:
    """Decoding with the model's own MTP head drafting k tokens per verify pass, as the passes produce
    tokens: (tokens, drafts accepted) — first the token after the prompt (None), then each verify pass's
    1..k+1 tokens; when fewer than k + 1 rows are left in the session, one plain pass at a time.

    Greedy (params.temperature 0): drafts are the head's argmax (chained on the device), accepted while
    they equal the target's. Sampled: each draft is drawn on the host from the head's distribution q and
    fed to the next chained pass; the verify pass's rows give p; sampling.speculative_step's exact rule
    keeps the emitted tokens distributed as the target's own samples. The head is prefilled over the
    prompt (each target hidden row paired with the next token) and, after each verify pass, over the kept
    rows. Its cache is indexed by position, so rejected drafts need no rollback there either."""
    check_draft_count(k)
    sampled = params.temperature > 0
    if sampled and control is not None:
        raise ValueError("controlled drafts are for greedy decoding")
    rng = make_rng(params.seed)

    def pick(logits) -> int:  # the target's own choice from a row of logits
        return sample(logits, params, rng, defined_vocab) if sampled else greedy(logits, defined_vocab)

    def drafts(first: int) -> tuple[list[int], list]:  # k drafts and, sampled, the distributions drawn from
        if not sampled:
            return [first] + [backend.mtp_next() for _ in range(k - 1)], []
        guess, q_rows = [], []
        for i in range(k):
            if i:
                backend.mtp_next(guess[-1])
            q_rows.append(probabilities(backend.mtp_logits(), params, defined_vocab))
            guess.append(inverse_cdf(q_rows[-1], rng.random()))
        return guess, q_rows

    current, draft = ingest_prompt(backend, prompt_ids, pick)
    yield [current], None
    emitted = 1
    while (position := backend.position) + k + 1 <= capacity:  # one read of the device's position a pass
        guess, q_rows = drafts(draft)
        if control is not None:
            guess = [int(t) for t in control(emitted, guess)]
        chosen = backend.verify([current, *guess])
        if sampled:
            p_rows = [probabilities(row, params, defined_vocab) for row in backend.verify_logits()]
            out = speculative_step(p_rows, q_rows, guess, rng)
        else:
            out = greedy_accept(chosen, guess)
        backend.commit(len(out))
        current = out[-1]
        emitted += len(out)
        yield out, len(out) - 1
        draft = backend.mtp_prefill(out, position, MAX_PROMPT_ROWS - (k + 1))
    while True:
        current = pick(backend.step(current)) if sampled else backend.greedy_step(current)
        yield [current], None


def generate_greedy_mtp(backend, prompt_ids: list[int], max_new_tokens: int, k: int,
                        defined_vocab: int) -> tuple[list[int], list[int]]:
    """mtp_batches until at least max_new_tokens: the tokens (the session holds all but the last) and the
    drafts accepted at each verify pass."""
    return take(mtp_batches(backend, prompt_ids, k, defined_vocab, backend.capacity), max_new_tokens)


def take(batches: Iterator[tuple[list[int], int | None]], n: int) -> tuple[list[int], list[int]]:
    """Batches until at least n tokens: the tokens and the drafts accepted at each verify pass."""
    emitted, accepted = [], []
    for tokens, kept in batches:
        emitted += tokens
        if kept is not None:
            accepted.append(kept)
        if len(emitted) >= n:
            return emitted, accepted
    raise AssertionError("the batches ended before n tokens")


def plain_batches(backend, prompt_ids: list[int], defined_vocab: int) -> Iterator[tuple[list[int], None]]:
    """Plain greedy decoding as mtp_batches' batches: one token per pass."""
    current = greedy(backend.start(prompt_ids), defined_vocab)
    while True:
        yield [current], None
        current = backend.greedy_step(current)


def plain_greedy(backend, prompt_ids: list[int], max_new_tokens: int, defined_vocab: int) -> list[int]:
    """The same generation one token per pass: what speculative decoding must reproduce."""
    return take(plain_batches(backend, prompt_ids, defined_vocab), max_new_tokens)[0]


def oracle_drafts(reference: list[int]) -> Drafter:
    """Drafts taken from a plain run's tokens: every draft is accepted."""
    return lambda emitted, k: [reference[min(len(emitted) + i, len(reference) - 1)] for i in range(k)]


def wrong_at(reference: list[int], index: int, vocab: int) -> Drafter:
    """The plain run's tokens with draft `index` (0-based) replaced by another id: drafts before it
    are accepted, it and those after are rejected (index >= k: all accepted)."""
    good = oracle_drafts(reference)

    def drafts(emitted, k):
        out = good(emitted, k)
        if index < k:
            out[index] = (out[index] + 1) % vocab
        return out
    return drafts


__all__ = ["MAX_DRAFTS", "Control", "Drafter", "check_draft_count", "generate_greedy", "generate_greedy_mtp",
           "mtp_batches", "plain_batches", "plain_greedy", "oracle_drafts", "wrong_at"]
