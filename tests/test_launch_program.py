"""A discrete launch's own program (discrete/launch_program.py): the word alone with the records it names,
renumbered from zero, in the Program's byte layout, so that a kernel reading word 0 of it reads exactly what
it read from the whole Program (common.cuh LaunchProgram)."""

import dataclasses

import numpy as np
import pytest

from compiler import lower, lower_mtp
from discrete.launch_program import TRACE_SLOT_BYTES, launch_program, local_program
from isa import NO_BUFFER, WORD_BYTES, Op, decode
from isa.opcodes import PARAMS
from isa.program import BUFFER_RECORD, HEADER, WEIGHT_RECORD
from isa.word import BUFFER_ROLES
from megakernel.model.config import preset
from megakernel.runtime.cuda_build import launch_program_bytes


@pytest.fixture(scope="module")
def programs():
    c, tiny = preset("qwen3.5-27b"), preset("tiny")
    return [lower(c, rows=1, sms=132), lower(c, rows=8, sms=132), lower_mtp(c, rows=8, sms=132),
            lower(tiny, rows=3, sms=7, capacity=64), lower_mtp(tiny, rows=1, sms=7)]


def named(program, w):
    """What word w of `program` names: its buffers by role, its weight segments, its weight parameters."""
    buffers = {r: None if getattr(w, f"buf_{r}") == NO_BUFFER else program.buffers[getattr(w, f"buf_{r}")]
               for r in BUFFER_ROLES}
    segments = [program.weights[w.weight_first + s] for s in range(w.weight_count)]
    params = [program.weights[v] if kind == "w" else v
              for v, (_, kind) in zip(w.params, PARAMS[w.opcode], strict=False)]
    return buffers, segments, params


def test_every_word_names_the_same_records_in_its_launch_program(programs):
    for program in programs:
        for i, w in enumerate(program.words):
            local = local_program(program, i)
            assert len(local.words) == 1
            mine = local.words[0]
            assert named(local, mine) == named(program, w), program.meta.get("instructions", [i])[i]
            ids = ("weight_first", "params") + tuple(f"buf_{r}" for r in BUFFER_ROLES)
            assert dataclasses.replace(mine, **{f: getattr(w, f) for f in ids}) == w  # nothing else moved


def test_the_bytes_are_a_one_word_program_as_the_device_reads_it(programs):
    size = launch_program_bytes()
    for program in programs:
        for i in range(len(program.words)):
            data = launch_program(program, i)
            local = local_program(program, i)
            assert len(data) == size
            header = np.frombuffer(data, HEADER, count=1)[0]
            assert (header["n_words"], header["n_buffers"], header["n_weights"]) == \
                (1, len(local.buffers), len(local.weights))
            word = decode(np.frombuffer(data, "<u4", count=WORD_BYTES // 4, offset=HEADER.itemsize))
            assert word == decode(np.frombuffer(launch_program(local, 0), "<u4", count=WORD_BYTES // 4,
                                                offset=HEADER.itemsize))
            at = HEADER.itemsize + WORD_BYTES
            buffers = np.frombuffer(data, BUFFER_RECORD, count=len(local.buffers), offset=at)
            assert [int(b["offset"]) for b in buffers] == [b.offset for b in local.buffers]
            at += BUFFER_RECORD.itemsize * len(local.buffers)
            weights = np.frombuffer(data, WEIGHT_RECORD, count=len(local.weights), offset=at)
            assert [(int(r["offset"]), int(r["rows"])) for r in weights] == [(e.offset, e.rows) for e in local.weights]


def test_the_fullest_27b_word_fits_with_room_to_spare(programs):
    # a GEMV names at most six buffers and qkv three segments and three norm weights: 64 + 128 + 12 x 32
    most = max(len(local_program(p, i).buffers) + len(local_program(p, i).weights)
               for p in programs for i in range(len(p.words)))
    assert 64 + WORD_BYTES + 32 * most <= launch_program_bytes() - TRACE_SLOT_BYTES


def test_the_last_four_bytes_are_the_graph_trace_slot(programs):
    # common.cuh graph_trace reads the launch program's last u32: 0 (untraced) unless the caller asks
    program, size = programs[0], launch_program_bytes()
    assert launch_program(program, 0)[size - 4:] == bytes(4)
    traced = launch_program(program, 3, trace_slot=0x01020304)
    assert traced[size - 4:] == bytes([4, 3, 2, 1])
    assert traced[:size - 4] == launch_program(program, 3)[:size - 4]
    with pytest.raises(ValueError, match="not a u32"):
        launch_program(program, 0, trace_slot=2 ** 32)


def test_a_word_naming_more_records_than_a_launch_program_holds_is_refused(programs):
    program = programs[0]
    i = next(i for i, w in enumerate(program.words) if w.opcode == Op.NORM_GEMV)
    words = list(program.words)
    words[i] = dataclasses.replace(words[i], weight_first=0, weight_count=len(program.weights))
    with pytest.raises(ValueError, match="a launch program holds 764"):
        launch_program(dataclasses.replace(program, words=words), i)
