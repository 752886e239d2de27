"""experiments/graph_trace.py on CPU: each traced launch carries its own slot in its launch program's last
four bytes (the GEMV launches their arrivals too), the device's slots read back in the megakernel trace's
layout, and the per-word and per-opcode summaries of a pass with known times."""

import os

import numpy as np
import pytest
from experiment_tools import load_experiment

from compiler import lower
from isa import GEMV_OPS, Op
from megakernel.model.config import preset
from megakernel.runtime.cuda_build import launch_program_bytes


@pytest.fixture(scope="module")
def graph_trace():
    before = os.environ.get("MEGAKERNEL_GRAPH_TRACE")
    try:
        return load_experiment("graph_trace")
    finally:  # the probe sets it for its own process; not for the tests that follow
        if before is None:
            os.environ.pop("MEGAKERNEL_GRAPH_TRACE", None)
        else:
            os.environ["MEGAKERNEL_GRAPH_TRACE"] = before


@pytest.fixture(scope="module")
def program():
    return lower(preset("tiny"), rows=1, sms=7, capacity=64)


class FakeLaunch:
    def __init__(self, args=None):
        self.args = args

    def with_args(self, args):
        return FakeLaunch(args)


class FakeRunner:
    def __init__(self, program):
        self.program = program
        self.session = type("S", (), {"arena": "arena"})()
        self.weights = type("W", (), {"data": "weights"})()
        self.arrivals = "arrivals"
        self.launches = [(i, FakeLaunch()) for i, w in enumerate(program.words) if w.opcode != Op.NOP]


def test_each_traced_launch_names_its_own_slot(graph_trace, program):
    runner = FakeRunner(program)
    launches = graph_trace.traced_launches(runner, steps=2)
    assert len(launches) == 2 * len(runner.launches)
    words, size = len(program.words), launch_program_bytes()
    for n, launch in enumerate(launches):
        step, j = divmod(n, len(runner.launches))
        i = runner.launches[j][0]
        arena, weights, data, *rest = launch.args
        assert (arena, weights) == ("arena", "weights")
        assert int.from_bytes(data[size - 4:], "little") == step * words + i + 1
        assert rest == (["arrivals"] if program.words[i].opcode in GEMV_OPS else [])


def test_records_come_back_per_step_and_word(graph_trace):
    class Slots:  # the device array's [slots, blocks, 4] with .get(), as CuPy's
        def __init__(self, a):
            self.a = a

        def __getitem__(self, key):
            return Slots(self.a[key])

        def get(self):
            return self.a

    slots = np.arange(10 * 6 * 4, dtype=np.uint64).reshape(10, 6, 4)
    rec = graph_trace.records_of(Slots(slots), steps=2, words=4, blocks=3)
    assert rec.shape == (2, 4, 3, 4)
    assert (rec[1, 2] == slots[1 * 4 + 2, :3]).all()


def test_per_word_and_by_opcode(graph_trace, program):
    words = len(program.words)
    rec = np.zeros((2, words, 2, 4), np.uint64)
    t = 1_000_000
    for step in range(2):  # word i: released 100 ns after the latest end, ends 1,000 ns later
        for i in range(words):
            rec[step, i, 0] = (t, t + 100, t + 1_100, 1)
            t += 1_100
    rows = graph_trace.per_word(program, rec, 1)
    assert [r["index"] for r in rows] == list(range(words))
    assert all(r["added_us"] == pytest.approx(1.1) and r["release_us"] == pytest.approx(0.1) for r in rows)
    table = graph_trace.by_opcode(rows)
    for op, row in table.items():
        n = sum(w.opcode.name == op for w in program.words)
        assert row["words"] == n and row["added_us"] == pytest.approx(1.1 * n, abs=0.1)


def test_the_report_sums_each_kind_of_word(program):
    report = load_experiment("graph_trace_report")
    words = len(program.words)
    rec = np.zeros((words, 3, 4), np.uint64)
    rows = []
    for i, w in enumerate(program.words):
        if w.opcode == Op.NOP:
            continue
        base = 1_000_000 + 10_000 * i
        rec[i, :3] = [(base, base + 100, base + 1_000 + 300 * b, 1) for b in range(3)]  # ends 1.0, 1.3, 1.6 us
        rows.append({"index": i, "name": program.meta["instructions"][i], "added_us": 2.0, "release_us": 0.5,
                     "megakernel_added_us": 3.0})
    out = {r["kind"]: r for r in report.kinds(program, {"words": rows}, rec, gbps=1000.0, context=16)}
    for kind, r in out.items():
        mine = [row for row in rows if report.kind_of(row["name"]) == kind]
        assert r["words"] == len(mine)
        assert (r["added_us_a_word"], r["release_us_a_word"], r["megakernel_added_us_a_word"]) == (2.0, 0.5, 3.0)
        assert r["tail_us_a_word"] == pytest.approx(0.3)  # last end after the median end
        # all ready at 0.1 us, 0.9-1.5 us of work: spread evenly every block would end at 1.3, the last ends at 1.6
        assert r["unbalanced_us_a_word"] == pytest.approx(0.3)
        assert r["block_persistence"] == (None if r["words"] < 2 else pytest.approx(1.0))  # the same slow block
        # blocks 0.3 us before, at and after the median every word: their spread is the std of (-0.3, 0, 0.3)
        assert r["block_spread_us"] == (None if r["words"] < 2 else pytest.approx(0.245, abs=0.006))
        assert r["sm_spread_us"] is None  # no SMs in these records
        assert r["work_us_a_word"] == pytest.approx(1.2)  # ready at 0.1 us, ends at 1.0, 1.3, 1.6: median 1.2
        assert r["megakernel_work_us_a_word"] is None and r["megakernel_tail_us_a_word"] is None  # not traced
    # the megakernel's records beside the graph's: its blocks ready 0.5 us later and 2 us slower from ready to end
    mk = rec.copy()
    mk[..., 1] += np.uint64(500)
    mk[..., 2] += np.uint64(2_500)
    both = report.kinds(program, {"words": rows}, rec, gbps=1000.0, context=16, megakernel=mk)
    for r in both:
        assert r["megakernel_work_us_a_word"] == pytest.approx(3.2) and r["megakernel_tail_us_a_word"] == pytest.approx(0.3)
        # ready 0.5 us later after an end 2.5 us later (the first word's after the same start)
        shift = 0.5 if r["kind"] == both[0]["kind"] else -2.0
        assert r["megakernel_ready_us_a_word"] == pytest.approx(r["ready_us_a_word"] + shift)
    assert report.kind_of("L3.gate_up") == "gate_up" and report.kind_of("head") == "head"


def test_the_report_tells_a_slow_sm_from_a_slow_block(program):
    """Records whose high word holds SM + 1 (D79): the slow SMs are the same every word, the blocks they run
    change, so the slowness follows the SM and not the block; records without SMs give None."""
    report = load_experiment("graph_trace_report")
    words, blocks = len(program.words), 40
    rng = np.random.default_rng(3)
    sm_speed = rng.normal(0, 200, 132)
    rec = np.zeros((words, blocks, 4), np.uint64)
    rows = []
    for i, w in enumerate(program.words):
        if w.opcode == Op.NOP:
            continue
        sms = rng.permutation(132)[:blocks]
        base = 1_000_000 + 100_000 * i
        for b in range(blocks):
            rec[i, b] = (base, base + 100, base + 5_000 + int(sm_speed[sms[b]]), 1 | int(sms[b] + 1) << 32)
        rows.append({"index": i, "name": program.meta["instructions"][i], "added_us": 6.0, "release_us": 0.5})
    out = {r["kind"]: r for r in report.kinds(program, {"words": rows}, rec, gbps=1000.0, context=16)}
    many = [r for r in out.values() if r["words"] >= 4]
    assert many and all(r["sm_persistence"] > 0.9 and abs(r["block_persistence"]) < 0.5 for r in many)
    # the SMs are 0.2 us apart (sm_speed's spread); a block's mean over 6-8 words is of as many random SMs:
    # ~0.2 / sqrt(words)
    assert all(abs(r["sm_spread_us"] - 0.2) < 0.05 and r["block_spread_us"] < 0.6 * r["sm_spread_us"] for r in many)
    rec[..., 3] &= np.uint64(0xFFFFFFFF)  # a trace from before the SMs were recorded
    out = report.kinds(program, {"words": rows}, rec, gbps=1000.0, context=16)
    assert all(r["sm_persistence"] is None for r in out)


def test_block_persistence_tells_placement_from_chance():
    report = load_experiment("graph_trace_report")
    rng = np.random.default_rng(5)
    slow = rng.normal(0, 1, 64)
    same = [1000 + 100 * slow + rng.normal(0, 10, 64) for _ in range(6)]  # the same blocks slow every word
    chance = [1000 + 100 * rng.normal(0, 1, 64) for _ in range(6)]
    assert report.block_persistence(same) > 0.9
    assert abs(report.block_persistence(chance)) < 0.3
    assert report.block_persistence(same[:1]) is None
    idle = [np.where(np.arange(64) < 3, -1, w) for w in same]  # blocks that did not run are left out
    assert report.block_persistence(idle) > 0.9


def test_the_report_refuses_a_missing_or_foreign_trace_in_one_line(tmp_path):
    report = load_experiment("graph_trace_report")
    with pytest.raises(SystemExit, match="not a graph trace with its records beside it"):
        report.load(str(tmp_path / "missing.json"), 1, 1000.0)
    (tmp_path / "graph_trace.json").write_text('{"passes": [{"rows": 1, "words": []}]}')
    with pytest.raises(SystemExit, match="not a graph trace"):  # no records beside it
        report.load(str(tmp_path / "graph_trace.json"), 1, 1000.0)
    with pytest.raises(SystemExit, match="has no pass of 8 rows"):
        report.load(str(tmp_path / "graph_trace.json"), 8, 1000.0)
