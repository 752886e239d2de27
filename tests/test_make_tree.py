"""experiments/make_tree.py on CPU, in a throwaway git repository: a commit unpacked with its patches
applied and recorded, a patch that does not apply refused in one line with nothing left behind, and
compare_trees.py taking the tree's commit and patches from TREE.json."""

import json
import subprocess
from pathlib import Path

import pytest
from experiment_tools import load_experiment


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "experiments" / "results").mkdir(parents=True)
    (root / "src" / "kernel.cuh").write_text("int depth = 2;\nint rows = 8;\n")
    (root / "experiments" / "results" / "big.json").write_text("{}")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return root


def write_patch(path: Path, old: str, new: str) -> Path:
    path.write_text(f"--- a/src/kernel.cuh\n+++ b/src/kernel.cuh\n@@ -1,2 +1,2 @@\n-{old}\n+{new}\n int rows = 8;\n")
    return path


def test_a_commit_with_its_patches_becomes_a_recorded_tree(repo, tmp_path):
    make = load_experiment("make_tree")
    patch = write_patch(tmp_path / "deeper.patch", "int depth = 2;", "int depth = 4;")
    out = tmp_path / "trees" / "deeper"
    record = make.make_tree(str(out), "HEAD", (str(patch),), repo=str(repo))
    assert (out / "src" / "kernel.cuh").read_text() == "int depth = 4;\nint rows = 8;\n"
    assert not (out / "experiments" / "results").exists()  # results stay behind: trees travel to the device
    assert record["commit"] == git(repo, "rev-parse", "HEAD") == json.loads((out / "TREE.json").read_text())["commit"]
    assert [p["name"] for p in record["patches"]] == ["deeper.patch"] and len(record["patches"][0]["sha256"]) == 64


def test_a_patch_that_does_not_apply_is_refused_and_leaves_no_tree(repo, tmp_path, capsys):
    make = load_experiment("make_tree")
    stale = write_patch(tmp_path / "stale.patch", "int depth = 3;", "int depth = 4;")
    out = tmp_path / "trees" / "stale"
    with pytest.raises(ValueError, match="stale.patch does not apply"):
        make.make_tree(str(out), "HEAD", (str(stale),), repo=str(repo))
    assert not out.exists()
    (tmp_path / "trees" / "full").mkdir()
    (tmp_path / "trees" / "full" / "x").write_text("")
    with pytest.raises(SystemExit, match="not empty"):
        make.main([str(tmp_path / "trees" / "full")])
    with pytest.raises(ValueError, match="no commit"):
        make.make_tree(str(tmp_path / "trees" / "nowhere"), "no-such-rev", repo=str(repo))


def test_compare_trees_takes_the_commit_and_patches_from_tree_json(tmp_path):
    compare = load_experiment("compare_trees")
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "TREE.json").write_text(json.dumps({"commit": "abc123", "patches": [{"name": "p.patch", "sha256": "0"}]}))
    assert compare.described(compare.Tree("t", str(tree))).commit == "abc123"
    assert compare.described(compare.Tree("t", str(tree), "given")).commit == "given"
    assert compare.described(compare.Tree("u", str(tmp_path / "none"))).commit == ""
    assert compare.tree_record(str(tree))["patches"][0]["name"] == "p.patch"
