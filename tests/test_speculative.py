"""Speculative greedy decoding on the CPU interpreter (megakernel/speculative.py): whatever the drafts,
the tokens are those of plain greedy decoding, and after the rollback the session (GDN states, conv
ring, KV caches up to the position) equals the plain run's bit for bit."""

import numpy as np
import pytest

from megakernel import speculative
from megakernel.generate import InterpreterBackend

CAPACITY = 64
PROMPT = [9707, 11, 1879, 0]
TOKENS = 12
K = 3


@pytest.fixture(scope="module")
def runs(tiny_weights):
    """A plain run long enough for any speculative run, and one backend reused for the speculative runs."""
    c = tiny_weights.config
    plain = InterpreterBackend(tiny_weights, CAPACITY)
    reference = speculative.plain_greedy(plain, PROMPT, TOKENS + K + 1, c.defined_vocab)
    return plain, reference, InterpreterBackend(tiny_weights, CAPACITY)


def session_state(backend, c) -> list[np.ndarray]:
    """What the next pass depends on: GDN states, the conv ring's live rows, KV rows below the position."""
    interp, pos = backend.interpreter, backend.interpreter.position
    out = [interp.ssm_state(layer, c.linear_key_head_dim) for layer in c.gdn_layers]
    out += [interp.conv_state(layer, c.linear_conv_kernel_dim) for layer in c.gdn_layers]
    out += [interp.buffer(f"L{layer}.{cache}")[:pos] for layer in c.attention_layers for cache in ("k_cache", "v_cache")]
    return out


def drafters(reference, vocab):
    yield "oracle", speculative.oracle_drafts(reference), [K]
    yield "adversarial", (lambda emitted, k: [(reference[len(emitted) + i] + 1) % vocab for i in range(k)]), [0]
    for i in range(K):
        yield f"wrong at {i}", speculative.wrong_at(reference, i, vocab), [i]


@pytest.mark.parametrize("case", ["oracle", "adversarial"] + [f"wrong at {i}" for i in range(K)])
def test_speculative_greedy_equals_plain_greedy_and_rolls_back_exactly(tiny_weights, runs, case):
    c = tiny_weights.config
    plain, reference, spec = runs
    name, drafts, accepted_each = next(d for d in drafters(reference, c.vocab_size) if d[0] == case)
    tokens, accepted = speculative.generate_greedy(spec, PROMPT, TOKENS, K, drafts, c.defined_vocab)
    assert tokens == reference[:len(tokens)] and len(tokens) >= TOKENS
    assert set(accepted) == set(accepted_each), accepted  # the drafts did what the case says
    # the same session position by plain decoding, then one more plain pass on both: the speculative
    # session folds the rows it kept into its GDN state first
    plain.start(PROMPT)
    for t in reference[:len(tokens) - 1]:
        plain.greedy_step(t)
    assert spec.interpreter.position == plain.interpreter.position == len(PROMPT) + len(tokens) - 1
    assert spec.greedy_step(tokens[-1]) == plain.greedy_step(tokens[-1]) == reference[len(tokens)]
    for a, b in zip(session_state(spec, c), session_state(plain, c), strict=True):
        assert np.array_equal(a, b)


def test_a_verify_pass_keeps_its_rows_out_of_the_state_until_committed(tiny_weights, runs):
    """Negative control: a verify pass whose rows were all rejected (commit(1)) differs from one whose
    rows are kept (commit(K + 1)): the checker above can tell a rollback from none."""
    c = tiny_weights.config
    _, reference, spec = runs
    states = []
    for keep in (1, K + 1):
        spec.start(PROMPT)
        spec.verify(reference[:K + 1])
        spec.commit(keep)
        spec.greedy_step(reference[keep])
        states.append(spec.interpreter.ssm_state(c.gdn_layers[0], c.linear_key_head_dim).copy())
    assert not np.array_equal(*states)
