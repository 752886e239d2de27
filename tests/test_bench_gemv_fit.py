"""experiments/bench_gemv.py's fits on CPU: a line through known times gives back its stream rate and
fixed cost, and the five-shape fit keeps the keys the results contract names."""

import pytest
from experiment_tools import load_experiment


@pytest.fixture(scope="module")
def bench_gemv():
    return load_experiment("bench_gemv")


def test_line_fit_recovers_the_stream_rate_and_the_fixed_cost(bench_gemv):
    bandwidth = 4500.0  # GB/s
    points = [(b, 4.1 + b / (0.93 * bandwidth * 1e3)) for b in (21e6, 42e6, 84e6, 168e6, 336e6)]
    fit = bench_gemv.line_fit(points, bandwidth)
    assert fit["stream_fraction"] == pytest.approx(0.93, abs=1e-4)
    assert fit["fixed_us"] == pytest.approx(4.1, abs=0.01)
    assert fit["points"] == 5
    assert bench_gemv.line_fit(points[:1], bandwidth) == {}


def test_stream_fit_takes_the_one_row_fp8_shapes_only(bench_gemv):
    bandwidth = 4500.0
    kernels = [{"dtype": "fp8", "rows": 1, "bytes": b, "us": 2.0 + b / (0.8 * bandwidth * 1e3)} for b in (3e7, 9e7, 18e7)]
    kernels += [{"dtype": "fp8", "rows": 8, "bytes": 9e7, "us": 1e3}, {"dtype": "bf16", "rows": 1, "bytes": 9e7, "us": 1e3}]
    fit = bench_gemv.stream_fit(kernels, bandwidth)
    assert set(fit) == {"stream_fraction", "fixed_us", "shapes"}
    assert fit["stream_fraction"] == pytest.approx(0.8, abs=1e-4) and fit["shapes"] == 3
