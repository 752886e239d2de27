"""How generation cuts tokens into passes: at most MAX_PROMPT_ROWS rows each, the widest pass the compiled
Programs take (the verify width). Below both generate.py and speculative.py, which use it."""

from __future__ import annotations

from isa.opcodes import MAX_ROWS

MAX_PROMPT_ROWS = MAX_ROWS
# How a prompt enters (issue 21): "passes" as decode passes of up to MAX_PROMPT_ROWS rows (exact with one-row
# decode); "program" through the prompt program in chunks of PROMPT_CHUNK rows (the prompt path's arithmetic,
# docs/NUMERICS.md "The prompt path"), its last token through a one-row decode pass; "auto" the program for a
# prompt of more than PROMPT_PROGRAM_MIN tokens where the backend computes the engine's arithmetic, else passes.
PROMPT_PATHS = ("passes", "program", "auto")
PROMPT_CHUNK = 2048  # a 4,096-token prompt 5 % faster in 2,048-row chunks than in 1,024 (D74; 512 -> 1,024: D67)
# Below this many tokens "auto" keeps the decode passes: a handful of 8-row passes costs about one prompt
# program's fixed cost (~640 launches; an estimate until bench --ttft measures both paths at 128 tokens).
PROMPT_PROGRAM_MIN = 64


def uses_prompt_program(prompt_path: str, prompt_tokens: int) -> bool:
    """Whether a prompt of `prompt_tokens` tokens enters through the prompt program under `prompt_path` (on a
    backend that computes the engine's arithmetic)."""
    if prompt_path == "auto":
        return prompt_tokens > PROMPT_PROGRAM_MIN
    return prompt_path == "program" and prompt_tokens > 1


def prompt_chunks(prompt_ids: list[int], rows: int) -> list[list[int]]:
    """The prompt cut into passes of `rows` tokens (the last may be shorter): how a backend ingests it."""
    if not 1 <= rows <= MAX_PROMPT_ROWS:
        raise ValueError(f"prompt rows must be 1..{MAX_PROMPT_ROWS}, got {rows}")
    return [prompt_ids[i:i + rows] for i in range(0, len(prompt_ids), rows)]


def prompt_path_chunks(prompt_ids: list[int], chunk: int = PROMPT_CHUNK) -> tuple[list[list[int]], int]:
    """The prompt path's cut: all but the last token in chunks of `chunk` rows, and the last token (its pass
    chooses the first generated token)."""
    head = prompt_ids[:-1]
    return [head[i:i + chunk] for i in range(0, len(head), chunk)], prompt_ids[-1]
