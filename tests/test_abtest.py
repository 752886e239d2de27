"""The A/B experiment's bookkeeping (megakernel/measurement/abtest.py) with backends and a timer made here: the
interleaving order, the statistics in the results contract's layout, the plot, and the command's refusal
without a GPU."""

import pytest

from megakernel.measurement import abtest


def fake(ms_by_backend):
    """Backends that record their calls, and a timer that returns each backend's set time (+ the call's
    position within its round, so that medians and spreads are known)."""
    calls = []
    backends = {name: (lambda name=name: calls.append(name)) for name in ms_by_backend}
    at = {"context": None}

    def start_at(context):
        at["context"] = context
        calls.append(("start", context))

    def timer(step):
        step()
        name = calls[-1]
        return ms_by_backend[name] * (1 + at["context"] / 1e4)

    return backends, start_at, timer, calls


def test_backends_interleave_round_by_round_with_rotating_order():
    backends, start_at, timer, calls = fake({"megakernel": 1.0, "graph": 1.1, "eager": 1.5})
    samples = abtest.interleave(backends, [1024], tokens=2, rounds=3, start_at=start_at, timer=timer)
    assert len(samples) == 3 * 3 * 2
    firsts = [calls[i + 1] for i, c in enumerate(calls) if c == ("start", 1024)][::3]
    assert firsts == ["megakernel", "graph", "eager"]  # each round starts with the next backend
    assert [s.round for s in samples[:6]] == [0] * 6 and samples[-1].round == 2


def test_each_context_reports_its_samples_when_its_rounds_are_done():
    """The bench writes its results after each context (a run stopped at a time limit keeps what it finished)."""
    backends, start_at, timer, _ = fake({"megakernel": 1.0, "graph": 1.1})
    seen = []
    samples = abtest.interleave(backends, [4096, 1024], tokens=2, rounds=3, start_at=start_at, timer=timer,
                                context_done=seen.append)
    assert [len(s) for s in seen] == [12, 24] and seen[-1] == samples
    assert {s.context for s in seen[0]} == {4096}
    assert abtest.summarize(seen[0], {4096: 0.5, 1024: 0.4})["ratio_megakernel_over_graph"].keys() == {"4096"}


def test_summary_has_the_contract_fields_and_the_ratio_per_round():
    backends, start_at, timer, _ = fake({"megakernel": 0.95, "graph": 1.0})
    samples = abtest.interleave(backends, [1000, 2000], tokens=4, rounds=5, start_at=start_at, timer=timer)
    out = abtest.summarize(samples, floor_ms={1000: 0.5, 2000: 0.6})
    steps = {(s["backend"], s["context"]): s for s in out["steps"]}
    assert set(steps) == {(b, c) for b in ("megakernel", "graph") for c in (1000, 2000)}
    g = steps["graph", 1000]
    assert g["ms_per_token"] == pytest.approx(1.1) and g["p10"] <= g["ms_per_token"] <= g["p90"]
    assert g["floor_fraction"] == pytest.approx(0.5 / 1.1) and g["rows"] == 1
    assert out["ratio_megakernel_over_graph"]["2000"]["median"] == pytest.approx(0.95)


def test_no_ratio_without_both_backends():
    backends, start_at, timer, _ = fake({"graph": 1.0, "eager": 1.2})
    samples = abtest.interleave(backends, [10], tokens=1, rounds=1, start_at=start_at, timer=timer)
    assert abtest.summarize(samples, {10: 1.0})["ratio_megakernel_over_graph"] == {}


def test_plot_is_written(tmp_path):
    backends, start_at, timer, _ = fake({"megakernel": 0.9, "graph": 1.0})
    samples = abtest.interleave(backends, [1, 2], tokens=3, rounds=2, start_at=start_at, timer=timer)
    abtest.plot(samples, str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"



def test_context_sweep_reads_back_each_backends_line_and_the_floor(tmp_path):
    """experiments/context_sweep.py: the floor it draws is the one the bench summarised (fraction x ms)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "context_sweep.py"
    spec = importlib.util.spec_from_file_location("context_sweep", path)
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    backends, start_at, timer, _ = fake({"megakernel": 0.95, "graph": 1.0})
    samples = abtest.interleave(backends, [4096, 1024], tokens=2, rounds=2, start_at=start_at, timer=timer)
    result = {**abtest.summarize(samples, floor_ms={1024: 0.5, 4096: 0.7}), "model": "m", "device": "d",
              "git_commit": "0" * 40}
    lines, floor = sweep.series(result)
    assert floor == [(1024, pytest.approx(0.5)), (4096, pytest.approx(0.7))]
    assert [c for c, _ in lines["graph"]] == [1024, 4096]
    assert lines["graph"][1][1] == pytest.approx(1.0 * (1 + 4096 / 1e4))
    sweep.plot(result, str(tmp_path / "s.png"))
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
