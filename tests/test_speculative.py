"""Speculative decoding on the CPU interpreter (megakernel/generation/speculative.py): greedy, whatever the drafts,
the tokens are those of plain greedy decoding; greedy or sampled, after the rollback the session (GDN
states, conv ring, KV caches up to the position) equals a plain run's over the same tokens bit for bit."""

import numpy as np
import pytest

from megakernel.generation import speculative
from megakernel.generation.generate import InterpreterBackend, ProgramBackend

CAPACITY = 64
PROMPT = [1707, 11, 1879, 0]  # ids of micro's 2,048-row vocabulary
TOKENS = 12
K = 3


@pytest.fixture(scope="module")
def tok():
    from megakernel.model.tokenizer import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="module")
def runs(micro_weights):
    """A plain run long enough for any speculative run, and one backend reused for the speculative runs."""
    c = micro_weights.config
    plain = InterpreterBackend(micro_weights, CAPACITY)
    reference = speculative.plain_greedy(plain, PROMPT, TOKENS + K + 1, c.defined_vocab)
    return plain, reference, InterpreterBackend(micro_weights, CAPACITY)


def session_state(backend, c) -> list[np.ndarray]:
    """What the next pass depends on: GDN states, the conv ring's live rows, KV rows below the position."""
    interp, pos = backend.interpreter, backend.interpreter.position
    out = [interp.ssm_state(layer, c.linear_key_head_dim) for layer in c.gdn_layers]
    out += [interp.conv_state(layer, c.linear_conv_kernel_dim) for layer in c.gdn_layers]
    out += [interp.buffer(f"L{layer}.{cache}")[:pos] for layer in c.attention_layers for cache in ("k_cache", "v_cache")]
    return out


def assert_same_session(spec, plain, c) -> None:
    assert spec.interpreter.position == plain.interpreter.position, "the sessions' positions differ"
    for a, b in zip(session_state(spec, c), session_state(plain, c), strict=True):
        assert np.array_equal(a, b), "the sessions' states differ"


def drafters(reference, vocab):
    yield "oracle", speculative.oracle_drafts(reference), [K]
    yield "adversarial", (lambda emitted, k: [(reference[len(emitted) + i] + 1) % vocab for i in range(k)]), [0]
    for i in range(K):
        yield f"wrong at {i}", speculative.wrong_at(reference, i, vocab), [i]


@pytest.mark.parametrize("case", ["oracle", "adversarial"] + [f"wrong at {i}" for i in range(K)])
def test_speculative_greedy_equals_plain_greedy_and_rolls_back_exactly(micro_weights, runs, case):
    c = micro_weights.config
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
    assert_same_session(spec, plain, c)


def sessions_after_a_partly_rejected_verify_pass(runs, vocab, kept):
    """Speculative: a verify pass over [t0, d1..dK] whose first kept - 1 drafts are right and the others
    wrong, commit(kept), one pass over the next token. Plain: one pass per kept token and the next. The
    same tokens at the same positions: only the rejected rows left in the session can make them differ."""
    plain, reference, spec = runs
    spec.start(PROMPT)
    spec.verify(reference[:kept] + [(t + 1) % vocab for t in reference[kept:K + 1]])
    spec.commit(kept)
    spec.greedy_step(reference[kept])
    plain.start(PROMPT)
    for t in reference[:kept + 1]:
        plain.greedy_step(t)
    return spec, plain


@pytest.mark.parametrize("kept", range(1, K + 1))
def test_a_verify_pass_keeps_its_rejected_rows_out_of_the_session(micro_weights, runs, kept):
    c = micro_weights.config
    assert_same_session(*sessions_after_a_partly_rejected_verify_pass(runs, c.defined_vocab, kept), c)


def keep_every_verify_row(monkeypatch):
    """No rollback at all: commit() keeps the whole verify pass, whatever the host accepted."""
    commit = ProgramBackend.commit
    monkeypatch.setattr(ProgramBackend, "commit", lambda self, rows: commit(self, self._verified[1]))


def fold_every_verify_row_into_the_gdn_state(monkeypatch):
    """The position rolls back but the GDN state does not: the verify pass folds all its rows as it runs
    (not speculative) and commit() leaves none pending."""
    run_pass, commit = ProgramBackend._pass, ProgramBackend.commit

    def commit_without_pending(self, rows):
        commit(self, rows)
        self._pending = 0

    monkeypatch.setattr(ProgramBackend, "_pass", lambda self, tokens, speculative=False: run_pass(self, tokens))
    monkeypatch.setattr(ProgramBackend, "commit", commit_without_pending)


@pytest.mark.parametrize("plant_bug, caught_by", [(keep_every_verify_row, "positions"),
                                                  (fold_every_verify_row_into_the_gdn_state, "states")])
def test_the_rollback_check_catches_a_broken_rollback(micro_weights, runs, monkeypatch, plant_bug, caught_by):
    c = micro_weights.config
    plant_bug(monkeypatch)
    with pytest.raises(AssertionError, match=f"sessions' {caught_by} differ"):
        assert_same_session(*sessions_after_a_partly_rejected_verify_pass(runs, c.defined_vocab, kept=1), c)


def test_the_models_own_mtp_head_drafts_and_the_tokens_stay_those_of_plain_greedy(micro_weights, runs):
    """The MTP head prefilled over a prompt of two chunks (8 + 3 rows) and re-prefilled over the kept rows
    after every verify pass; whatever it drafts (random tiny weights: its acceptance means nothing), the
    tokens and the session are plain greedy's."""
    c = micro_weights.config
    plain, _, spec = runs
    prompt = PROMPT + [5, 6, 7, 8, 9, 10, 11]
    reference = speculative.plain_greedy(plain, prompt, TOKENS + K + 1, c.defined_vocab)
    tokens, accepted = speculative.generate_greedy_mtp(spec, prompt, TOKENS, K, c.defined_vocab)
    assert tokens == reference[:len(tokens)] and len(tokens) >= TOKENS
    assert all(0 <= a <= K for a in accepted)
    plain.start(prompt)
    for t in reference[:len(tokens) - 1]:
        plain.greedy_step(t)
    assert spec.greedy_step(tokens[-1]) == plain.greedy_step(tokens[-1])
    assert_same_session(spec, plain, c)


def test_mtp_over_kept_rows_equals_the_reference_head(micro_weights, runs):
    """The MTP rows the speculative loop writes after a verify pass (the kept rows' hidden moved
    right-aligned) give the MTP logits of the NumPy reference head (engine mode) bit for bit, and so do
    the chained drafts after them."""
    from megakernel.reference import Mode, ReferenceModel

    c = micro_weights.config
    _, reference_tokens, spec = runs
    model = ReferenceModel(micro_weights, Mode.ENGINE)
    session = model.new_session(CAPACITY)
    t0, drafts, kept = reference_tokens[0], reference_tokens[1:K + 1], 2
    # prompt: target rows, then the MTP head over them
    out = model.forward(session, PROMPT)
    model.mtp_prefill(session, PROMPT, out.hidden, t0)
    spec.reset()
    spec.run_rows(PROMPT)
    spec.mtp_prefill(PROMPT[1:] + [t0], 0, 8 - len(PROMPT))
    # a verify pass of [t0, d1..dk]; the current token and one draft kept
    verify = model.forward(session, [t0, *drafts])
    spec.verify([t0, *drafts])
    spec.commit(kept)
    following = [*drafts[:kept - 1], reference_tokens[kept]]  # the token after each kept row
    mtp = model.mtp_forward(session, following, verify.hidden[:kept], np.arange(len(PROMPT), len(PROMPT) + kept))
    draft = spec.mtp_prefill(following, len(PROMPT), 8 - (K + 1))
    assert np.array_equal(spec._mtp_runner(kept).buffer("mtp.logits"), mtp.logits)
    assert draft == int(np.argmax(mtp.logits[-1, :c.defined_vocab]))
    chained = model.mtp_draft(session, draft, mtp.hidden[-1], len(PROMPT) + kept, 2)
    assert [spec.mtp_next() for _ in range(2)] == chained


def test_commit_needs_a_verify_pass_and_keeps_at_most_its_rows(runs):
    _, reference, spec = runs
    spec.start(PROMPT)
    with pytest.raises(ValueError, match="verify"):
        spec.commit(1)
    spec.verify(reference[:K + 1])
    with pytest.raises(ValueError, match=f"1..{K + 1}"):
        spec.commit(K + 2)
    spec.commit(K + 1)
    with pytest.raises(ValueError, match="verify"):
        spec.commit(1)  # once


def test_generate_with_spec_k_gives_the_plain_greedy_tokens(micro_weights, runs, tok):
    """The generation loop (megakernel generate --spec-k) over MTP drafts and verify passes: the same
    tokens as without speculation, the drafts accepted reported per verify pass, a stop at max tokens."""
    from megakernel.generation.generate import LENGTH, generate

    plain, _, spec = runs
    prompt = PROMPT + [5, 6, 7, 8, 9, 10, 11]
    ref = generate(plain, tok, prompt, 10)
    out = generate(spec, tok, prompt, 10, spec_k=K)
    assert out.tokens == ref.tokens and out.text == ref.text and out.stop_reason == ref.stop_reason == LENGTH
    assert out.drafts_accepted and all(0 <= a <= K for a in out.drafts_accepted)
    assert ref.drafts_accepted is None and "drafts_accepted" in out.as_dict()


def test_speculation_near_the_session_capacity_continues_one_pass_at_a_time(micro_weights, tok):
    """Fewer than k + 1 rows left: plain passes take over, up to context_full, with plain greedy's tokens."""
    from megakernel.generation.generate import CONTEXT_FULL, generate

    small = 20
    plain, spec = InterpreterBackend(micro_weights, small), InterpreterBackend(micro_weights, small)
    ref = generate(plain, tok, PROMPT, 64)
    out = generate(spec, tok, PROMPT, 64, spec_k=K)
    assert out.tokens == ref.tokens and out.stop_reason == ref.stop_reason == CONTEXT_FULL


@pytest.mark.parametrize("temperature,top_k,branch", [(1.5, 0, "accept"), (1.0, 5, "reject")])
def test_sampled_speculation_leaves_the_session_plain_decoding_of_its_tokens_would(micro_weights, runs, temperature,
                                                                                   top_k, branch):
    """Sampled drafts from the MTP head's distribution, accepted by the exact rule (speculative_step, tested
    against its distribution in test_sampling.py); the session is then that of plain passes over the same
    tokens, and a second run with the seed repeats the tokens."""
    from megakernel.model.sampling import SamplingParams

    c = micro_weights.config
    plain, _, spec = runs
    prompt = PROMPT + [5, 6, 7, 8, 9, 10, 11]
    params = SamplingParams(temperature=temperature, top_k=top_k, seed=3)

    def run():
        tokens, accepted = [], []
        for out, kept in speculative.mtp_batches(spec, prompt, K, c.defined_vocab, CAPACITY, params):
            tokens += out
            accepted += [] if kept is None else [kept]
            if len(tokens) >= TOKENS:
                return tokens, accepted

    tokens, accepted = run()
    assert (sum(accepted) > 0) if branch == "accept" else (sum(accepted) < K * len(accepted)), accepted
    plain.start(prompt)
    for t in tokens[:-1]:
        plain.step(t)
    spec.step(tokens[-1])
    plain.step(tokens[-1])
    assert_same_session(spec, plain, c)
    assert run()[0] == tokens


def test_a_session_sized_for_the_widest_passes_serves_every_program_of_the_27b():
    """The GPU backends size one session for the widest target and MTP passes (the 27B's 8-row MTP pass
    needs more activation bytes than its 8-row target pass): every other Program fits in it."""
    from compiler import lower, lower_mtp
    from megakernel.measurement.budgets import session_plan
    from megakernel.model.models import model_config

    c, capacity = model_config("synthetic:qwen3.5-27b"), 512
    session = session_plan(c, capacity)["session_bytes"]
    programs = [lower_mtp(c, rows=1, capacity=capacity, chained=True, debug_logits=True)]
    programs += [lower_mtp(c, rows=m, capacity=capacity, debug_logits=True) for m in (1, 3, 7)]
    programs += [lower(c, rows=m, capacity=capacity, debug_logits=True) for m in (1, 3, 7)]
    assert all(p.arena_bytes <= session for p in programs)
