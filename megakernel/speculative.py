"""Speculative greedy decoding: k drafted tokens checked by one verify pass of k + 1 rows, accepted from
the front while they equal the target's own choice, and the session rolled back to the accepted rows.

Rollback (docs/ISA.md "Speculative passes"): KV caches and the conv ring are indexed by position, so
rows past the committed position are simply overwritten later; only the GDN recurrent state cannot be
rewound. A verify pass therefore stores the state as it was before its rows (they stay provisional,
their raw inputs kept in the conv and gate rings); commit(j + 1) moves the position back to the first
rejected row, and the next pass folds the j + 1 kept rows into the state before its own. The result is
the state plain decoding would have reached, bit for bit.

The backend (generate.InterpreterBackend on the CPU; the GPU builds are issue 7's next step) offers
start / reset / run_rows / greedy_step (plain passes), verify / commit (a speculative pass and its
rollback) and mtp_prefill / mtp_next (the MTP head on the same session).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .generate import MAX_PROMPT_ROWS
from .sampling import greedy, greedy_accept

# drafts(emitted, k): k guesses of the tokens after `emitted` (the tokens generated so far, the current
# input last)
Drafter = Callable[[list[int], int], list[int]]


def generate_greedy(backend, prompt_ids: list[int], max_new_tokens: int, k: int, drafts: Drafter,
                    defined_vocab: int) -> tuple[list[int], list[int]]:
    """Greedy generation with k drafts per verify pass. Returns the generated tokens (at least
    max_new_tokens: the last verify pass may emit up to k more; the session holds all but the last of
    them) and the number of drafts accepted at each verify pass."""
    if not 1 <= k <= 7:
        raise ValueError(f"k must be 1..7 (a verify pass has at most 8 rows), got {k}")
    emitted = [greedy(backend.start(prompt_ids), defined_vocab)]
    accepted = []
    while len(emitted) < max_new_tokens:
        guess = [int(t) for t in drafts(emitted, k)]
        out = greedy_accept(backend.verify([emitted[-1], *guess]), guess)
        backend.commit(len(out))  # the current token and the accepted drafts: len(out) - 1 of them
        accepted.append(len(out) - 1)
        emitted += out
    return emitted, accepted


def mtp_batches(backend, prompt_ids: list[int], k: int, defined_vocab: int,
                capacity: int) -> Iterator[tuple[list[int], int | None]]:
    """Greedy decoding with the model's own MTP head drafting k tokens per verify pass, as the passes
    produce tokens: (tokens, drafts accepted) — first the token after the prompt (None), then each verify
    pass's 1..k+1 tokens; when fewer than k + 1 rows are left in the session, one plain pass at a time.
    The head is prefilled over the prompt (each target hidden row paired with the next token) and, after
    each verify pass, over the kept rows, then drafts by chained passes. Its cache is indexed by position,
    so rejected drafts need no rollback there either."""
    if not 1 <= k <= 7:
        raise ValueError(f"k must be 1..7 (a verify pass has at most 8 rows), got {k}")
    backend.reset()
    for first in range(0, len(prompt_ids), MAX_PROMPT_ROWS):
        chunk = prompt_ids[first:first + MAX_PROMPT_ROWS]
        logits = backend.run_rows(chunk)
        following = prompt_ids[first + 1:first + len(chunk) + 1]  # the token after each row's
        if first + len(chunk) == len(prompt_ids):
            current = greedy(logits, defined_vocab)
            following.append(current)
        draft = backend.mtp_prefill(following, first, MAX_PROMPT_ROWS - len(chunk))
    yield [current], None
    while backend.position + k + 1 <= capacity:
        guess = [draft] + [backend.mtp_next() for _ in range(k - 1)]
        position = backend.position
        out = greedy_accept(backend.verify([current, *guess]), guess)
        backend.commit(len(out))
        current = out[-1]
        yield out, len(out) - 1
        draft = backend.mtp_prefill(out, position, MAX_PROMPT_ROWS - (k + 1))
    while True:
        current = backend.greedy_step(current)
        yield [current], None


def generate_greedy_mtp(backend, prompt_ids: list[int], max_new_tokens: int, k: int,
                        defined_vocab: int) -> tuple[list[int], list[int]]:
    """mtp_batches until at least max_new_tokens: the tokens (the session holds all but the last) and the
    drafts accepted at each verify pass."""
    emitted, accepted = [], []
    for tokens, kept in mtp_batches(backend, prompt_ids, k, defined_vocab, backend.capacity):
        emitted += tokens
        if kept is not None:
            accepted.append(kept)
        if len(emitted) >= max_new_tokens:
            return emitted, accepted
    raise AssertionError("mtp_batches never ends")


def plain_greedy(backend, prompt_ids: list[int], max_new_tokens: int, defined_vocab: int) -> list[int]:
    """The same generation one token per pass: what speculative decoding must reproduce."""
    emitted = [greedy(backend.start(prompt_ids), defined_vocab)]
    while len(emitted) < max_new_tokens:
        emitted.append(backend.greedy_step(emitted[-1]))
    return emitted


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


__all__ = ["Drafter", "generate_greedy", "generate_greedy_mtp", "mtp_batches", "plain_greedy", "oracle_drafts",
           "wrong_at"]
