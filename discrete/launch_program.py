"""One word's launch program: the word and the records it names, renumbered from zero, as a one-word
Program's bytes (isa/program.py layout: header, word, buffer records, weight records), passed to the
discrete kernel as a by-value parameter (common.cuh LaunchProgram).

Why: a discrete tile found its word and records by a chain of dependent reads at its start (parameter ->
word -> records, each a trip to L2 or HBM: ~2.2 us of a GEMV tile's start in the step, step_phases.json).
From a parameter every read's address is known at the start, so the kernel copies the whole launch
program into shared memory in one round trip, before it waits for the previous launch, and reads word and
records from there (common.cuh launch_context). The megakernel keeps reading the Program itself.
"""

from __future__ import annotations

import dataclasses

from isa import NO_BUFFER, Program
from isa.opcodes import PARAMS
from isa.program import BUFFER_RECORD, HEADER, WEIGHT_RECORD
from isa.word import BUFFER_ROLES, WORD_BYTES
from megakernel.runtime import cuda_build


def local_program(program: Program, index: int) -> Program:
    """Word `index` of `program` alone: its buffer roles and weights (its segments, then its weight
    parameters) numbered from zero in the order the word names them, every other field unchanged."""
    w = program.words[index]
    buffers, buffer_id = [], {}
    roles = {}
    for role in BUFFER_ROLES:
        old = getattr(w, f"buf_{role}")
        if old != NO_BUFFER and old not in buffer_id:
            buffer_id[old] = len(buffers)
            buffers.append(program.buffers[old])
        roles[f"buf_{role}"] = NO_BUFFER if old == NO_BUFFER else buffer_id[old]
    weights = [program.weights[w.weight_first + s] for s in range(w.weight_count)]
    params = list(w.params)
    for i, (_, kind) in enumerate(PARAMS[w.opcode]):
        if kind == "w" and i < len(params):
            weights.append(program.weights[params[i]])
            params[i] = len(weights) - 1
    local = dataclasses.replace(w, weight_first=0, params=tuple(params), **roles)
    return Program([local], buffers, weights, [], program.rows, program.sms, {})


TRACE_SLOT_BYTES = 4  # the launch program's last bytes: the graph trace's slot (common.cuh graph_trace)


def launch_program(program: Program, index: int, trace_slot: int = 0) -> bytes:
    """The LaunchProgram bytes of word `index` (zero-padded to LAUNCH_PROGRAM_BYTES, its last four bytes
    `trace_slot`: 0, or where a build with the graph trace records its blocks, plus one); a word that names
    more records than that holds is refused."""
    local = local_program(program, index)
    used = HEADER.itemsize + WORD_BYTES + BUFFER_RECORD.itemsize * len(local.buffers) + \
        WEIGHT_RECORD.itemsize * len(local.weights)
    size = cuda_build.launch_program_bytes()
    if used > size - TRACE_SLOT_BYTES:
        raise ValueError(f"word {index} names {len(local.buffers)} buffers and {len(local.weights)} weights: "
                         f"{used} bytes, a launch program holds {size - TRACE_SLOT_BYTES}")
    if not 0 <= trace_slot < 2 ** 32:
        raise ValueError(f"trace slot {trace_slot} is not a u32")
    return local.to_bytes()[:used].ljust(size - TRACE_SLOT_BYTES, b"\0") + trace_slot.to_bytes(4, "little")


__all__ = ["TRACE_SLOT_BYTES", "launch_program", "local_program"]
