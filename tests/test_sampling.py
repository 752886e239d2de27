import dataclasses

import numpy as np
import pytest

from megakernel.model import sampling
from megakernel.errors import InputError
from megakernel.model.sampling import (
    SamplingParams,
    accept_draft,
    greedy,
    greedy_accept,
    inverse_cdf,
    make_rng,
    probabilities,
    residual_distribution,
    sample,
    speculative_step,
    top_p_filter,
)

# Upper 0.001 critical values of the chi-square distribution (standard tables, e.g. NIST/SEMATECH
# e-Handbook 1.3.6.7.4), keyed by degrees of freedom. The random tests use fixed seeds, so they are
# deterministic; alpha = 0.001 keeps a correct implementation well clear of the line while a wrong
# distribution (the negative controls below) lands orders of magnitude above it.
CHI2_CRITICAL_0001 = {5: 20.515, 7: 24.322}


def chi_square(draws: np.ndarray, probs: np.ndarray) -> float:
    """Pearson's statistic of integer draws against probs; ids with probability 0 must never occur."""
    counts = np.bincount(draws, minlength=probs.size)
    assert counts.size == probs.size, "a draw fell outside the vocabulary"
    assert counts[probs == 0].sum() == 0, "an id with probability 0 was drawn"
    expected = probs[probs > 0] * draws.size
    assert expected.min() >= 5, "too few draws for the chi-square approximation"
    return float((((counts[probs > 0] - expected) ** 2) / expected).sum())


def softmax64(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def support(p: np.ndarray) -> set[int]:
    return set(np.flatnonzero(p).tolist())


def row(values: list[float], padding: list[float] = ()) -> np.ndarray:
    return np.array(list(values) + list(padding), dtype=np.float32)


# --- greedy -------------------------------------------------------------------------------------


def test_greedy_lowest_id_wins_exact_ties():
    assert greedy(row([1.0, 4.0, 2.0, 4.0, 4.0]), 5) == 1


def test_greedy_never_picks_padding():
    logits = row([1.0, 3.0, 2.0], padding=[50.0, 50.0])
    assert greedy(logits, 3) == 1


def test_nan_logits_raise_value_error():
    logits = row([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="NaN"):
        greedy(logits, 3)
    with pytest.raises(ValueError, match="NaN"):
        sample(logits, SamplingParams(temperature=1.0), make_rng(0), 3)


def test_nan_in_padding_is_ignored():
    assert greedy(row([1.0, 3.0], padding=[float("nan")]), 2) == 1


def test_defined_vocab_must_fit_the_row():
    with pytest.raises(ValueError, match="defined_vocab"):
        greedy(row([1.0, 2.0]), 3)


# --- top-k --------------------------------------------------------------------------------------


def test_top_k_keeps_every_id_tied_with_kth_value():
    logits = row([1.0, 3.0, 2.0, 2.0, 2.0, 0.0], padding=[9.0, 9.0])
    p = probabilities(logits, SamplingParams(temperature=1.0, top_k=2), 6)
    # The 2nd largest value is 2.0, held by ids 2, 3 and 4: k = 2 keeps four ids.
    assert support(p) == {1, 2, 3, 4}
    np.testing.assert_allclose(p[[1, 2, 3, 4]], softmax64(np.array([3.0, 2.0, 2.0, 2.0])), rtol=1e-14)


def test_top_k_larger_than_defined_vocab_keeps_everything():
    logits = row([0.5, -1.0, 2.0], padding=[7.0])
    full = probabilities(logits, SamplingParams(temperature=1.0), 3)
    for k in (3, 4, 1000):
        np.testing.assert_array_equal(probabilities(logits, SamplingParams(temperature=1.0, top_k=k), 3), full)
    assert full[3] == 0.0


# --- top-p --------------------------------------------------------------------------------------


@pytest.mark.parametrize("top_p, kept", [(0.79, {0, 1}), (0.81, {0, 1, 2}), (0.96, {0, 1, 2, 3})])
def test_top_p_hand_computed(top_p, kept):
    # Ascending: 0.05, 0.15, 0.3, 0.5 -> running sums 0.05, 0.2, 0.5, 1.0; ids whose running sum is
    # < 1 - top_p are cut. None of these top_p values sits on a running sum.
    logits = row(np.log([0.5, 0.3, 0.15, 0.05]).tolist(), padding=[3.0])
    p = probabilities(logits, SamplingParams(temperature=1.0, top_p=top_p), 4)
    assert support(p) == kept
    base = np.array([0.5, 0.3, 0.15, 0.05])
    np.testing.assert_allclose(p[:4], np.where(p[:4] > 0, base / base[sorted(kept)].sum(), 0.0), rtol=1e-6)


@pytest.mark.parametrize(
    "top_p, kept",
    [
        (0.74, {0, 1}),  # 1 - p = 0.26: running sums 0.125, 0.25 are below -> ids 3 and 2 cut
        (0.75, {0, 1, 2}),  # 1 - p = 0.25: 0.25 is not STRICTLY below, so id 2 survives
        (0.875, {0, 1, 2, 3}),  # 1 - p = 0.125: even the first running sum is not below
    ],
)
def test_top_p_boundary_is_strictly_below(top_p, kept):
    # Dyadic values: every running sum and every 1 - top_p here is exact in float64.
    probs = np.array([0.5, 0.25, 0.125, 0.125])
    assert support(top_p_filter(probs, top_p)) == kept


def test_top_p_cuts_the_higher_id_first_among_ties():
    probs = np.array([0.125, 0.125, 0.5, 0.25])
    # Order (prob asc, id desc): id 1, id 0, id 3, id 2 -> running sums 0.125, 0.25, 0.5, 1.0.
    np.testing.assert_array_equal(top_p_filter(probs, 0.8), [1 / 7, 0.0, 4 / 7, 2 / 7])
    # Two equally most-probable ids: the higher one is cut first, the lowest survives alone.
    probs = np.array([0.25, 0.375, 0.375])
    assert support(top_p_filter(probs, 0.5)) == {1, 2}
    assert support(top_p_filter(probs, 0.3)) == {1}


def test_top_p_one_keeps_everything():
    logits = row([0.1, -3.0, 2.0, 0.0, -30.0], padding=[5.0])
    plain = probabilities(logits, SamplingParams(temperature=1.3), 5)
    np.testing.assert_array_equal(probabilities(logits, SamplingParams(temperature=1.3, top_p=1.0), 5), plain)
    assert support(plain) == {0, 1, 2, 3, 4}


def test_top_p_tiny_keeps_the_most_probable_token():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=40).astype(np.float32)
    p = probabilities(logits, SamplingParams(temperature=0.9, top_p=1e-300), 37)
    assert support(p) == {greedy(logits, 37)} and p.sum() == 1.0


def test_top_p_survivor_does_not_depend_on_rounding():
    # Ten 0.1s sum to 0.9999999999999999 in float64, below 1 - 1e-300 == 1.0: without the guard every
    # id would be cut. The lowest of the tied ids survives.
    np.testing.assert_array_equal(top_p_filter(np.full(10, 0.1), 1e-300), np.eye(10)[0])


# --- temperature --------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
def test_temperature_matches_softmax_of_scaled_logits(temperature):
    rng = np.random.default_rng(11)
    logits = (rng.normal(size=64) * 4).astype(np.float32)
    p = probabilities(logits, SamplingParams(temperature=temperature), 60)
    expected = softmax64(logits[:60].astype(np.float64) / temperature)
    np.testing.assert_allclose(p[:60], expected, rtol=1e-12, atol=0)
    assert np.all(p[60:] == 0.0)


def test_temperature_zero_is_greedy_and_draws_nothing():
    logits = row([0.0, 2.0, 5.0, 5.0, 1.0], padding=[9.0])
    params = SamplingParams(temperature=0.0, top_k=3, top_p=0.5)
    rng = make_rng(5)
    state = rng.bit_generator.state
    assert sample(logits, params, rng, 5) == greedy(logits, 5) == 2
    assert rng.bit_generator.state == state
    np.testing.assert_array_equal(probabilities(logits, params, 5), np.eye(6)[2])


def test_tiny_temperature_does_not_overflow():
    logits = row([1.0, 3.0, 2.0])
    np.testing.assert_array_equal(probabilities(logits, SamplingParams(temperature=1e-310), 3), [0.0, 1.0, 0.0])


# --- sample -------------------------------------------------------------------------------------

N_DRAWS = 200_000


def test_sample_frequencies_match_probabilities():
    logits = row([0.3, -0.5, 1.2, 0.0, 0.9, -1.4], padding=[8.0, 8.0])  # padding holds the maximum
    params = SamplingParams(temperature=0.8)
    p = probabilities(logits, params, 6)
    rng = make_rng(1234)
    draws = np.array([sample(logits, params, rng, 6) for _ in range(N_DRAWS)])
    assert chi_square(draws, p) < CHI2_CRITICAL_0001[5]  # 6 categories -> 5 degrees of freedom


def test_sample_same_seed_same_sequence():
    logits = row([0.3, -0.5, 1.2, 0.0, 0.9, -1.4], padding=[8.0, 8.0])
    params = SamplingParams(temperature=1.0, top_k=5, top_p=0.9)

    def draws(seed):
        rng = make_rng(seed)
        return [sample(logits, params, rng, 6) for _ in range(500)]

    assert draws(42) == draws(42)
    assert draws(42) != draws(43)


def test_sample_never_draws_filtered_or_padding_ids():
    logits = row([0.3, -0.5, 1.2, 0.0, 0.9, -1.4], padding=[8.0, 8.0])
    params = SamplingParams(temperature=2.0, top_k=4, top_p=0.8)
    allowed = support(probabilities(logits, params, 6))
    rng = make_rng(9)
    assert {sample(logits, params, rng, 6) for _ in range(5000)} == allowed


def test_sample_is_inverse_cdf_of_one_uniform():
    logits = row([0.3, -0.5, 1.2, 0.0], padding=[8.0])
    params = SamplingParams(temperature=1.0)
    p = probabilities(logits, params, 4)
    a, b = make_rng(77), make_rng(77)
    assert [sample(logits, params, a, 4) for _ in range(200)] == [inverse_cdf(p, b.random()) for _ in range(200)]


def test_sample_real_vocabulary_size():
    vocab_size, defined_vocab = 248_320, 248_077
    logits = np.random.default_rng(0).normal(size=vocab_size).astype(np.float32)
    logits[defined_vocab:] = 100.0
    params = SamplingParams(temperature=0.7, top_k=50, top_p=0.9)
    rng = make_rng(0)
    assert all(sample(logits, params, rng, defined_vocab) < defined_vocab for _ in range(5))
    assert greedy(logits, defined_vocab) == int(np.argmax(logits[:defined_vocab]))


def test_inverse_cdf_walks_ids_in_ascending_order():
    probs = np.array([0.0, 0.5, 0.0, 0.5])  # running sums 0, 0.5, 0.5, 1
    assert [inverse_cdf(probs, u) for u in (0.0, 0.49, 0.5, 0.9999)] == [1, 1, 3, 3]


def test_inverse_cdf_rounding_shortfall_picks_last_positive_id():
    probs = np.append(np.full(10, 0.1), 0.0)  # running total 0.9999999999999999
    assert inverse_cdf(probs, np.nextafter(1.0, 0.0)) == 9


# --- speculative sampling -----------------------------------------------------------------------

N_TRIALS = 60_000


def small_target_and_draft() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2024)
    p = rng.dirichlet(np.full(8, 2.0))
    q = rng.dirichlet(np.full(8, 2.0))
    return p, q


def first_emitted_tokens(n: int, seed: int) -> np.ndarray:
    """Run the whole draft-then-verify procedure n times with one draft; return the first token each time."""
    p, q = small_target_and_draft()
    bonus = np.full(8, 1 / 8)
    rng = make_rng(seed)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        d = inverse_cdf(q, rng.random())
        out[i] = speculative_step(np.stack([p, bonus]), q[None, :], [d], rng)[0]
    return out


def test_speculative_sampling_reproduces_the_target():
    p, q = small_target_and_draft()
    assert np.abs(p - q).sum() / 2 > 0.2  # the draft really is different
    assert chi_square(first_emitted_tokens(N_TRIALS, 5), p) < CHI2_CRITICAL_0001[7]


@pytest.mark.parametrize(
    "name, broken",
    [
        ("accept_draft", lambda p, q, draft, u: True),  # emits the draft distribution q
        ("residual_distribution", lambda p, q: p),  # rejected mass redrawn from p, not max(p - q, 0)
    ],
)
def test_broken_acceptance_fails_the_same_check(monkeypatch, name, broken):
    monkeypatch.setattr(sampling, name, broken)
    p, _ = small_target_and_draft()
    assert chi_square(first_emitted_tokens(N_TRIALS, 5), p) > CHI2_CRITICAL_0001[7]


def test_accept_draft_compares_u_with_the_ratio():
    p, q = np.array([0.2, 0.8]), np.array([0.4, 0.6])
    assert accept_draft(p, q, 0, 0.49) and not accept_draft(p, q, 0, 0.5)  # ratio 0.5
    assert accept_draft(p, q, 1, np.nextafter(1.0, 0.0))  # ratio > 1: always accepted
    with pytest.raises(ValueError, match="draft probability"):
        accept_draft(p, np.array([1.0, 0.0]), 1, 0.1)


def test_residual_distribution():
    p, q = np.array([0.6, 0.4, 0.0]), np.array([0.2, 0.2, 0.6])
    np.testing.assert_allclose(residual_distribution(p, q), [2 / 3, 1 / 3, 0.0])  # max(p - q, 0) = [0.4, 0.2, 0]
    p = np.array([0.25, 0.75])
    np.testing.assert_array_equal(residual_distribution(p, p.copy()), p)


def one_hot(i: int, n: int = 6) -> np.ndarray:
    return np.eye(n)[i]


def test_speculative_step_all_accepted_adds_bonus():
    drafts = [1, 4, 2]
    q_rows = np.stack([one_hot(d) for d in drafts])
    p_rows = np.stack([one_hot(d) for d in drafts] + [one_hot(5)])  # p[d] = q[d] = 1: always accepted
    assert speculative_step(p_rows, q_rows, drafts, make_rng(0)) == [1, 4, 2, 5]


@pytest.mark.parametrize("reject_at", [0, 1, 2])
def test_speculative_step_stops_at_first_rejection(reject_at):
    drafts = [1, 4, 2]
    q_rows = np.stack([one_hot(d) for d in drafts])
    p_rows = np.stack([one_hot(d) for d in drafts] + [one_hot(5)])
    p_rows[reject_at] = one_hot(3)  # p[d] = 0: certain rejection; residual is all on id 3
    assert speculative_step(p_rows, q_rows, drafts, make_rng(0)) == drafts[:reject_at] + [3]


def test_speculative_step_checks_row_counts():
    with pytest.raises(ValueError, match="2 drafts"):
        speculative_step(np.ones((2, 4)) / 4, np.ones((2, 4)) / 4, [0, 1], make_rng(0))


# --- greedy acceptance --------------------------------------------------------------------------


def test_greedy_accept_all_match_adds_bonus():
    assert greedy_accept([5, 6, 7, 8], [5, 6, 7]) == [5, 6, 7, 8]
    assert greedy_accept([9], []) == [9]


@pytest.mark.parametrize("mismatch_at", [0, 1, 2])
def test_greedy_accept_first_mismatch_emits_target(mismatch_at):
    targets = [5, 6, 7, 8]
    drafts = [5, 6, 7]
    drafts[mismatch_at] = 0
    assert greedy_accept(targets, drafts) == targets[: mismatch_at + 1]


def test_greedy_accept_checks_lengths():
    with pytest.raises(ValueError):
        greedy_accept([5, 6], [5, 6])


# --- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"temperature": float("inf")},
        {"temperature": "1"},
        {"top_k": -1},
        {"top_k": 1.5},
        {"top_k": True},
        {"top_p": 0.0},
        {"top_p": -0.1},
        {"top_p": 1.01},
        {"top_p": float("nan")},
        {"seed": -1},
        {"seed": 1.0},
    ],
)
def test_invalid_params_raise_input_error(kwargs):
    with pytest.raises(InputError):
        SamplingParams(**kwargs)


def test_valid_params():
    assert SamplingParams() == SamplingParams(temperature=0.0, top_k=0, top_p=1.0, seed=0)
    params = SamplingParams(temperature=1, top_k=np.int64(40), top_p=1, seed=2**40)
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.temperature = 0.5
