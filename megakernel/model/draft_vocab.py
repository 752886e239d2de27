"""The MTP draft head's working vocabulary: the lm_head rows of a fixed core set of ids and of the ids
the session has seen, gathered into the session (buffers `mtp.draft_head`, `mtp.draft_ids`), so that a
draft reads ~8k head rows instead of all 248,320 (the head is most of a draft's bytes: docs/SPEC-qwen35.md section 6).

A draft is only a guess: any subset of the vocabulary keeps speculative decoding exact (a draft outside
it is simply never proposed). The table is sorted by id so that ties go to the lowest id as in the full
head, and padded to its fixed row count with copies of its first id: a copy ties with the original and
loses (same value, larger row index), so padding never changes the choice.

The core set is ids [0, DRAFT_CORE): for a byte-level BPE vocabulary the single bytes and the earliest
(most frequent) merges. That choice is a heuristic, not measured: with synthetic weights the head's
acceptance means nothing (issue 7).
"""

from __future__ import annotations

import numpy as np

from .config import ModelConfig

DRAFT_CORE = 4096  # ids always in the working vocabulary
DRAFT_ROWS = 8192  # rows of the gathered head: the core plus room for 4096 session ids (84 MB on the 27B)


def draft_rows(config: ModelConfig) -> int:
    """Rows of the session's working-vocabulary head (a small vocabulary fits whole)."""
    return min(DRAFT_ROWS, config.defined_vocab)


class WorkingVocab:
    """The sorted id table of one session's working vocabulary: the core, then session ids as they are
    seen while there is room (ids beyond it are not drafted; correctness does not depend on them)."""

    def __init__(self, rows: int, defined_vocab: int, core: int = DRAFT_CORE):
        if not 1 <= rows <= defined_vocab:
            raise ValueError(f"working vocabulary rows must be 1..{defined_vocab}, got {rows}")
        self.rows, self.defined_vocab = rows, defined_vocab
        self.core = range(min(core, rows))
        self.reset()

    def reset(self) -> None:
        self.ids: set[int] = set(self.core)

    def add(self, tokens: list[int]) -> bool:
        """Take the new defined ids among `tokens` while there is room; whether the table changed."""
        grew = False
        for t in tokens:
            if len(self.ids) == self.rows:
                break
            if 0 <= t < self.defined_vocab and t not in self.ids:
                self.ids.add(int(t))
                grew = True
        return grew

    def table(self) -> np.ndarray:
        """int32 [rows]: the ids in increasing order, padded with the first."""
        ids = np.fromiter(sorted(self.ids), np.int32, len(self.ids))
        return np.concatenate([ids, np.full(self.rows - len(ids), ids[0], np.int32)])

    @staticmethod
    def full_logits(logits: np.ndarray, table: np.ndarray, vocab: int) -> np.ndarray:
        """A working head's logits [rows] as the full vocabulary's: -inf for ids outside the table."""
        out = np.full(vocab, -np.inf, np.float32)
        out[table] = logits  # padding rows repeat the first id with its own value
        return out
