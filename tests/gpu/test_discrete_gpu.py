"""The discrete build (discrete/, megakernel/runtime/cuda/*.cuh) on the GPU, tiny preset:

* every instruction of the compiled Program against the CPU interpreter from the same arena
  (interpreter state after a few steps; outputs poisoned; the whole arena compared after each word:
  every element of every written buffer within the op tolerance (integers exactly, bf16 within 2 ulps,
  fp32 within a relative bound), every other byte exactly; tests/gpu/per_word.py);
* eager vs graph and run to run bit-identical; an M-row pass bit-identical to M one-row passes;
* teacher-forced against the oracle goldens (power-of-two checkpoint) with the calibrated checker.
"""

from pathlib import Path

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower  # noqa: E402
from compiler.interpreter import Interpreter  # noqa: E402
from discrete.launcher import DiscreteProgram  # noqa: E402
from discrete.observe import observe_device  # noqa: E402
from isa import DType, Kind, Op  # noqa: E402
from isa.opcodes import CTRL_LANE, CTRL_POSITION  # noqa: E402
from megakernel.measurement.checker import Goldens, check  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from per_word import (check_word, diff_arena, interpret_word, mtp_history, poison_write_only,  # noqa: E402
                      randomise_session, word_accesses)
from program_tools import session_state  # noqa: E402

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOKENS = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 248000, 17, 1]


def build(weights, rows, capacity=64, debug_logits=True, overlap=True):
    program = lower(weights.config, rows=rows, sms=132, capacity=capacity, debug_logits=debug_logits)
    session = DeviceSession(program)
    device_weights = DeviceWeights.from_weightset(program, weights, progress=False)
    return program, DiscreteProgram(program, device_weights, session, overlap=overlap)


def interpreter_step_by_word(interp, runner, program, failures):
    """One pass, word by word: the GPU starts each word from the interpreter's arena, its outputs poisoned,
    and the whole arena is compared after it (per_word.check_word)."""
    for i in range(len(program.words)):
        failures += check_word(interp, runner, program, i)


@pytest.mark.parametrize("rows", [1, 3])
def test_every_instruction_matches_the_interpreter(tiny_weights, rows):
    program, runner = build(tiny_weights, rows)
    interp = Interpreter(program, tiny_weights)
    for step in range(2):  # some history: non-zero position, states, caches
        interp.set_tokens(TOKENS[step * rows:(step + 1) * rows])
        interp.run(1)
    interp.set_tokens(TOKENS[-rows:])
    failures = []
    interpreter_step_by_word(interp, runner, program, failures)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rows,chained,working", [(3, False, False), (1, True, False), (3, False, True),
                                                  (1, True, True)])
def test_every_mtp_instruction_matches_the_interpreter(tiny_weights, rows, chained, working):
    """The MTP draft Programs (docs/SPEC-qwen35.md 4) word by word against the interpreter (bit-identical to the NumPy
    head, tests/test_interpreter.py), on a session an 8-row target pass and an 8-row MTP pass left: hidden
    rows, MTP cache rows, the MTP lane's position and, chained, its handed-off token and hidden row.
    working: the head over a working vocabulary (gathered head rows, ids mapped by ARGMAX)."""
    from compiler import lower_mtp
    from megakernel.model.draft_vocab import WorkingVocab, draft_rows
    from megakernel.model.tensors import LM_HEAD

    c = tiny_weights.config
    target = lower(c, rows=8, sms=132, capacity=64, debug_logits=True)
    program = lower_mtp(c, rows=rows, sms=132, capacity=64, chained=chained, debug_logits=True,
                        working_vocab=working)
    runner = DiscreteProgram(program, DeviceWeights.from_weightset(target, tiny_weights, progress=False),
                             DeviceSession(target))

    def working_table(base):  # a small core and the test's ids: most rows are padding, session ids sit at other rows
        vocab = WorkingVocab(draft_rows(c), c.defined_vocab, core=16)
        vocab.add(TOKENS)
        table = vocab.table()
        index = {b.name: i for i, b in enumerate(target.buffers)}
        base.view(index["mtp.draft_ids"])[0] = table
        base.view(index["mtp.draft_head"])[:] = tiny_weights[LM_HEAD][table]

    base = mtp_history(tiny_weights, target, TOKENS, working_table if working else lambda base: None)
    interp = Interpreter(program, tiny_weights, session_of=base)
    if not chained:
        interp.view(0)[0, CTRL_LANE + CTRL_POSITION] = 5  # rows over the prefilled ones, as after a verify pass
        interp.set_tokens(TOKENS[9:9 + rows])
    failures = []
    interpreter_step_by_word(interp, runner, program, failures)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("rows", [1, 4])
def test_every_instruction_matches_the_interpreter_on_random_state(tiny_weights, rows):
    program, runner = build(tiny_weights, rows)
    interp = Interpreter(program, tiny_weights)
    rng = np.random.default_rng(rows)
    randomise_session(interp, program, rng, position=41)
    interp.set_tokens(rng.integers(0, tiny_weights.config.vocab_size, rows).tolist())
    failures = []
    interpreter_step_by_word(interp, runner, program, failures)
    assert not failures, "\n".join(failures)


def test_the_per_word_comparison_rejects_a_wrong_word(tiny_weights):
    """Negative controls of the whole-arena comparison (per_word.diff_arena): it must flag a word the GPU
    did not run (its outputs stay poison), its largest output element 8 ulps off, and one byte written outside
    the buffers the word declares."""
    program, runner = build(tiny_weights, 1)
    interp = Interpreter(program, tiny_weights)
    interp.set_tokens([TOKENS[0]])
    i = next(i for i, w in enumerate(program.words) if w.opcode.name == "GDN_CORE")
    for j in range(i):
        interpret_word(interp, program, j)
    poison_write_only(interp.arena, program, i)
    runner.session.load(interp.arena)
    interpret_word(interp, program, i)

    def problems():
        return diff_arena(program, i, runner.session.arena.get(), interp.arena)

    assert problems(), "an unrun word's poisoned output passed the comparison"
    runner.run_word(i)
    assert problems() == []
    written = {a.buffer for a in word_accesses(program, i) if a.write}
    out = program.buffers[next(b for b in sorted(written) if program.buffers[b].kind == Kind.ACTIVATION)]
    values = runner.session.arena[out.offset:out.offset + out.nbytes].view(cupy.uint16)
    top = int(cupy.argmax(values & 0x7FFF))  # the largest magnitude (bf16 bits order as magnitudes)
    element = values[top:top + 1]
    element += 8  # same sign, 8 ulps further from zero
    assert any(out.name in p for p in problems()), "an output 8 ulps off passed the comparison"
    element -= 8
    assert problems() == []
    other = next(b for n, b in enumerate(program.buffers) if n not in written and b.kind == Kind.STATE)
    byte = runner.session.arena[other.offset + other.nbytes // 2:other.offset + other.nbytes // 2 + 1]
    byte ^= 1
    assert any("does not declare" in p and other.name in p for p in problems()), "a stray write passed"


def run_steps(runner, tokens, graph):
    runner.session.reset()
    seen = []
    for t in tokens:
        runner.session.set_tokens([t], 248320)
        runner.replay() if graph else runner.step()
        seen.append(session_state(runner.session, runner.program))
    return seen


def test_graph_equals_eager_and_runs_repeat_bit_for_bit(tiny_weights):
    program, runner = build(tiny_weights, 1)
    eager = run_steps(runner, TOKENS[:6], graph=False)
    graph = run_steps(runner, TOKENS[:6], graph=True)
    again = run_steps(runner, TOKENS[:6], graph=False)
    for a, b, c in zip(eager, graph, again, strict=True):
        for name in a:
            assert np.array_equal(a[name], b[name]), f"graph differs from eager in {name}"
            assert np.array_equal(a[name], c[name]), f"a second eager run differs in {name}"
    assert eager[-1]["ctrl"].view(np.int32)[1] == 6  # position advanced by HANDOFF


@pytest.mark.parametrize("rows", [1, 4, 8])
def test_overlapped_launches_equal_serial_launches_bit_for_bit(tiny_weights, rows):
    """Programmatic dependent launch (D40) moves when a kernel starts, never what it computes: the eager
    and graph passes with overlap equal serial launches in every state buffer, pass after pass."""
    passes = [[TOKENS[(i * rows + j) % len(TOKENS)] for j in range(rows)] for i in range(3)]

    def run(runner, graph):
        runner.session.reset()
        seen = []
        for tokens in passes:
            runner.session.set_tokens(tokens, 248320)
            runner.replay() if graph else runner.step()
            seen.append(session_state(runner.session, runner.program))
        return seen

    _, serial = build(tiny_weights, rows, overlap=False)
    _, overlapped = build(tiny_weights, rows, overlap=True)
    reference = run(serial, graph=False)
    for graph in (False, True):
        for want, got in zip(reference, run(overlapped, graph), strict=True):
            for name in want:
                assert np.array_equal(want[name], got[name]), f"overlap (graph={graph}) differs in {name}"


def test_split_k_words_finish_in_their_own_launch_and_leave_their_arrivals_zero(tiny_weights):
    """No reduce launches: the slice that lands last finishes its row group (gemv_finish_last) and zeroes
    its arrival counter, so the next step (eager or graph) counts from zero again."""
    program, runner = build(tiny_weights, 1)
    assert any(w.k_slices > 1 for w in program.words)
    assert len(runner.launches) == sum(w.opcode != Op.NOP for w in program.words)
    run_steps(runner, TOKENS[:2], graph=False)
    run_steps(runner, TOKENS[2:4], graph=True)
    assert int(runner.arrivals.max()) == 0


@pytest.mark.parametrize("m", [2, 5, 8])
def test_m_row_pass_equals_m_one_row_passes(tiny_weights, m):
    one, runner1 = build(tiny_weights, 1)
    many, runner_m = build(tiny_weights, m)
    prefix, block = TOKENS[:3], TOKENS[3:3 + m]
    singles = run_steps(runner1, prefix + block, graph=False)
    run_steps(runner1, prefix, graph=False)  # the same history, then handed to the M-row program's session
    end = one.state_end
    assert end == many.state_end
    runner_m.session.reset()
    runner_m.session.arena[:end] = runner1.session.arena[:end]
    runner_m.session.set_tokens(block, tiny_weights.config.vocab_size)
    runner_m.step()
    arena = runner_m.session.arena.get()
    for b in many.buffers:
        if b.kind == Kind.STATE and b.name != "hidden":  # hidden is right-aligned: rows differ by design
            got = arena[b.offset:b.offset + b.nbytes]
            assert np.array_equal(got, singles[-1][b.name]), f"{b.name} differs after the {m}-row pass"
    assert arena[:4 * 3].view(np.int32)[1] == len(prefix) + m
    logits = runner_m.session.view("logits").get()
    for r in range(m):
        assert np.array_equal(logits[r], singles[len(prefix) + r]["logits"][0]), f"row {r} logits differ"


def test_teacher_forced_tiny_pow2_within_the_oracle_envelope(tiny_weights):
    goldens = Goldens(str(FIXTURES / "oracle_tiny_pow2.npz"))
    weights = goldens.weights()
    capacity = max(len(p) for p in goldens.prompts) + 1
    program, runner = build(weights, 1, capacity=capacity)
    observations = {n: observe_device(runner, weights.config, list(ids), graph=True)
                    for n, ids in enumerate(goldens.prompts)}
    report = check(goldens, observations)
    print(report.table())
    assert report.passed, report.table()


def test_a_timed_pass_past_capacity_is_refused_before_any_launch():
    """specbench.pass_ms sets the position itself and launches without the host's checks: a context past
    the session's capacity is refused before the first launch (it was an illegal address)."""
    from discrete.backend import DiscreteBackend
    from megakernel.measurement.specbench import pass_ms

    backend = DiscreteBackend("synthetic:tiny", 64, "graph")
    with pytest.raises(ValueError, match="context_full"):
        pass_ms(backend, backend._runner(1), 1024, iters=2)
    assert pass_ms(backend, backend._runner(1), 64, iters=2) > 0  # the last position is still timed


def test_device_weights_generated_on_the_gpu_equal_the_cpu_bytes(tiny_weights):
    program = lower(tiny_weights.config, rows=1, sms=132, capacity=16)
    on_gpu = DeviceWeights.synthetic(program, tiny_weights.config, seed=0, progress=False)
    from_cpu = DeviceWeights.from_weightset(program, tiny_weights, progress=False)
    assert tiny_weights.source == "synthetic:tiny:0"
    assert cupy.array_equal(on_gpu.data, from_cpu.data)
    assert int(cupy.count_nonzero(on_gpu.data)) > program.weight_bytes // 2  # not an empty arena


def test_fp8_weights_sit_in_the_arena_in_units_and_read_back_row_major(tiny_weights):
    from megakernel.runtime.weight_layout import to_units

    program = lower(tiny_weights.config, rows=1, sms=132, capacity=16)
    dev = DeviceWeights.from_weightset(program, tiny_weights, progress=False)
    fp8s = [e for e in program.weights if e.dtype == DType.FP8_E4M3]
    assert fp8s
    for e in fp8s[:4]:
        host = np.ascontiguousarray(tiny_weights[e.name]).view(np.uint8)
        stored = cupy.asnumpy(dev.data[e.offset:e.offset + host.size]).reshape(host.shape)
        assert np.array_equal(stored, to_units(host))
        assert not np.array_equal(stored, host)  # the layout is not the identity on these bytes
        assert np.array_equal(cupy.asnumpy(dev.tensor(program, e.name)), host)


def test_a_pass_past_capacity_is_refused(tiny_weights):
    program, runner = build(tiny_weights, 2, capacity=4)
    runner.session.set_tokens([1, 2], tiny_weights.config.vocab_size)
    runner.step()
    runner.session.set_tokens([3, 4], tiny_weights.config.vocab_size)
    runner.step()
    with pytest.raises(ValueError, match="context_full"):
        runner.step()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        runner.session.set_tokens([1, tiny_weights.config.vocab_size], tiny_weights.config.vocab_size)


def test_a_reset_session_is_zero_but_for_its_poisoned_activations(tiny_weights):
    """DeviceSession.reset by memsets (D74): every byte of the arena zero, except each activation buffer's, 0xFF;
    a dirtied arena reset again reads the same."""
    program = lower(tiny_weights.config, rows=3, sms=132, capacity=64)
    session = DeviceSession(program)
    want = np.zeros(session.arena.size, np.uint8)
    for b in program.buffers:
        if b.kind == Kind.ACTIVATION:
            want[b.offset:b.offset + b.nbytes] = 0xFF
    assert np.array_equal(session.arena.get(), want)
    session.arena[::7] = 0x5A
    session.reset()
    assert np.array_equal(session.arena.get(), want)
