"""The decode Programs' kernels (gemv_tile.cuh, gdn.cuh, attention.cuh, small_ops.cuh) run on the CPU by
tests/simt_runner.py, word by word against the CPU interpreter with the GPU tests' own check (tests/gpu/per_word.py:
the written buffers within the op tolerance, every other byte exact): on the tiny preset after two passes of
history at 1 row, from a random session at 8 rows, an MTP draft pass, each as the discrete kernels call the tile
functions and as the megakernel does; an 8-row pass of a two-layer slice of the 27B at its widths; negative
controls. Then two bit identities the kernels themselves hold: an M-row pass equal to M one-row passes, the
megakernel's order equal to the discrete kernels'. tests/gpu/test_discrete_gpu.py runs the same words on a GPU.

Why on the CPU too: a session without a GPU prepares the decode kernels' levers (D77), and this finds their
indexing, barrier and arithmetic mistakes before a GPU session spends device time on them.
"""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "gpu"))

from compiler import lower, lower_mtp  # noqa: E402
from compiler.interpreter import Interpreter  # noqa: E402
from isa import DType, Kind, Op  # noqa: E402
from isa.opcodes import CTRL_LANE, CTRL_POSITION  # noqa: E402
from per_word import check_word, interpret_word, mtp_history, randomise_session  # noqa: E402
from simt_runner import DECODE_CPU_OPS, HostProgram, unavailable  # noqa: E402

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"CPU runner: {unavailable()}")
TOKENS = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 248000, 17, 1]


def walk(weights, program, interp, megakernel=False, tamper=lambda runner: None, target=None,
         pick=lambda i, w: True):
    """Every word of one pass in order from the interpreter's state, each decode word that `pick` takes checked
    against it, the others run by the interpreter alone (`target`: HostProgram's). Returns (opcodes checked,
    problems)."""
    runner = HostProgram(program, weights, megakernel=megakernel, target=target)
    tamper(runner)
    checked, problems = [], []
    for i, w in enumerate(program.words):
        if w.opcode in DECODE_CPU_OPS and pick(i, w):
            problems += check_word(interp, runner, program, i)
            checked.append(w.opcode)
        else:
            interpret_word(interp, program, i)
    return checked, problems


def with_history(weights, program):
    """The interpreter after two passes (a non-zero position, GDN states, KV rows), the next pass's tokens set."""
    rows = program.rows
    interp = Interpreter(program, weights)
    for step in range(2):
        interp.set_tokens(TOKENS[step * rows:(step + 1) * rows])
        interp.run(1)
    interp.set_tokens(TOKENS[-rows:])
    return interp


@pytest.mark.parametrize("megakernel", [False, True], ids=["discrete", "megakernel"])
def test_every_decode_word_matches_the_interpreter(tiny_weights, megakernel):
    """One row after two passes of history (several rows: the 8-row pass below, and the 3-row pass held bit for bit
    to three one-row passes)."""
    program = lower(tiny_weights.config, rows=1, sms=132, capacity=64, debug_logits=True)
    checked, problems = walk(tiny_weights, program, with_history(tiny_weights, program), megakernel)
    assert set(checked) == {w.opcode for w in program.words} - {Op.NOP}
    assert not problems, problems[:10]


@pytest.mark.parametrize("megakernel", [False, True], ids=["discrete", "megakernel"])
def test_an_8_row_pass_on_random_state_matches_the_interpreter(tiny_weights, megakernel):
    """Eight rows (ATTN_MERGE's heads in column runs, every f16 operand row), random states 41 tokens deep."""
    program = lower(tiny_weights.config, rows=8, sms=132, capacity=64, debug_logits=True)
    interp = Interpreter(program, tiny_weights)
    rng = np.random.default_rng(8)
    randomise_session(interp, program, rng, position=41)
    interp.set_tokens(rng.integers(0, tiny_weights.config.vocab_size, 8).tolist())
    checked, problems = walk(tiny_weights, program, interp, megakernel)
    assert Op.ATTN_MERGE in checked and Op.GDN_CORE in checked
    assert not problems, problems[:10]


@pytest.fixture(scope="module")
def wide_weights():
    """synthetic weights of a two-layer slice of the 27B (one GDN layer, one attention layer at the 27B's widths:
    hidden 5,120, gate_up's 144-row groups in two passes, in_proj's four segments, 640-piece norm rows, split-K
    out_proj and down), a 2,048-token vocabulary and no MTP layer: ~0.8 GB, its words ~1 min a pass on the CPU."""
    from megakernel.model.config import _layer_types_from_interval, preset
    from megakernel.model.synthetic import synthetic_weights

    config = dataclasses.replace(preset("qwen3.5-27b"), num_hidden_layers=2,
                                 layer_types=_layer_types_from_interval(2, 2), vocab_size=2048, defined_vocab=2048,
                                 mtp_num_hidden_layers=0, name="qwen3.5-27b-slice")
    return synthetic_weights(config, seed=0)


def test_an_8_row_pass_at_the_27b_widths_matches_the_interpreter(wide_weights):
    """The words at the 27B's shapes (the tiny preset's GEMVs are all split-K over a few groups), eight rows on
    random state, the first word of each (opcode, n, k) checked: what a lever that only the 27B's shapes reach (a
    norm row of 640 pieces, gate_up's 16-row passes, out_proj's, down's and qkv's slices) must still compute."""
    c = wide_weights.config
    program = lower(c, rows=8, sms=132, capacity=64, debug_logits=True)
    assert any(w.opcode == Op.NORM_GATE_UP and w.tile_rows == 144 and w.k_slices == 1 for w in program.words)
    interp = Interpreter(program, wide_weights)
    rng = np.random.default_rng(27)
    randomise_session(interp, program, rng, position=41)
    interp.set_tokens(rng.integers(0, c.vocab_size, 8).tolist())
    shape = lambda w: (w.opcode, w.n, w.k)  # noqa: E731
    firsts = {shape(w): i for i, w in reversed(list(enumerate(program.words)))}  # the first word of each shape
    checked, problems = walk(wide_weights, program, interp, pick=lambda i, w: firsts[shape(w)] == i)
    assert set(checked) == {w.opcode for w in program.words} - {Op.NOP}
    assert not problems, problems[:10]


def test_the_mtp_draft_words_match_the_interpreter(tiny_weights):
    """The MTP draft Program (MTP_FC's two norms, the MTP layer's attention) on a session an 8-row target pass and
    an 8-row MTP pass left, as tests/gpu/test_discrete_gpu.py sets it up."""
    c = tiny_weights.config
    target = lower(c, rows=8, sms=132, capacity=64, debug_logits=True)
    program = lower_mtp(c, rows=3, sms=132, capacity=64, debug_logits=True)
    interp = Interpreter(program, tiny_weights, session_of=mtp_history(tiny_weights, target, TOKENS))
    interp.view(0)[0, CTRL_LANE + CTRL_POSITION] = 5  # rows over the prefilled ones, as after a verify pass
    interp.set_tokens(TOKENS[9:12])
    checked, problems = walk(tiny_weights, program, interp, target=target)
    assert Op.MTP_FC in checked
    assert not problems, problems[:10]


def cpu_passes(weights, program, arena, token_rows, megakernel=False):
    """Whole passes of `program` on the CPU runner alone (every word, in order) from session bytes `arena`, one
    pass per entry of token_rows; returns the arena after each pass."""
    interp = Interpreter(program, weights)  # its set_tokens writes a pass's tokens into the session bytes
    runner = HostProgram(program, weights, megakernel=megakernel)
    interp.arena[:arena.size] = arena
    out = []
    for tokens in token_rows:
        interp.set_tokens(tokens)
        runner.session.load(interp.arena)
        for i, w in enumerate(program.words):
            if w.opcode != Op.NOP:
                runner.run_word(i)
        interp.arena[:] = runner.session.arena.data
        out.append(interp.arena.copy())
    return out


def logits_of(program, arena):
    b = next(b for b in program.buffers if b.name == "logits")
    return arena[b.offset:b.offset + b.nbytes].view(np.float32).reshape(b.rows, b.cols)


def test_an_m_row_pass_on_the_cpu_is_m_one_row_passes_and_the_megakernel_order_the_same_bits(tiny_weights):
    """Two of the project's bit identities, held by the kernels themselves and so checkable here: three one-row
    passes and one 3-row pass from the same session (the GPU's test_m_row_pass_equals_m_one_row_passes), every
    word run by the CPU runner, leave the same state buffers and logits bit for bit; and the 3-row pass run as the
    megakernel calls its tiles equals the discrete kernels' (megakernel == graph)."""
    c = tiny_weights.config
    one = lower(c, rows=1, sms=132, capacity=64, debug_logits=True)
    many = lower(c, rows=3, sms=132, capacity=64, debug_logits=True)
    assert one.state_end == many.state_end
    history = Interpreter(one, tiny_weights)
    for t in TOKENS[:2]:  # some history: a non-zero position, GDN states, KV rows
        history.set_tokens([t])
        history.run(1)
    start = history.arena[:one.state_end].copy()
    block = TOKENS[2:5]
    singles = cpu_passes(tiny_weights, one, start, [[t] for t in block])
    (discrete,) = cpu_passes(tiny_weights, many, start, [block])
    (megakernel,) = cpu_passes(tiny_weights, many, start, [block], megakernel=True)
    assert np.array_equal(discrete, megakernel), "the megakernel's order changed a bit of the 3-row pass"
    for b in many.buffers:
        if b.kind == Kind.STATE and b.name != "hidden":  # hidden is right-aligned: rows differ by design
            lo, hi = b.offset, b.offset + b.nbytes
            assert np.array_equal(discrete[lo:hi], singles[-1][lo:hi]), f"{b.name} differs after the 3-row pass"
    for r in range(3):
        assert np.array_equal(logits_of(many, discrete)[r], logits_of(one, singles[r])[0]), f"row {r} logits differ"


def first_fp8_weight(program, opcode):
    w = next(w for w in program.words if w.opcode == opcode)
    return program.weights[w.weight_first]


@pytest.mark.parametrize("opcode", [Op.NORM_GATE_UP, Op.GEMV_RESIDUAL])
def test_a_wrong_weight_on_the_cpu_is_caught(tiny_weights, opcode):
    """Negative control: the check fails when one fp8 weight byte of a GEMV word's first weight differs from the
    interpreter's (a GEMV_RESIDUAL word is split-K on the tiny preset: its finish reads the tampered slice's sums)."""
    program = lower(tiny_weights.config, rows=1, sms=132, capacity=64, debug_logits=True)
    entry = first_fp8_weight(program, opcode)
    assert entry.dtype == DType.FP8_E4M3

    def tamper(runner):
        runner.weights[entry.offset + 5] ^= 0x08  # an exponent bit of one weight (e4m3: bits 3-6)

    checked, problems = walk(tiny_weights, program, with_history(tiny_weights, program), tamper=tamper,
                             pick=lambda i, w: w.opcode == opcode)
    assert checked and problems and all(opcode.name in p for p in problems), problems[:3]


def test_a_split_k_finish_that_never_runs_is_caught(tiny_weights):
    """Negative control of the split-K finish: arrival counters that start one short of a group's last slice make
    another slice finish the group before every partial is in, so the word's sums differ."""
    program = lower(tiny_weights.config, rows=1, sms=132, capacity=64, debug_logits=True)
    split = next(w for w in program.words if w.opcode in DECODE_CPU_OPS and w.k_slices > 1)
    assert split.arrival_count > 0

    def tamper(runner):
        original = runner.run_word

        def early_finish(index):
            w = program.words[index]
            if w is split:
                runner.arrivals[w.arrival_base * 32] = 1  # group 0 counts one slice before any has arrived
            original(index)

        runner.run_word = early_finish

    with pytest.raises(RuntimeError, match="left split-K arrivals counted"):
        walk(tiny_weights, program, with_history(tiny_weights, program), tamper=tamper, pick=lambda i, w: w is split)
