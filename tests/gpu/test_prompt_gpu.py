"""The prompt programs on the GPU (discrete build; megakernel/runtime/cuda/prompt_ops.cuh, prompt_gdn.cuh,
prompt_gemm.cuh), tiny preset:

* every word against the CPU interpreter, word by word from the same arena (tests/gpu/per_word.py): every
  written buffer within the op tolerance (the operand slabs, int32, byte for byte; bf16 outputs as the decode
  words'; the GDN state in fp32), every other byte exactly;
* a chunk run eagerly and from the CUDA graph, bit for bit.

Written in a session without a GPU (D68): not yet run.
"""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower_mtp_prompt, lower_prompt  # noqa: E402
from compiler.interpreter import Interpreter  # noqa: E402
from discrete.launcher import DiscreteProgram  # noqa: E402
from isa import PROMPT_OPS, Op  # noqa: E402
from isa.opcodes import CTRL_POSITION, MTP_LAYER, control_base  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from per_word import check_word, randomise_session  # noqa: E402

pytestmark = pytest.mark.gpu
CAPACITY = 384
ROWS = 160  # two token tiles, the second partial; the chunks below run 150 and 131 of them


def chunk_beside_the_interpreter(weights, program, position, tokens, seed=0):
    """Random session state at `position` (the program's own control lane), the chunk's tokens set; the
    interpreter and its GPU runner on that arena."""
    interp = Interpreter(program, weights)
    randomise_session(interp, program, np.random.default_rng(seed), position)
    interp.view(0)[0, control_base(program.words[0].layer) + CTRL_POSITION] = position
    interp.set_prompt_chunk(tokens)
    runner = DiscreteProgram(program, DeviceWeights.from_weightset(program, weights, progress=False),
                             DeviceSession(program))
    return interp, runner


def every_word(weights, program, position, tokens, seed=0):
    interp, runner = chunk_beside_the_interpreter(weights, program, position, tokens, seed)
    problems = []
    for i in range(len(program.words)):
        problems += check_word(interp, runner, program, i)
    return problems


def test_every_prompt_word_matches_the_interpreter(tiny_weights):
    c = tiny_weights.config
    program = lower_prompt(c, rows=ROWS, sms=132, capacity=CAPACITY)
    assert {w.opcode for w in program.words} == PROMPT_OPS - {Op.MTP_PREPARE}  # every kernel but the MTP's
    problems = every_word(tiny_weights, program, 37, [(7919 * i) % c.defined_vocab for i in range(150)])
    assert not problems, problems[:10]


def test_every_mtp_prompt_word_matches_the_interpreter(tiny_weights):
    c = tiny_weights.config
    program = lower_mtp_prompt(c, rows=ROWS, sms=132, capacity=CAPACITY)
    assert program.words[0].layer == MTP_LAYER and program.words[0].opcode == Op.MTP_PREPARE
    problems = every_word(tiny_weights, program, 64, [(104729 * i + 11) % c.defined_vocab for i in range(131)],
                          seed=1)
    assert not problems, problems[:10]


def test_a_chunk_runs_eagerly_and_from_the_graph_bit_for_bit(tiny_weights):
    c = tiny_weights.config
    program = lower_prompt(c, rows=ROWS, sms=132, capacity=CAPACITY)
    interp, runner = chunk_beside_the_interpreter(tiny_weights, program, 37,
                                                  [(7919 * i) % c.defined_vocab for i in range(150)])
    arenas = []
    for run in (runner.step, runner.replay, runner.replay):
        runner.session.load(interp.arena)
        run()
        arenas.append(runner.session.arena.get())
    assert np.array_equal(arenas[0], arenas[1]) and np.array_equal(arenas[1], arenas[2])
    position = arenas[0][4:8].view(np.int32)[0]  # control word 1
    assert position == 37 + 150
