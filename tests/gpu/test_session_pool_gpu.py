"""Sessions from a pool sized at start-up (megakernel/runtime/session_pool.py): create, fork and evict allocate
nothing; a fork continues exactly as its parent (tokens and session state), and a fork with one byte of
GDN state changed does not (negative control); a full pool refuses with one clear error."""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from allocations import Allocations  # noqa: E402

from compiler import lower  # noqa: E402
from megakernel.runtime.device import DeviceWeights  # noqa: E402
from megakernel.errors import InputError  # noqa: E402
from megakernel.runtime.persistent import Megakernel  # noqa: E402
from megakernel.runtime.session_pool import SessionPool  # noqa: E402

pytestmark = pytest.mark.gpu
TOKENS = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 6, 7, 12]


def greedy(runner, token: int, passes: int, vocab: int) -> list[int]:
    runner.session.set_tokens([token], vocab)
    out = []
    for _ in range(passes):
        runner.run(1)
        out.append(runner.session.tokens_out()[0])  # the next pass's input is handed off on the device
    return out


def state(session, program, without: str | None = None) -> np.ndarray:
    """The session's buffers (everything but activations), as host bytes; `without`: that buffer's bytes
    left out."""
    arena = session.arena[:program.state_end].get()
    if without is None:
        return arena
    b = next(b for b in program.buffers if b.name == without)
    return np.concatenate([arena[:b.offset], arena[b.offset + b.nbytes:]])


@pytest.fixture(scope="module")
def setup(tiny_weights):
    program = lower(tiny_weights.config, rows=1, sms=132, capacity=64, debug_logits=True)
    return tiny_weights.config, program, DeviceWeights.from_weightset(program, tiny_weights, progress=False)


def test_create_fork_evict_allocate_nothing_and_a_full_pool_says_so(setup):
    _, program, _ = setup
    pool = SessionPool(program, slots=3)
    with Allocations() as seen:
        a = pool.create()
        b = pool.fork(a)
        c = pool.create()
        with pytest.raises(InputError, match="all 3 sessions"):
            pool.create()
        pool.evict(b)
        d = pool.fork(c)
        for session in (a, c, d):
            pool.evict(session)
        cupy.cuda.Device().synchronize()
    assert (seen.mallocs, seen.frees, seen.device_allocs) == (0, 0, 0), vars(seen)
    assert pool.in_use == 0
    with pytest.raises(ValueError, match="does not hold a slot"):
        pool.evict(a)


def test_a_fork_continues_as_its_parent(setup):
    config, program, weights = setup
    vocab = config.vocab_size
    pool = SessionPool(program, slots=2)
    parent = pool.create()
    run_parent = Megakernel(program, weights, parent)
    last = greedy(run_parent, TOKENS[0], 20, vocab)[-1]
    child = pool.fork(parent)
    run_child = Megakernel(program, weights, child)  # a runner per session: its own counters
    assert child.position == parent.position == 20
    assert np.array_equal(state(child, program), state(parent, program))
    assert greedy(run_child, last, 10, vocab) == greedy(run_parent, last, 10, vocab)
    assert np.array_equal(state(child, program), state(parent, program))
    # negative control: a fork with one GDN state value changed is told apart after the same passes, by
    # the bytes those passes wrote (the changed buffer itself left out: the difference must come from the
    # runs, not from the planted value)
    pool.evict(child)
    bad = pool.fork(parent)
    planted = f"L{config.gdn_layers[0]}.ssm"
    assert np.array_equal(state(bad, program), state(parent, program))
    bad.view(planted)[0, 0] += 1.0
    assert np.array_equal(state(bad, program, without=planted), state(parent, program, without=planted))
    run_bad = Megakernel(program, weights, bad)
    last = run_parent.session.tokens_out()[0]
    greedy(run_bad, last, 3, vocab)
    greedy(run_parent, last, 3, vocab)
    assert bad.position == parent.position == 33
    assert not np.array_equal(state(bad, program, without=planted), state(parent, program, without=planted))
