"""The exact reference (Mode.EXACT: float64, weights dequantised exactly, nothing rounded) and the checker's
exact verdict: the engine passes it on amax-scale goldens, where the calibrated verdict fails it, and every
negative control still fails."""

import os

import numpy as np
import pytest

from megakernel.model import fp8
from megakernel.measurement.checker import NEGATIVE_CONTROLS, Goldens, check, check_exact, observe
from megakernel.reference import Mode, ReferenceModel, ops
from megakernel.reference.numerics import REAL, arithmetic, bf16
from megakernel.model.tensors import scale_name

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
PROMPTS = (0, 1)  # a subset of the goldens' six prompts: the verdict's bounds are taken over the same subset


def on_bf16_grid(x: np.ndarray) -> bool:
    x = np.asarray(x, np.float64)
    return bool(np.array_equal(x, bf16(x.astype(np.float32)).astype(np.float64)))


def test_exact_arithmetic_is_float64_inside_and_float32_outside(micro_weights):
    model = ReferenceModel(micro_weights, Mode.EXACT)
    session = model.new_session(8)
    out = model.forward(session, [5, 1707, 9])
    assert out.logits.dtype == np.float64 and out.hidden.dtype == np.float64
    assert session.ssm[0].dtype == np.float64 and session.kv[3].keys.dtype == np.float64
    assert not on_bf16_grid(out.hidden) and not on_bf16_grid(session.kv[3].keys[:3])  # nothing was rounded
    assert REAL.dtype == np.float32 and bf16(np.float32(1 / 3)) != np.float32(1 / 3)  # outside: as before
    with arithmetic(Mode.EXACT):
        assert REAL.dtype == np.float64 and bf16(np.float32(1 / 3)) == np.float32(1 / 3)
    oracle_model = ReferenceModel(micro_weights, Mode.ORACLE)
    oracle = oracle_model.forward(oracle_model.new_session(8), [5, 1707, 9])
    assert oracle.logits.dtype == np.float32 and on_bf16_grid(oracle.hidden)


def test_exact_linear_is_the_exact_product_and_the_engine_is_closer_to_it_than_the_oracle(micro_weights):
    name = "model.language_model.layers.0.mlp.down_proj.weight"
    w, s = micro_weights[name], micro_weights[scale_name(name)]
    rng = np.random.default_rng(3)
    x = bf16(rng.standard_normal((4, w.shape[1])).astype(np.float32))
    truth = x.astype(np.float64) @ fp8.dequantize(w, s).astype(np.float64).T
    exact = ops.Linear(w, s, Mode.EXACT)
    with arithmetic(Mode.EXACT):
        assert np.array_equal(exact.accumulate(x), truth)
    distance = {mode: np.linalg.norm(ops.Linear(w, s, mode).accumulate(x) - truth) / np.linalg.norm(truth)
                for mode in (Mode.ENGINE, Mode.ORACLE)}
    # the engine scales exact fp32 partials; the oracle rounds fp8 x scale to bf16 first (~2^-9 each)
    assert distance[Mode.ENGINE] < 1e-6 < 1e-4 < distance[Mode.ORACLE], distance


@pytest.fixture(scope="module")
def amax():
    g = Goldens(os.path.join(FIXTURES, "oracle_tiny.npz"))
    assert not g.pow2_scales
    return g


@pytest.fixture(scope="module")
def exact_runs(amax, tiny_weights):
    model = ReferenceModel(tiny_weights, Mode.EXACT)
    return {n: observe(model, amax.prompts[n]) for n in PROMPTS}


def test_engine_fails_the_calibrated_verdict_and_passes_the_exact_one(amax, tiny_weights, exact_runs):
    model = ReferenceModel(tiny_weights, Mode.ENGINE)
    runs = {n: observe(model, amax.prompts[n]) for n in PROMPTS}
    assert not check(amax, runs).passed  # a different rounding point than the oracle's (D7)
    report = check_exact(amax, runs, exact_runs)
    assert report.passed, report.table()
    # not vacuous: the engine is closer to exact than the HF oracle on the logits
    assert report.candidate["logit_error_p95"] < report.oracle["logit_error_p95"]


def test_the_oracles_own_rounding_points_pass_the_exact_verdict(amax, tiny_weights, exact_runs):
    model = ReferenceModel(tiny_weights, Mode.ORACLE)
    report = check_exact(amax, {n: observe(model, amax.prompts[n]) for n in PROMPTS}, exact_runs)
    assert report.passed, report.table()


@pytest.mark.parametrize("control", sorted(NEGATIVE_CONTROLS))
def test_negative_controls_fail_the_exact_verdict(amax, tiny_weights, exact_runs, control):
    model = ReferenceModel(tiny_weights, Mode.ORACLE)
    with NEGATIVE_CONTROLS[control](model):
        runs = {n: observe(model, amax.prompts[n]) for n in PROMPTS}
    report = check_exact(amax, runs, exact_runs)
    failed = {c["name"] for c in report.checks if not c["passed"]}
    assert {"logit_error_mean", "ssm_state_rel_error"} <= failed, report.table()


def test_the_27b_path_a_layer_at_a_time_equals_the_whole_model_bit_for_bit():
    """exact_distance.py's --layer-at-a-time (each layer's weights synthesised, run by the three modes and
    dropped: how the 27B's three-way fits a host) gives every mode's residual rows after each layer and its
    logits exactly as the whole model does, and so the same figures."""
    from checkpoint_tools import micro_config
    from experiment_tools import load_experiment
    from megakernel.model.synthetic import synthetic_weights

    ed = load_experiment("exact_distance")
    c, prompts = micro_config(), [[5, 1707, 9, 77], [12, 3]]
    whole, whole_projections = ed.trajectories(synthetic_weights(c, seed=2, pow2_scales=False), prompts)
    streamed, streamed_projections = ed.streamed_trajectories(c, 2, False, prompts, workers=2)
    for mode in ed.MODES:
        for (logits, layers), (s_logits, s_layers) in zip(whole[mode], streamed[mode]):
            assert logits.dtype == s_logits.dtype and np.array_equal(logits, s_logits), mode
            assert len(layers) == len(s_layers) == c.num_hidden_layers
            assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(layers, s_layers)), mode
    assert whole_projections == streamed_projections and len(whole_projections) == 15
    assert ed.score(c, whole, whole_projections, None) == ed.score(c, streamed, streamed_projections, None)
