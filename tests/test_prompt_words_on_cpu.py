"""The prompt programs' kernels (prompt_ops.cuh, prompt_gdn.cuh, prompt_attention.cuh, prompt_gemm.cuh) run on the
CPU by tests/simt_runner.py, word by word against the CPU interpreter with the GPU tests' own check
(tests/gpu/per_word.py: the written buffers within the op tolerance, every other byte exact), on the tiny preset
from a random session at two positions (a first WY chunk and key tile cut short at 37, 150 rows; 2950 deep in a
long cache, 70 rows that still end in a second, partial token tile and cross a WY chunk's start at 3008, causal
attention there in its first layer only, and no GEMM: its tiles' work does not change with the position);
negative controls for the three kinds of kernel. tests/gpu/test_prompt_gpu.py runs every word on a GPU.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "gpu"))

from compiler import lower_mtp_prompt, lower_prompt  # noqa: E402
from isa import GEMM_OPS, Op  # noqa: E402
from per_word import check_word, interpret_word, interpreter_at  # noqa: E402
from simt_runner import PROMPT_CPU_OPS, HostProgram, library, unavailable  # noqa: E402

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"CPU runner: {unavailable()}")
ROWS = 160  # two token tiles, the second partial (tests/gpu/test_prompt_gpu.py's chunks)


def walk(weights, program, position, tokens, seed=0, run=lambda word: True, tamper=lambda runner: None):
    """Every word in order from a random session at `position`: the words that `run` picks checked against the
    interpreter, the rest run by the interpreter alone; `tamper(runner)` may first change what only the CPU
    runner sees (negative controls). Returns (words checked, problems)."""
    interp = interpreter_at(program, weights, position, tokens, seed)
    runner = HostProgram(program, weights)
    tamper(runner)
    checked, problems = [], []
    for i, w in enumerate(program.words):
        if w.opcode in PROMPT_CPU_OPS and run(w):
            problems += check_word(interp, runner, program, i)
            checked.append(w.opcode)
        else:
            interpret_word(interp, program, i)
    return checked, problems


@pytest.mark.parametrize("position, capacity, n", [(37, 384, 150), (2950, 3200, 70)])
def test_every_prompt_word_matches_the_interpreter(tiny_weights, position, capacity, n):
    c = tiny_weights.config
    program = lower_prompt(c, rows=ROWS, sms=132, capacity=capacity)
    first_attention = min(c.attention_layers)
    deep = position >= 300  # the GEMMs' tiles do the same work at every position: checked at 37 only

    def run(w):
        if not deep:
            return True
        return w.opcode not in GEMM_OPS and (w.opcode != Op.ATTN_CAUSAL or w.layer == first_attention)

    checked, problems = walk(tiny_weights, program, position, [(7919 * i) % c.defined_vocab for i in range(n)],
                             run=run)
    assert set(checked) == PROMPT_CPU_OPS - {Op.MTP_PREPARE} - (GEMM_OPS if deep else set())
    assert checked.count(Op.GDN_CHUNK) == len(c.gdn_layers)
    assert not problems, problems[:10]


def test_causal_attention_with_its_second_warpgroup_past_the_chunk_matches_the_interpreter(tiny_weights):
    """A 100-row chunk: ATTN_CAUSAL's first tile has 100 rows, so its second warpgroup (rows 64-127) runs with 28
    rows past the chunk, which it must compute without writing (the 150-row chunk above leaves it idle)."""
    c = tiny_weights.config
    program = lower_prompt(c, rows=ROWS, sms=132, capacity=384)
    checked, problems = walk(tiny_weights, program, 37, [(7919 * i) % c.defined_vocab for i in range(100)],
                             run=lambda w: w.opcode == Op.ATTN_CAUSAL)
    assert checked and set(checked) == {Op.ATTN_CAUSAL}
    assert not problems, problems[:10]


def test_the_mtp_prompt_words_match_the_interpreter(tiny_weights):
    c = tiny_weights.config
    program = lower_mtp_prompt(c, rows=ROWS, sms=132, capacity=384)
    checked, problems = walk(tiny_weights, program, 64, [(104729 * i + 11) % c.defined_vocab for i in range(131)],
                             seed=1)
    assert Op.MTP_PREPARE in checked
    assert not problems, problems[:10]


def test_a_wrong_gdn_state_on_the_cpu_is_caught(tiny_weights):
    """Negative control: the check fails when the kernel's inputs differ from the interpreter's (here the
    GDN layer's A_log in the CPU runner's weight arena, so the kernel decays the state at another rate)."""
    c = tiny_weights.config
    program = lower_prompt(c, rows=64, sms=132, capacity=384)
    first = min(c.gdn_layers)
    a_log = next(e for e in program.weights if e.name.endswith("A_log") and f".{first}." in e.name)

    def tamper(runner):
        runner.weights[a_log.offset:a_log.offset + 4] ^= 0x40  # the first head's A_log, a few bits off

    _, problems = walk(tiny_weights, program, 37, list(range(1, 60)), tamper=tamper,
                       run=lambda w: w.opcode == Op.GDN_CHUNK and w.layer == first)
    assert any("ssm" in p for p in problems), problems


def test_a_block_that_never_leaves_a_barrier_is_reported_not_waited_for():
    import ctypes

    message = ctypes.create_string_buffer(256)
    assert library().simt_stall_probe(message, len(message)) == 1
    assert b"never all reach" in message.value


def test_copies_land_only_at_their_waits():
    """The runner's async and bulk copies are in flight until the waits the GPU requires: a kernel that reads
    shared memory before them reads stale bytes here too (by hand: ATTN_CAUSAL waiting one copy group too few,
    the GEMM's consumers skipping their wait on the full slot, both fail the check; D70)."""
    assert library().simt_copy_probe() == 0b1111


def test_a_wrong_attention_scale_on_the_cpu_is_caught(tiny_weights):
    """Negative control for the modelled tensor-core instructions: ATTN_CAUSAL run on the CPU with its score
    scale (the word's p4) halved in its launch program must fail the check."""
    import struct

    program = lower_prompt(tiny_weights.config, rows=64, sms=132, capacity=384)

    def tamper(runner):
        for i, launch in runner._launch.items():
            if program.words[i].opcode == Op.ATTN_CAUSAL:
                at = 64 + 4 * (21 + 4)  # the header, then word field p4 (common.cuh Word::pf)
                scale = struct.unpack_from("<f", launch, at)[0]
                runner._launch[i] = launch[:at] + struct.pack("<f", scale / 2) + launch[at + 4:]

    _, problems = walk(tiny_weights, program, 37, list(range(1, 60)), tamper=tamper,
                       run=lambda w: w.opcode == Op.ATTN_CAUSAL)
    assert problems and all("attn_out" in p for p in problems), problems


def test_a_wrong_block_scale_on_the_cpu_is_caught(tiny_weights):
    """Negative control for the modelled warpgroup products and bulk copies: gate_up run on the CPU with one
    block scale of its gate weight made four times larger in the CPU runner's weights must fail the check."""
    c = tiny_weights.config
    program = lower_prompt(c, rows=64, sms=132, capacity=384)
    first = min(c.gdn_layers)
    gate = next(e for e in program.weights if e.name.endswith("gate_proj.weight") and f".{first}." in e.name)

    def tamper(runner):
        runner.weights[gate.scale_offset + 1] += 1  # bf16 scale 0's high byte: its exponent up by two, x 4

    _, problems = walk(tiny_weights, program, 37, list(range(1, 60)), tamper=tamper,
                       run=lambda w: w.opcode == Op.GEMM_GATE_UP and w.layer == first)
    assert problems and all("mlp_h" in p for p in problems), problems


GEN_PROMPT = [(7919 * i + 3) % 2000 for i in range(150)]  # tests/gpu/test_prompt_gpu.py's: 64-row chunks


def test_generation_through_the_prompt_kernels_on_the_cpu_stays_close_to_the_interpreter(tiny_weights):
    """The GPU test's generation scenario with the prompt chunks run by the kernels on the CPU (decode by the
    interpreter): the bf16 roundings that go the other way compound over the layers and chunks, and this
    measures by how much (D70: 2.4 % of the largest logit, the top two 10.9 % apart), which is what the GPU
    test's bound is set from."""
    from megakernel.generation.generate import InterpreterBackend

    class CpuKernels(InterpreterBackend):
        hosts = {}  # a HostProgram (its weight arena) built once a Program

        def _run_prompt(self, runner, tokens):
            runner.set_prompt_chunk(tokens)
            if id(runner.program) not in self.hosts:
                self.hosts[id(runner.program)] = HostProgram(runner.program, self.weights)
            host = self.hosts[id(runner.program)]
            host.session.arena.data = runner.arena  # the interpreter's session, written in place
            for i in range(len(runner.program.words)):
                host.run_word(i)

    c = tiny_weights.config
    runs = []
    for backend in (InterpreterBackend, CpuKernels):
        b = backend(tiny_weights, 384, sms=132, prompt_path="program", prompt_chunk=64)
        logits = b.start(GEN_PROMPT)
        tokens = [int(np.argmax(logits[:c.defined_vocab]))]
        tokens.append(b.greedy_step(tokens[-1]))
        runs.append((logits, tokens))
    (reference, tokens), (kernels, kernel_tokens) = runs
    error = float(np.abs(kernels - reference).max() / np.abs(reference).max())
    print(f"prompt kernels on the CPU vs the interpreter: largest logit difference {error:.3g} of the largest")
    assert 0 < error <= 0.06 and kernel_tokens == tokens

