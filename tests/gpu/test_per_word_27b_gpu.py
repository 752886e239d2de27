"""The 27B's independent anchor (issue 17): megakernel == graph on the 27B compares two GPU builds of the
same device functions, so a wrong device function at the 27B's shapes would pass it. Here words of every
opcode of the 27B's Programs (the first and the last word of each opcode of a one-row and an 8-row target
pass, every word of an MTP draft pass) run on the GPU and on the CPU interpreter (bit-identical to the
NumPy reference in engine mode) from the same arena, the whole arena compared after each
(tests/gpu/per_word.py). The passes before and between the sampled words run on the GPU alone."""

import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower, lower_mtp  # noqa: E402
from compiler.interpreter import Interpreter  # noqa: E402
from discrete.launcher import DiscreteProgram  # noqa: E402
from megakernel.model.config import preset  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from megakernel.model.weights import WeightSet  # noqa: E402
from per_word import HISTORY_TOKENS, HostWeightsFromGpu, check_word, start_pass  # noqa: E402

pytestmark = pytest.mark.gpu
BIG = preset("qwen3.5-27b")
CAPACITY = 64


@pytest.fixture(scope="module")
def big():
    """Device weights of synthetic:qwen3.5-27b:0 and the interpreter's host copy of each tensor it asks for."""
    table = lower(BIG, rows=1, sms=132, capacity=8)  # the weight table is the same for every Program of BIG
    host = WeightSet(BIG, HostWeightsFromGpu(BIG, seed=0), "synthetic:qwen3.5-27b:0")
    return DeviceWeights.synthetic(table, BIG, seed=0, progress=False), host


def first_and_last_of_each_opcode(program) -> list[int]:
    seen: dict[str, list[int]] = {}
    for i, w in enumerate(program.words):
        seen.setdefault(w.opcode.name, []).append(i)
    return sorted({i for found in seen.values() for i in (found[0], found[-1])})


def gpu_then_checked(runner, interp, program, sampled: list[int]) -> list[str]:
    """One pass word by word: sampled words checked against the interpreter from the GPU's arena, the
    others on the GPU alone."""
    failures = []
    for i in range(len(program.words)):
        if i in sampled:
            interp.arena[:] = runner.session.arena.get()
            failures += check_word(interp, runner, program, i)
        else:
            runner.run_word(i)
    return failures


@pytest.mark.parametrize("rows", [1, 8])
def test_27b_words_of_every_opcode_match_the_interpreter(big, rows):
    device_weights, host = big
    program = lower(BIG, rows=rows, sms=132, capacity=CAPACITY, debug_logits=True)
    runner = DiscreteProgram(program, device_weights, DeviceSession(program))
    start_pass(runner, BIG)
    sampled = first_and_last_of_each_opcode(program)
    assert {program.words[i].opcode for i in sampled} == {w.opcode for w in program.words}
    failures = gpu_then_checked(runner, Interpreter(program, host), program, sampled)
    assert not failures, "\n".join(failures)


def test_27b_mtp_draft_words_match_the_interpreter(big):
    device_weights, host = big
    target = lower(BIG, rows=8, sms=132, capacity=CAPACITY, debug_logits=True)
    mtp = lower_mtp(BIG, rows=3, sms=132, capacity=CAPACITY, debug_logits=True)
    arena = max(target.arena_bytes, mtp.arena_bytes)
    session = DeviceSession(target, arena_bytes=arena)
    session.set_tokens(HISTORY_TOKENS[:8], BIG.vocab_size)
    DiscreteProgram(target, device_weights, session).step()  # hidden rows, KV and states for the MTP head
    runner = DiscreteProgram(mtp, device_weights, session)
    session.set_tokens(HISTORY_TOKENS[8:11], BIG.vocab_size, mtp)
    interp = Interpreter(mtp, host, arena_bytes=arena)
    failures = gpu_then_checked(runner, interp, mtp, list(range(len(mtp.words))))
    assert not failures, "\n".join(failures)
