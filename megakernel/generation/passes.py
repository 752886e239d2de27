"""How generation cuts tokens into passes: at most MAX_PROMPT_ROWS rows each, the widest pass the compiled
Programs take (the verify width). Below both generate.py and speculative.py, which use it."""

from __future__ import annotations

from isa.opcodes import MAX_ROWS

MAX_PROMPT_ROWS = MAX_ROWS


def prompt_chunks(prompt_ids: list[int], rows: int) -> list[list[int]]:
    """The prompt cut into passes of `rows` tokens (the last may be shorter): how a backend ingests it."""
    if not 1 <= rows <= MAX_PROMPT_ROWS:
        raise ValueError(f"prompt rows must be 1..{MAX_PROMPT_ROWS}, got {rows}")
    return [prompt_ids[i:i + rows] for i in range(0, len(prompt_ids), rows)]
