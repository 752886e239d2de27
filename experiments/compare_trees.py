"""Source trees compared by the whole step in one device call: `time_step.py` run from each tree's own
`experiments/` (its own kernels and Python), the trees alternated and the round repeated, as the device
drifts by a few per cent between runs; then each tree's mean graph and megakernel ms per M and its ratio
to the first tree. Writes every run's time_step_NAME_rN.json and compare_trees.json (docs/RESULTS_FILES.md).

  python experiments/compare_trees.py --out DIR --tree base=. --tree lever=build/v/lever[@COMMIT] \\
      [--reps 2] [--rows 1,8] [--context 1024]

A tree is NAME=PATH, PATH a checkout or an unpacked `git archive` (relative to the current directory);
@COMMIT is the commit it holds, given to its run as GIT_COMMIT (an unpacked archive has no .git). A tree
made by experiments/make_tree.py needs no @COMMIT: its TREE.json gives the commit, and its patches are
named in compare_trees.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from statistics import fmean


@dataclass(frozen=True)
class Tree:
    name: str
    path: str
    commit: str = ""


def parse_tree(spec: str) -> Tree:
    """NAME=PATH[@COMMIT] -> Tree; refuses a spec without a name or a path."""
    name, sep, rest = spec.partition("=")
    path, _, commit = rest.partition("@")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--tree {spec!r}: expected NAME=PATH[@COMMIT]")
    return Tree(name, path, commit)


def tree_record(path: str) -> dict | None:
    """What make_tree.py recorded of the tree at `path` (its commit and patches), if it made it."""
    try:
        with open(os.path.join(path, "TREE.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def described(tree: Tree) -> Tree:
    """The tree with its commit from TREE.json when none was given."""
    record = tree_record(tree.path)
    if tree.commit or not record or not record.get("commit"):
        return tree
    return Tree(tree.name, tree.path, record["commit"])


def run_order(trees: list[Tree], reps: int) -> list[tuple[Tree, int]]:
    """Every tree once a round, in the order given, round after round."""
    return [(tree, rep) for rep in range(1, reps + 1) for tree in trees]


def summarize(runs: dict[str, list[dict]]) -> list[dict]:
    """runs: tree name -> its time_step records (each with `passes`). Per tree and M: the mean graph and
    megakernel ms over its runs, and their ratio to the first tree's means."""
    out, first = [], None
    for name, records in runs.items():
        by_rows: dict[int, list[dict]] = {}
        for record in records:
            for p in record["passes"]:
                by_rows.setdefault(p["rows"], []).append(p)
        means = {m: {"graph_ms": fmean(p["graph_ms"] for p in ps),
                     "megakernel_ms": fmean(p["megakernel_ms"] for p in ps), "runs": len(ps)}
                 for m, ps in sorted(by_rows.items())}
        first = first or means
        for m, v in means.items():
            base = first.get(m)
            out.append({"tree": name, "rows": m, **{k: round(x, 3) for k, x in v.items() if k != "runs"},
                        "runs": v["runs"],
                        "graph_vs_first": round(v["graph_ms"] / base["graph_ms"], 4) if base else None,
                        "megakernel_vs_first": round(v["megakernel_ms"] / base["megakernel_ms"], 4) if base else None})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tree", type=parse_tree, action="append", required=True, help="NAME=PATH[@COMMIT]")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--timeout", type=int, default=120, help="seconds a single run may take")
    args = parser.parse_args(argv)
    names = [t.name for t in args.tree]
    if len(set(names)) != len(names):
        parser.error(f"tree names must differ: {names}")
    for tree in args.tree:
        if not os.path.isfile(os.path.join(tree.path, "experiments", "time_step.py")):
            parser.error(f"--tree {tree.name}={tree.path}: no experiments/time_step.py there")
    args.tree = [described(t) for t in args.tree]
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    runs: dict[str, list[dict]] = {t.name: [] for t in args.tree}
    failed = []
    for tree, rep in run_order(args.tree, args.reps):
        root = os.path.abspath(tree.path)
        tag = f"{tree.name}_r{rep}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root] + os.environ.get("PYTHONPATH", "").split(os.pathsep))}
        if tree.commit:
            env["GIT_COMMIT"] = tree.commit
        command = [sys.executable, "time_step.py", "--out", out, "--tag", tag, "--rows", args.rows,
                   "--context", str(args.context)]
        path = os.path.join(out, f"time_step_{tag}.json")
        try:
            done = subprocess.run(command, cwd=os.path.join(root, "experiments"), env=env, timeout=args.timeout,
                                  capture_output=True, text=True)
            why = f"status {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}"
        except subprocess.TimeoutExpired:
            done, why = None, f"over {args.timeout} s"
        if done is None or done.returncode != 0 or not os.path.exists(path):
            failed.append(tag)
            print(f"{tag}: failed ({why})", flush=True)
            continue
        with open(path) as f:
            runs[tree.name].append(json.load(f))
        print(f"{tag}: " + ", ".join(f"M = {p['rows']} {p['graph_ms']:.3f} / {p['megakernel_ms']:.3f} ms"
                                     for p in runs[tree.name][-1]["passes"]), flush=True)
    table = summarize({name: records for name, records in runs.items() if records})
    for row in table:
        print(f"{row['tree']:>12s} M = {row['rows']}: graph {row['graph_ms']:.3f} ms ({row['graph_vs_first']}x), "
              f"megakernel {row['megakernel_ms']:.3f} ms ({row['megakernel_vs_first']}x), {row['runs']} runs")
    records = [r for rs in runs.values() for r in rs]
    result = {"device": records[0].get("device") if records else None,
              "git_commit": {name: sorted({r.get("git_commit") for r in rs}) for name, rs in runs.items()},
              "command": "python " + " ".join([sys.argv[0]] + (argv if argv is not None else sys.argv[1:])),
              "created": datetime.datetime.now(datetime.UTC).isoformat(),
              "model": records[0].get("model") if records else None, "context": args.context,
              "trees": [{**vars(t), "patches": (tree_record(t.path) or {}).get("patches", [])} for t in args.tree],
              "reps": args.reps, "failed": failed, "means": table}
    with open(os.path.join(out, "compare_trees.json"), "w") as f:
        json.dump(result, f, indent=2)
    if failed:
        sys.exit(f"{len(failed)} run(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
