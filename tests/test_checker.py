"""The calibrated checker on the committed H200 goldens: the reference passes, the negative controls fail."""

import os

import pytest

from megakernel.measurement.checker import MARGIN, NEGATIVE_CONTROLS, Goldens, check, envelope, observe
from megakernel.model.config import preset
from megakernel.reference import Mode, ReferenceModel
from megakernel.model.synthetic import synthetic_weights

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def goldens(name):
    return Goldens(os.path.join(FIXTURES, f"oracle_{name}.npz"))


@pytest.fixture(scope="module")
def tiny():
    return goldens("tiny")


@pytest.fixture(scope="module")
def oracle_model(tiny_weights):
    return ReferenceModel(tiny_weights, Mode.ORACLE)


def test_goldens_come_from_the_pinned_oracle(tiny):
    meta = tiny.meta
    assert meta["transformers"] == "5.17.0" and meta["device"] == "NVIDIA H200"
    assert meta["model"] == "synthetic:tiny:0" and meta["prompts"] == 6
    assert all(32 <= len(p) <= 256 for p in tiny.prompts)
    assert all(path.startswith("transformers.models.qwen3_5.modeling_qwen3_5.torch_") or "causal_conv1d" in path
               for path in meta["torch_paths"].values())


def test_envelope_is_the_oracles_own_nonzero_disagreement(tiny):
    env = envelope(tiny)
    for key in ("logit_error_max", "logit_error_mean", "full_logit_error", "conv_state_error",
                "ssm_state_rel_error", "kv_cache_error"):
        assert 0 < env[key] < 0.2, key  # two oracle paths differ, but only by rounding
    assert env["top1_agreement_decisive"] == 1.0
    assert 0.9 < env["top1_agreement_raw"] < 1.0


def test_reference_in_oracle_mode_passes(tiny, oracle_model):
    report = check(tiny, {n: observe(oracle_model, ids) for n, ids in enumerate(tiny.prompts)})
    assert report.passed, report.table()


@pytest.mark.parametrize("control", sorted(NEGATIVE_CONTROLS))
def test_negative_controls_are_rejected(tiny, oracle_model, control):
    with NEGATIVE_CONTROLS[control](oracle_model):
        report = check(tiny, {n: observe(oracle_model, tiny.prompts[n]) for n in (0, 1)})
    assert not report.passed
    failed = {c["name"] for c in report.checks if not c["passed"]}
    assert "logit_error_mean" in failed and "ssm_state_rel_error" in failed, report.table()


def test_controls_leave_the_model_untouched(tiny, oracle_model):
    for control in NEGATIVE_CONTROLS.values():
        with control(oracle_model):
            pass
    assert check(tiny, {0: observe(oracle_model, tiny.prompts[0])}).passed


def test_engine_mode_is_within_the_envelope_when_dequantisation_is_exact():
    """With power-of-two scales bf16(fp8 x scale) is exact, so engine and oracle modes compute the same
    sums: the engine passes. (With amax/448 scales it does not: docs/NUMERICS.md.)"""
    g = goldens("tiny_pow2")
    assert g.meta["pow2_scales"] is True
    model = ReferenceModel(synthetic_weights(preset("tiny"), 0, pow2_scales=True), Mode.ENGINE)
    report = check(g, {n: observe(model, g.prompts[n]) for n in (0, 1, 2, 3)})
    assert report.passed, report.table()


def test_27b_goldens_are_complete():
    g = goldens("27b")
    assert g.meta["model"] == "synthetic:qwen3.5-27b:0" and len(g.prompts) == 2
    for n, ids in enumerate(g.prompts):
        top_ids, top_vals = g.decode_top(n)
        assert top_ids.shape == top_vals.shape == (len(ids), 32)
    env = envelope(g)
    assert 0 < env["logit_error_max"] < 1 and env["top1_agreement_decisive"] == 1.0
    assert MARGIN == 2.0  # the margin is part of the calibration recorded in NUMERICS.md
