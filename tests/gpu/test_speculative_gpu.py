"""Speculative greedy decoding on the GPU builds (discrete/backend.py, megakernel/generation/speculative.py): the
tokens are plain greedy decoding's, and after the rollback the session (GDN states, the conv ring's live
rows, KV rows below the position, the MTP cache) equals a plain run's bit for bit; prompts through 8-row
passes equal prompts through one-row passes. Drafts from a plain run (all accepted), adversarial (none),
wrong at each position, and the model's own MTP head. Graph and megakernel, tiny and the 27B synthetic
model."""

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from discrete.backend import DiscreteBackend  # noqa: E402
from megakernel.generation import speculative  # noqa: E402
from megakernel.generation.generate import MAX_PROMPT_ROWS  # noqa: E402
from megakernel.model.sampling import greedy  # noqa: E402

pytestmark = pytest.mark.gpu
PROMPT = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 6, 7]  # two prompt chunks at 8 rows: 8 + 3
K = 3


def live_state(backend) -> dict[str, np.ndarray]:
    """What the next pass depends on, copied to the host."""
    s, c, pos = backend.session, backend.config, backend.position
    out = {}
    for layer in c.gdn_layers:
        out[f"L{layer}.ssm"] = s.view(f"L{layer}.ssm").get()
        ring = s.view(f"L{layer}.conv_ring").get()
        out[f"L{layer}.conv"] = ring[[(pos - c.linear_conv_kernel_dim + 1 + i) % len(ring)
                                      for i in range(c.linear_conv_kernel_dim - 1)]]
    for layer in c.attention_layers:
        for cache in ("k_cache", "v_cache"):
            out[f"L{layer}.{cache}"] = s.view(f"L{layer}.{cache}").get()[:pos]
    return out


def plain_then_state(backend, tokens: int):
    reference = speculative.plain_greedy(backend, PROMPT, tokens, backend.defined_vocab)
    nxt = backend.greedy_step(reference[-1])
    return reference, nxt, live_state(backend)


def drafters(reference, vocab):
    yield "oracle", speculative.oracle_drafts(reference)
    yield "adversarial", lambda emitted, k: [(reference[len(emitted) + i] + 1) % vocab for i in range(k)]
    for i in range(K):
        yield f"wrong at {i}", speculative.wrong_at(reference, i, vocab)


def assert_continues_as_plain(backend, out: list[int], name: str = "") -> None:
    """One more pass after speculative decoding emitted `out` (it folds the last verify pass's kept
    rows): its token and the live state equal those of plain decoding of the same tokens (one-row prompt
    passes, then back to 8)."""
    nxt = backend.greedy_step(out[-1])
    spec_state = live_state(backend)
    backend.prompt_rows = 1
    plain, plain_next, plain_state = plain_then_state(backend, len(out))
    backend.prompt_rows = 8
    assert plain == out and plain_next == nxt, name
    for key in plain_state:
        assert np.array_equal(spec_state[key], plain_state[key]), f"{name}: {key}"


def check_speculation(backend, cases, tokens=12):
    """Every drafter's run against a plain run of the same length on the same backend (one session: the
    plain run's state is kept on the host)."""
    backend.prompt_rows = 1
    reference = speculative.plain_greedy(backend, PROMPT, tokens + K + 1, backend.defined_vocab)
    backend.prompt_rows = 8
    for name, drafts in cases(reference):
        out, _ = speculative.generate_greedy(backend, PROMPT, tokens, K, drafts, backend.defined_vocab)
        assert out == reference[:len(out)], name
        assert_continues_as_plain(backend, out, name)


@pytest.mark.parametrize("mode", ["graph", "megakernel"])
def test_tiny_speculative_greedy_equals_plain(mode):
    backend = DiscreteBackend("synthetic:tiny", 96, mode)
    check_speculation(backend, lambda ref: drafters(ref, backend.vocab))


def test_27b_speculative_greedy_equals_plain_on_the_megakernel_with_controlled_and_mtp_drafts():
    backend = DiscreteBackend("synthetic:qwen3.5-27b", 96, "megakernel")
    check_speculation(backend, lambda ref: [("wrong at 1", speculative.wrong_at(ref, 1, backend.vocab))], tokens=8)
    out, _ = speculative.generate_greedy_mtp(backend, PROMPT, 8, K, backend.defined_vocab)  # the MTP head's drafts
    backend.prompt_rows = 1
    assert out == speculative.plain_greedy(backend, PROMPT, len(out), backend.defined_vocab)


@pytest.mark.parametrize("mode", ["graph", "megakernel"])
def test_prompt_in_8_row_passes_equals_one_row_passes(mode):
    backend = DiscreteBackend("synthetic:tiny", 96, mode, prompt_rows=1)
    one = backend.start(PROMPT)
    one_state = live_state(backend)
    backend.prompt_rows = 8
    eight = backend.start(PROMPT)
    assert np.array_equal(one, eight)
    for key, value in live_state(backend).items():
        assert np.array_equal(value, one_state[key]), key


def plain_with_mtp(backend, tokens: int) -> list[int]:
    """Plain greedy decoding one row per pass, each pass followed by the one-row MTP pass over its hidden
    row and the token after it: the MTP cache a speculative run must reproduce."""
    backend.reset()
    for t, token in enumerate(PROMPT):
        logits = backend.run_rows([token])
        following = PROMPT[t + 1] if t + 1 < len(PROMPT) else greedy(logits, backend.defined_vocab)
        backend.mtp_prefill([following], t, MAX_PROMPT_ROWS - 1)
    emitted = [following]
    while len(emitted) < tokens:
        position = backend.position
        emitted.append(backend.greedy_step(emitted[-1]))
        backend.mtp_prefill([emitted[-1]], position, MAX_PROMPT_ROWS - 1)
    return emitted


@pytest.mark.parametrize("mode", ["graph", "megakernel"])
def test_mtp_drafts_give_plain_greedy_tokens_and_the_same_session(mode):
    backend = DiscreteBackend("synthetic:tiny", 96, mode)
    out, accepted = speculative.generate_greedy_mtp(backend, PROMPT, 24, K, backend.defined_vocab)
    final = backend.position - (accepted[-1] + 1)  # MTP rows below the last verify pass are final
    spec_mtp = {c: backend.session.view(f"mtp.{c}").get()[:final] for c in ("k_cache", "v_cache")}
    assert_continues_as_plain(backend, out)
    plain_with_mtp(backend, len(out))
    for cache, rows in spec_mtp.items():
        assert np.array_equal(rows, backend.session.view(f"mtp.{cache}").get()[:final]), cache
    assert len(accepted) >= (24 - 1) // (K + 1)  # verify passes ran, not the plain fallback
    print(f"{mode}: {len(accepted)} verify passes, drafts accepted {accepted}")


@pytest.mark.parametrize("mode", ["graph", "megakernel"])
def test_working_vocabulary_drafts_give_plain_greedy_tokens_and_the_same_session(mode):
    """The MTP head over a working vocabulary (a 16-id core and the session's ids): the gathered head is
    the lm_head's rows of the id table, padding rows tie with the first row bit for bit (so they never
    win), a draft is the table's best row mapped to its id, and the tokens and session are plain's."""
    from megakernel.model.tensors import LM_HEAD

    backend = DiscreteBackend("synthetic:tiny", 96, mode)
    backend.set_draft_vocab(16)
    out, accepted = speculative.generate_greedy_mtp(backend, PROMPT, 24, K, backend.defined_vocab)
    table = backend._draft_table
    lm_head = backend.weights.tensor(backend.program, LM_HEAD).get()
    assert np.array_equal(backend.session.view("mtp.draft_head").get(), lm_head[table])
    assert np.array_equal(backend.session.view("mtp.draft_ids").get()[0], table)
    live = len(backend.draft_vocab.ids)
    assert live < len(table)
    assert set(out[:len(out) - accepted[-1] - 1]) <= backend.draft_vocab.ids  # all but the last pass's tokens
    draft = backend.mtp_next()
    logits = backend.session.view("mtp.logits", backend._last_mtp.program).get()[0]
    assert np.array_equal(logits[live:], np.full(len(table) - live, logits[0], np.float32))
    assert draft == table[int(np.argmax(logits))]
    assert_continues_as_plain(backend, out)
    assert len(accepted) >= (24 - 1) // (K + 1)
