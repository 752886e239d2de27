"""experiments/compare_trees.py on CPU: fake trees whose experiments/time_step.py writes fixed timings, so
the alternation, the per-tree means, the ratios to the first tree and a failed run's report are checked
without a GPU."""

import json
from pathlib import Path

import pytest
from experiment_tools import load_experiment

FAKE_TIME_STEP = """
import argparse, json, os
p = argparse.ArgumentParser()
for a in ("--out", "--tag", "--rows", "--context"):
    p.add_argument(a)
a = p.parse_args()
scale = float(open(os.path.join(os.path.dirname(__file__), "scale")).read())
if scale < 0:
    raise SystemExit("broken tree")
rep = int(a.tag.rsplit("_r", 1)[1])
passes = [{"rows": int(m), "graph_ms": scale * int(m) + rep, "megakernel_ms": 2 * scale * int(m) + rep}
          for m in a.rows.split(",")]
record = {"device": "fake", "git_commit": os.environ.get("GIT_COMMIT", "unknown"), "model": "m", "passes": passes}
json.dump(record, open(os.path.join(a.out, f"time_step_{a.tag}.json"), "w"))
"""


def load():
    return load_experiment("compare_trees")


def fake_tree(root: Path, name: str, scale: float) -> Path:
    (root / name / "experiments").mkdir(parents=True)
    (root / name / "experiments" / "time_step.py").write_text(FAKE_TIME_STEP)
    (root / name / "experiments" / "scale").write_text(str(scale))
    return root / name


def test_trees_alternate_and_are_summarised_against_the_first(tmp_path):
    compare = load()
    base, lever = fake_tree(tmp_path, "a", 10.0), fake_tree(tmp_path, "b", 9.0)
    out = tmp_path / "out"
    compare.main(["--out", str(out), "--tree", f"base={base}@abc", "--tree", f"lever={lever}", "--reps", "2",
                  "--rows", "1,8"])
    assert [(t.name, r) for t, r in compare.run_order([compare.Tree("x", "."), compare.Tree("y", ".")], 2)] == \
        [("x", 1), ("y", 1), ("x", 2), ("y", 2)]
    result = json.loads((out / "compare_trees.json").read_text())
    means = {(m["tree"], m["rows"]): m for m in result["means"]}
    assert means[("base", 1)]["graph_ms"] == pytest.approx(11.5)  # 10 + mean(rep 1, rep 2)
    assert means[("lever", 8)]["megakernel_ms"] == pytest.approx(145.5)
    assert means[("lever", 8)]["graph_vs_first"] == pytest.approx(round(73.5 / 81.5, 4))
    assert means[("base", 8)]["graph_vs_first"] == 1.0 and means[("base", 1)]["runs"] == 2
    assert result["git_commit"] == {"base": ["abc"], "lever": ["unknown"]} and result["failed"] == []
    assert sorted(p.name for p in out.glob("time_step_*.json")) == \
        ["time_step_base_r1.json", "time_step_base_r2.json", "time_step_lever_r1.json", "time_step_lever_r2.json"]


def test_a_failed_run_is_named_and_the_others_still_summarised(tmp_path):
    compare = load()
    base, broken = fake_tree(tmp_path, "a", 10.0), fake_tree(tmp_path, "b", -1.0)
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match="broken_r1"):
        compare.main(["--out", str(out), "--tree", f"base={base}", "--tree", f"broken={broken}", "--reps", "1",
                      "--rows", "1"])
    result = json.loads((out / "compare_trees.json").read_text())
    assert result["failed"] == ["broken_r1"] and [m["tree"] for m in result["means"]] == ["base"]


@pytest.mark.parametrize("spec", ["nopath", "=path", "name=", "name=/no/such/tree"])
def test_a_malformed_tree_is_refused(spec):
    compare = load()
    with pytest.raises(SystemExit):
        compare.main(["--out", "/tmp/unused", "--tree", spec])
