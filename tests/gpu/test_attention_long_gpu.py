"""The attention tiles over long key ranges (tiny preset, random session state at position 3,000 or 6,000
of 8,192): each of the 32 partitions then holds ~94 or ~188 keys from a start that is not aligned to the
tiles' 16-key steps, so ATTN_SCORES and ATTN_PV stream two to four chunks of 64 keys (attention.cuh) and an
M-row pass's rows end in different chunks. The other GPU tests reach positions of at most ~260: at most 8
keys a partition, one chunk a tile.

* every attention word of a pass against the CPU interpreter from the same arena (the other words run on the
  interpreter alone; tests/gpu/per_word.py compares the whole arena);
* an M-row pass equals M one-row passes bit for bit (state buffers and logits), and the megakernel equals the
  graph build, pass after pass.
"""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower  # noqa: E402
from compiler.interpreter import Interpreter  # noqa: E402
from discrete.launcher import DiscreteProgram  # noqa: E402
from isa import Kind, Op  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from megakernel.runtime.persistent import Megakernel  # noqa: E402
from per_word import check_word, interpret_word, randomise_session  # noqa: E402
from program_tools import session_state  # noqa: E402

pytestmark = pytest.mark.gpu
CAPACITY = 8192
POSITIONS = [3000, 6000]
ATTENTION = (Op.ATTN_SCORES, Op.ATTN_PV, Op.ATTN_MERGE)


def random_state(weights, rows: int, seed: int, position: int):
    """An interpreter of the rows-row Program whose state buffers hold random values at `position`."""
    program = lower(weights.config, rows=rows, sms=132, capacity=CAPACITY, debug_logits=True)
    interp = Interpreter(program, weights)
    randomise_session(interp, program, np.random.default_rng(seed), position=position)
    return program, interp


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("rows", [1, 8])
def test_attention_words_over_long_ranges_match_the_interpreter(tiny_weights, rows, position):
    program, interp = random_state(tiny_weights, rows, seed=rows, position=position)
    interp.set_tokens(list(range(100, 100 + rows)))
    runner = DiscreteProgram(program, DeviceWeights.from_weightset(program, tiny_weights, progress=False),
                             DeviceSession(program))
    failures, checked = [], 0
    for i, w in enumerate(program.words):
        if w.opcode in ATTENTION:
            failures += check_word(interp, runner, program, i)
            checked += 1
        else:
            interpret_word(interp, program, i)
    assert checked >= 3 and not failures, "\n".join(failures)


def passes_from_random_state(weights, program, state: np.ndarray, blocks, megakernel: bool = False,
                             device_weights=None) -> list[dict]:
    """The session state after the passes of `program` (one a block of tokens) from `state` (the state
    buffers' bytes, [0, state_end)); `device_weights`: the program's, if already on the device."""
    if device_weights is None:
        device_weights = DeviceWeights.from_weightset(program, weights, progress=False)
    session = DeviceSession(program)
    session.arena[:state.size] = cupy.asarray(state)
    runner = Megakernel(program, device_weights, session) if megakernel else \
        DiscreteProgram(program, device_weights, session)
    seen = []
    for block in blocks:
        session.set_tokens(block, weights.config.vocab_size)
        runner.run(1) if megakernel else runner.step()
        seen.append(session_state(session, program))
    return seen


@pytest.mark.parametrize("position", POSITIONS)
def test_m_row_pass_equals_m_one_row_passes_over_long_ranges(tiny_weights, position):
    m = 5
    one, interp = random_state(tiny_weights, 1, seed=7, position=position)
    many = lower(tiny_weights.config, rows=m, sms=132, capacity=CAPACITY, debug_logits=True)
    assert one.state_end == many.state_end
    state = interp.arena[:one.state_end].copy()
    tokens = [9707, 11, 1879, 0, 151]
    singles = passes_from_random_state(tiny_weights, one, state, [[t] for t in tokens])
    (whole,) = passes_from_random_state(tiny_weights, many, state, [tokens])
    for b in many.buffers:
        if b.kind == Kind.STATE and b.name != "hidden":  # hidden is right-aligned: rows differ by design
            assert np.array_equal(whole[b.name], singles[-1][b.name]), f"{b.name} differs after the {m}-row pass"
    for r in range(m):
        assert np.array_equal(whole["logits"][r], singles[r]["logits"][0]), f"row {r} logits differ"


@pytest.mark.parametrize("rows", [1, 8])
def test_megakernel_equals_graph_over_long_ranges(tiny_weights, rows):
    program, interp = random_state(tiny_weights, rows, seed=11, position=POSITIONS[-1])
    state = interp.arena[:program.state_end].copy()
    blocks = [list(range(200 + rows * p, 200 + rows * (p + 1))) for p in range(2)]
    device_weights = DeviceWeights.from_weightset(program, tiny_weights, progress=False)
    graph = passes_from_random_state(tiny_weights, program, state, blocks, device_weights=device_weights)
    mega = passes_from_random_state(tiny_weights, program, state, blocks, megakernel=True,
                                    device_weights=device_weights)
    for p, (g, k) in enumerate(zip(graph, mega, strict=True)):
        for name in g:
            assert np.array_equal(g[name], k[name]), f"{name} differs after pass {p}"
