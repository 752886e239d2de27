"""The prompt programs' device functions written so far (megakernel/runtime/cuda/prompt_ops.cuh: PROMPT_EMBED,
PROMPT_QKV, ATTN_CAUSAL, PROMPT_CONV, PROMPT_NORM, PROMPT_ADVANCE and the prepare words; prompt_gemm.cuh: the
three GEMMs) against the CPU interpreter, word by word from the same arena (tests/gpu/per_word.py): every
written buffer within the op tolerance (the operand slabs, int32, byte for byte; the GEMMs' and attention's
bf16 outputs as the decode words'), every other byte exactly. GDN_CHUNK, without a kernel yet, runs on the
interpreter alone, to carry the state on. Written in a session without a GPU (D68): not yet run.
"""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower_mtp_prompt, lower_prompt  # noqa: E402
from compiler.interpreter import Interpreter  # noqa: E402
from discrete.launcher import KERNEL_OF, DiscreteProgram  # noqa: E402
from isa.opcodes import CTRL_POSITION, MTP_LAYER, control_base  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from per_word import check_word, interpret_word, randomise_session  # noqa: E402

pytestmark = pytest.mark.gpu
CAPACITY = 384
ROWS = 160  # two token tiles, the second partial; the chunk below runs 150 of them


def words_beside_the_interpreter(weights, program, position, tokens, seed=0):
    """Random session state at `position`, the chunk's tokens set; each word with a kernel on the GPU and the
    interpreter from the same arena, the others on the interpreter alone. Problems, and the opcodes checked."""
    interp = Interpreter(program, weights)
    randomise_session(interp, program, np.random.default_rng(seed), position)
    interp.view(0)[0, control_base(program.words[0].layer) + CTRL_POSITION] = position  # the MTP's own lane
    interp.set_prompt_chunk(tokens)
    runner = DiscreteProgram(program, DeviceWeights.from_weightset(program, weights, progress=False),
                             DeviceSession(program), partial=True)
    problems, checked = [], set()
    for i, w in enumerate(program.words):
        if w.opcode in KERNEL_OF:
            problems += check_word(interp, runner, program, i)
            checked.add(w.opcode.name)
        else:
            interpret_word(interp, program, i)
    return problems, checked


def test_the_prompt_words_with_kernels_match_the_interpreter(tiny_weights):
    c = tiny_weights.config
    program = lower_prompt(c, rows=ROWS, sms=132, capacity=CAPACITY)
    tokens = [(7919 * i) % c.defined_vocab for i in range(150)]
    problems, checked = words_beside_the_interpreter(tiny_weights, program, 37, tokens)
    assert not problems, problems[:10]
    assert {"PROMPT_EMBED", "NORM_PREPARE", "PREPARE", "GEMM", "GEMM_GATE_UP", "GEMM_RESIDUAL", "PROMPT_QKV",
            "ATTN_CAUSAL", "PROMPT_CONV", "PROMPT_NORM", "PROMPT_ADVANCE"} <= checked


def test_the_mtp_prepare_word_matches_the_interpreter(tiny_weights):
    c = tiny_weights.config
    program = lower_mtp_prompt(c, rows=ROWS, sms=132, capacity=CAPACITY)
    tokens = [(104729 * i + 11) % c.defined_vocab for i in range(131)]
    assert program.words[0].layer == MTP_LAYER
    problems, checked = words_beside_the_interpreter(tiny_weights, program, 64, tokens, seed=1)
    assert not problems, problems[:10]
    assert {"MTP_PREPARE", "GEMM"} <= checked  # the MTP fc: bf16 weights, the bf16 slabs


def test_a_partial_program_refuses_a_whole_pass(tiny_weights):
    program = lower_prompt(tiny_weights.config, rows=64, sms=132, capacity=CAPACITY)
    runner = DiscreteProgram(program, DeviceWeights.from_weightset(program, tiny_weights, progress=False),
                             DeviceSession(program), partial=True)
    assert runner.missing == ["GDN_CHUNK"]
    with pytest.raises(ValueError, match="no discrete kernel for GDN_CHUNK"):
        runner.step()
    with pytest.raises(ValueError, match="no discrete kernel for"):
        DiscreteProgram(program, runner.weights, runner.session)
