"""Edits of compiled Programs for negative tests."""

import dataclasses

from isa import Kind, Program, WaitMode


def impossible_wait(program: Program, index: int) -> Program:
    """The Program with word `index`'s first wait asking for far more arrivals than any pass makes."""
    w = program.words[index]
    first = next(i for i, wt in enumerate(w.waits) if wt.mode != WaitMode.NONE)
    waits = list(w.waits)
    waits[first] = dataclasses.replace(waits[first], expected=10**6)
    words = list(program.words)
    words[index] = dataclasses.replace(w, waits=tuple(waits))
    return dataclasses.replace(program, words=words)


def session_state(session, program) -> dict:
    """Every session buffer of a device session (control, caches, GDN states, rings, hidden) and the
    logits, as host bytes."""
    arena = session.arena.get()
    out = {b.name: arena[b.offset:b.offset + b.nbytes] for b in program.buffers if b.kind != Kind.ACTIVATION}
    out["logits"] = session.view("logits").get()
    return out
