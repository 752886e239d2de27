"""No device allocation after start-up (issue 8): once a backend has built what a generation uses
(ProgramBackend.prepare: every Program compiled, loaded and, in the graph build, captured), a 1,000-token
decode loop allocates and frees nothing: CuPy's memory hooks see no pool malloc or free and no
cudaMalloc, and CuPy's pool holds the same bytes (all of this package's device memory comes from it; the
driver's device-wide free-memory figure is not used: other processes move it). Plain greedy decoding in
each build, and speculative decoding (MTP drafts over the full and the working-vocabulary head, verify passes,
re-folds, the hidden rows moved) in the graph build and the megakernel."""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from allocations import Allocations  # noqa: E402

from discrete.backend import DiscreteBackend  # noqa: E402
from megakernel.generation import speculative  # noqa: E402

pytestmark = pytest.mark.gpu
PROMPT = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 6, 7]
TOKENS = 1000
K = 3


def decode(backend, spec: bool, tokens: int) -> list[int]:
    if spec:
        return speculative.generate_greedy_mtp(backend, PROMPT, tokens, K, backend.defined_vocab)[0]
    return speculative.plain_greedy(backend, PROMPT, tokens, backend.defined_vocab)


def pool_bytes() -> tuple[int, int]:
    """This process's device bytes in use in CuPy's pool, and held by it."""
    pool = cupy.get_default_memory_pool()
    return pool.used_bytes(), pool.total_bytes()


def test_the_hook_and_the_pool_figures_see_an_allocation():
    """Negative controls: a device array made inside the hook is counted, and one kept changes the pool's
    bytes in use."""
    before = pool_bytes()
    with Allocations() as seen:
        x = cupy.zeros(1 << 20, dtype=cupy.uint8)
    assert seen.mallocs >= 1
    assert pool_bytes()[0] == before[0] + (1 << 20)
    with Allocations() as seen:
        del x
    assert seen.frees >= 1


@pytest.mark.parametrize("mode,spec,working", [("eager", False, False), ("graph", False, False),
                                               ("megakernel", False, False), ("graph", True, False),
                                               ("megakernel", True, False), ("megakernel", True, True)])
def test_a_1000_token_decode_allocates_nothing(mode, spec, working):
    backend = DiscreteBackend("synthetic:tiny", len(PROMPT) + TOKENS + 2 * K + 8, mode)
    if working:
        backend.set_draft_vocab(16)
    backend.prepare(len(PROMPT), K if spec else 0)
    warm = decode(backend, spec, 8)  # one of each pass kind the loop will run, and the working head built
    cupy.cuda.Device().synchronize()
    before = pool_bytes()
    with Allocations() as seen:
        out = decode(backend, spec, TOKENS)
        cupy.cuda.Device().synchronize()
    assert len(out) >= TOKENS and out[:8] == warm[:8]
    assert (seen.mallocs, seen.frees, seen.device_allocs) == (0, 0, 0), vars(seen)
    assert pool_bytes() == before
    assert np.all(np.asarray(out) < backend.defined_vocab)
