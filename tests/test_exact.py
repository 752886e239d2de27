"""The exact reference (Mode.EXACT: float64, weights dequantised exactly, nothing rounded) and the checker's
exact verdict: the engine passes it on amax-scale goldens, where the calibrated verdict fails it, and every
negative control still fails."""

import os

import numpy as np
import pytest

from megakernel.model import fp8, plan
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


def relative(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("name", ["model.language_model.layers.0.mlp.down_proj.weight",  # fp8, four k-slices
                                  "model.language_model.layers.0.linear_attn.in_proj_b.weight"])  # bf16
def test_rows_at_once_multiplies_as_each_mode_does_in_another_sum_order(micro_weights, name):
    """exact_distance.py's RowsAtOnce (the 27B three-way's linears, all rows in one BLAS product) computes each
    mode's products of ops.Linear and moves only the order of their sums: float64's last bits in EXACT,
    float32's in ENGINE and ORACLE, far below what separates the engine's arithmetic from the oracle's."""
    from experiment_tools import load_experiment

    ed = load_experiment("exact_distance")
    w = micro_weights[name]
    s = micro_weights[scale_name(name)] if scale_name(name) in micro_weights else None
    x = bf16(np.random.default_rng(5).standard_normal((5, w.shape[1])).astype(np.float32))
    by_row, at_once = {}, {}
    for mode in ed.MODES:
        linear = ops.Linear(w, s, mode, plan.slices_by_weight(micro_weights.config)[name])
        wrapped = ed.RowsAtOnce(linear, mode)
        with arithmetic(mode):
            by_row[mode], at_once[mode] = linear.accumulate(x), wrapped.accumulate(x)
            assert np.array_equal(wrapped(x), bf16(at_once[mode]))
        assert at_once[mode].dtype == by_row[mode].dtype and at_once[mode].shape == by_row[mode].shape
        assert relative(at_once[mode], by_row[mode]) < (1e-14 if mode == Mode.EXACT else 1e-6), mode
    if s is not None:  # the engine's products, not the oracle's: closer to the row path than the oracle is
        moved = relative(at_once[Mode.ENGINE], by_row[Mode.ENGINE])
        assert moved * 100 < relative(by_row[Mode.ORACLE], by_row[Mode.ENGINE]), moved


def test_rows_at_once_moves_the_three_way_by_less_than_it_separates_the_modes():
    """The layer-at-a-time three-way with RowsAtOnce (--rows-at-once: the 27B's) against the bit-exact one on the
    micro config: the same per-projection figures (those keep ops.Linear's own products), the exact run's rows
    after each layer within float64 noise of the bit-exact run's, and the candidates' per-layer distances within
    10 % of the bit-exact run's (their rows move where a float32 sum's last bit flips a bf16 rounding; 3.4 % at
    most here when written)."""
    from checkpoint_tools import micro_config
    from experiment_tools import load_experiment

    ed = load_experiment("exact_distance")
    c, prompts = micro_config(), [[5, 1707, 9, 77], [12, 3]]
    exact_path, exact_projections = ed.streamed_trajectories(c, 2, False, prompts, workers=2)
    at_once, at_once_projections = ed.streamed_trajectories(c, 2, False, prompts, workers=2, at_once=True)
    assert at_once_projections.keys() == exact_projections.keys()  # the inputs are the exact run's: float64 noise
    assert all(at_once_projections[k] == pytest.approx(v, rel=1e-12) for k, v in exact_projections.items())
    for (_, layers), (_, o_layers) in zip(exact_path[Mode.EXACT], at_once[Mode.EXACT]):
        assert max(relative(b, a) for a, b in zip(layers, o_layers)) < 1e-12
    a, b = (ed.score(c, runs, exact_projections, None) for runs in (exact_path, at_once))
    for mode in ("engine", "oracle"):
        per_layer, o_per_layer = np.array(a["per_layer_rel_rms"][mode]), np.array(b["per_layer_rel_rms"][mode])
        assert np.all(per_layer > 1e-3) and np.all(np.abs(o_per_layer / per_layer - 1) < 0.1), (per_layer, o_per_layer)
