"""The prompt programs on the GPU (discrete build; megakernel/runtime/cuda/prompt_ops.cuh, prompt_gdn.cuh,
prompt_gemm.cuh), tiny preset:

* every word against the CPU interpreter, word by word from the same arena (tests/gpu/per_word.py): every
  written buffer within the op tolerance (the operand slabs, int32, byte for byte; bf16 outputs as the decode
  words'; the GDN state in fp32), every other byte exactly;
* a chunk run eagerly and from the CUDA graph, bit for bit;
* generation through the prompt path (discrete/backend.py, prompt_path "program"): eager, graph and megakernel
  bit for bit (the prompt by the discrete kernels, then decode), close to the CPU interpreter's, 64- and
  128-row chunks bit for bit; speculative decoding after it equal to plain greedy decoding;
* the prompt path scored by the calibrated checker on the tiny power-of-two goldens.

Written in sessions without a GPU (D68-D70), checked on the CPU first (tests/test_prompt_words_on_cpu.py); all
pass on the H200 (D70, experiments/results/prompt_s41/).
"""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower_mtp_prompt, lower_prompt  # noqa: E402
from discrete.backend import DiscreteBackend  # noqa: E402
from discrete.launcher import DiscreteProgram  # noqa: E402
from isa import PROMPT_OPS, Op  # noqa: E402
from isa.opcodes import MTP_LAYER  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from per_word import check_word, interpreter_at  # noqa: E402

pytestmark = pytest.mark.gpu
CAPACITY = 384
ROWS = 160  # two token tiles, the second partial; the chunks below run 150 and 131 of them


def chunk_beside_the_interpreter(weights, program, position, tokens, seed=0):
    """Random session state at `position` (the program's own control lane), the chunk's tokens set; the
    interpreter and its GPU runner on that arena."""
    interp = interpreter_at(program, weights, position, tokens, seed)
    runner = DiscreteProgram(program, DeviceWeights.from_weightset(program, weights, progress=False),
                             DeviceSession(program))
    return interp, runner


def every_word(weights, program, position, tokens, seed=0):
    interp, runner = chunk_beside_the_interpreter(weights, program, position, tokens, seed)
    problems = []
    for i in range(len(program.words)):
        problems += check_word(interp, runner, program, i)
    return problems


@pytest.mark.parametrize("position, capacity", [(37, CAPACITY), (2950, 3200)])  # 3 and 49 key tiles
def test_every_prompt_word_matches_the_interpreter(tiny_weights, position, capacity):
    c = tiny_weights.config
    program = lower_prompt(c, rows=ROWS, sms=132, capacity=capacity)
    assert {w.opcode for w in program.words} == PROMPT_OPS - {Op.MTP_PREPARE}  # every kernel but the MTP's
    problems = every_word(tiny_weights, program, position, [(7919 * i) % c.defined_vocab for i in range(150)])
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


GEN_PROMPT = [(7919 * i + 3) % 2000 for i in range(150)]  # two 64-row chunks, a 21-row one, the last token


def live_state(backend) -> dict[str, np.ndarray]:
    """The session's GDN states, conv rings and KV rows below the position, on the host."""
    s, c, pos = backend.session, backend.config, backend.position
    out = {f"L{i}.{n}": s.view(f"L{i}.{n}").get() for i in c.gdn_layers for n in ("ssm", "conv_ring")}
    out.update({f"L{i}.{n}": s.view(f"L{i}.{n}").get()[:pos] for i in c.attention_layers
                for n in ("k_cache", "v_cache")})
    return out


def greedy_run(backend, prompt, steps=4):
    """The prompt's last logits, `steps` greedy tokens after it, and the session then."""
    logits = backend.start(prompt)
    tokens = [int(np.argmax(logits[:backend.defined_vocab]))]
    while len(tokens) < steps:
        tokens.append(backend.greedy_step(tokens[-1]))
    return logits, tokens, live_state(backend)


def test_generation_through_the_prompt_program_is_the_same_in_every_mode_and_close_to_the_interpreter(tiny_weights):
    from megakernel.generation.generate import InterpreterBackend

    c = tiny_weights.config
    runs, weights = {}, None
    for mode in ("eager", "graph", "megakernel"):
        backend = DiscreteBackend("synthetic:tiny", CAPACITY, mode, weights=weights, prompt_path="program",
                                  prompt_chunk=64)
        weights = backend.weights
        runs[mode] = greedy_run(backend, GEN_PROMPT)
    logits, tokens, state = runs["graph"]
    for mode in ("eager", "megakernel"):
        assert np.array_equal(runs[mode][0], logits) and runs[mode][1] == tokens, mode
        for key, value in state.items():
            assert np.array_equal(runs[mode][2][key], value), f"{mode}: {key}"
    cpu = InterpreterBackend(tiny_weights, CAPACITY, sms=132, prompt_path="program", prompt_chunk=64).start(GEN_PROMPT)
    error = float(np.abs(logits - cpu).max())
    print(f"prompt path, GPU vs interpreter: largest logit difference {error:.4g} of {np.abs(cpu).max():.4g}")
    # bf16 roundings that go the other way compound over layers and chunks: 2.4 % of the largest logit with the
    # same kernels run on the CPU (tests/test_prompt_words_on_cpu.py, D70); the GPU's sums run in other orders again
    assert error <= 0.06 * np.abs(cpu).max()
    assert int(np.argmax(logits[:c.defined_vocab])) == int(np.argmax(cpu[:c.defined_vocab]))


def test_the_prompt_in_64_and_128_row_chunks_is_the_same_bit_for_bit():
    """Every prompt word computes a row from that row and absolute positions alone (NUMERICS.md "The prompt
    path"), so chunks on multiples of 64 rows give the same session."""
    a = DiscreteBackend("synthetic:tiny", CAPACITY, "graph", prompt_path="program", prompt_chunk=64)
    b = DiscreteBackend("synthetic:tiny", CAPACITY, "graph", weights=a.weights, prompt_path="program",
                        prompt_chunk=128)
    (la, ta, sa), (lb, tb, sb) = greedy_run(a, GEN_PROMPT), greedy_run(b, GEN_PROMPT)
    assert np.array_equal(la, lb) and ta == tb
    for key in sa:
        assert np.array_equal(sa[key], sb[key]), key


@pytest.mark.parametrize("mode", ["graph", "megakernel"])
def test_speculative_decoding_after_the_prompt_program_is_plain_greedy(mode):
    from megakernel.generation.speculative import generate_greedy_mtp

    backend = DiscreteBackend("synthetic:tiny", CAPACITY, mode, prompt_path="program", prompt_chunk=64)
    _, plain, _ = greedy_run(backend, GEN_PROMPT, steps=16)
    tokens, accepted = generate_greedy_mtp(backend, GEN_PROMPT, 16, 3, backend.defined_vocab)
    assert tokens[:16] == plain and accepted


def test_a_prompt_chunk_past_the_capacity_is_refused_before_any_launch():
    from megakernel.runtime.device import SessionInputError

    backend = DiscreteBackend("synthetic:tiny", 100, "graph", prompt_path="program", prompt_chunk=64)
    with pytest.raises(SessionInputError, match="context_full"):
        backend.start(GEN_PROMPT)  # 149 prompt rows into a 100-token session: the second chunk is refused


def test_the_prompt_path_passes_the_oracle_checker_on_the_tiny_pow2_goldens():
    """The calibrated checker (megakernel/measurement/checker.py) on the prompt path's logits (every position's,
    from the chunks' post-final-norm rows) and states, 64-row chunks; the oracle's own decode path is the
    reference point, as for the engine's decode (tests/gpu/test_discrete_gpu.py)."""
    from pathlib import Path

    from discrete.observe import observe_prompt_path
    from megakernel.measurement.checker import Goldens, check

    goldens = Goldens(str(Path(__file__).parent.parent / "fixtures" / "oracle_tiny_pow2.npz"))
    config = goldens.config
    capacity = max(len(p) for p in goldens.prompts) + 1
    program = lower_prompt(config, rows=64, sms=132, capacity=capacity)
    weights = DeviceWeights.synthetic(program, config, goldens.seed, pow2_scales=True, progress=False)
    runner = DiscreteProgram(program, weights, DeviceSession(program))
    observations = {n: observe_prompt_path(runner, weights, config, list(ids))
                    for n, ids in enumerate(goldens.prompts)}
    report = check(goldens, observations)
    print(report.table())
    assert report.passed, report.table()
