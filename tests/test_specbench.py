"""The CPU parts of `megakernel bench --spec-k` (megakernel/measurement/specbench.py): the oracle-controlled drafts
and the tokens/s curves derived from pass costs."""

import numpy as np

from megakernel.measurement.specbench import controlled, derived_curves


def test_controlled_drafts_are_right_at_the_asked_rate():
    reference = list(range(100, 400))
    for alpha in (0.0, 1.0):
        control = controlled(reference, alpha, vocab=1000, seed=0)
        got = control(5, [0, 0, 0])
        assert (got == reference[5:8]) == (alpha == 1.0)
        assert all((g == r) == (alpha == 1.0) for g, r in zip(got, reference[5:8], strict=True))
    control = controlled(reference, 0.85, vocab=1000, seed=1)
    right = [g == r for e in range(0, 200, 4) for g, r in zip(control(e, [0] * 4), reference[e:e + 4], strict=True)]
    assert abs(np.mean(right) - 0.85) < 0.06


COSTS = {"target_ms_by_rows": {str(m): 10.0 + m for m in range(1, 9)}, "one_row_with_refold_ms": 11.5,
         "mtp_prefill_ms_by_rows": {str(m): 1.0 for m in range(1, 9)}, "mtp_chained_ms": 0.5}


def test_derived_tokens_per_second_follow_the_expected_tokens_per_pass():
    d = derived_curves(COSTS, ks=[3], alphas=np.array([0.0, 1.0]))
    zero, one = d["tokens_per_s_by_k"]["3"]
    assert zero == round(1e3 * 1 / (14.0 + 0.5 + 1.0 + 2 * 0.5), 2)  # one token per verify pass
    assert one == round(1e3 * 4 / (14.0 + 0.5 + 1.0 + 2 * 0.5), 2)  # k + 1 tokens per verify pass
    assert d["plain_tokens_per_s"] == round(1e3 / 11.0, 2)


def test_derived_curves_with_working_vocabulary_drafts_use_their_costs():
    costs = {**COSTS, "working_vocab": {"mtp_prefill_ms_by_rows": {str(m): 0.5 for m in range(1, 9)},
                                        "mtp_chained_ms": 0.25}}
    full = derived_curves(costs, ks=[3], alphas=np.array([1.0]))["tokens_per_s_by_k"]["3"][0]
    working = derived_curves(costs, ks=[3], alphas=np.array([1.0]), working_vocab=True)["tokens_per_s_by_k"]["3"][0]
    assert full == round(1e3 * 4 / (14.0 + 0.5 + 1.0 + 2 * 0.5), 2)
    assert working == round(1e3 * 4 / (14.0 + 0.5 + 0.5 + 2 * 0.25), 2)
