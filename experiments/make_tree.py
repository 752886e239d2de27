"""A source tree for compare_trees.py: `git archive` of a commit unpacked into a new folder (without
experiments/results), then each patch applied by `patch -p1`, which fails loudly on a hunk it cannot place
(`git apply` run in a folder inside this repository silently skips every path outside that folder: D39).
TREE.json in the folder records the commit and each patch's name and SHA-256, and compare_trees.py reads
it to give the tree's runs their commit and to name the patches in its results.

  python experiments/make_tree.py build/v/NAME [--commit REV] [--patch FILE ...] [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

TREE_FILE = "TREE.json"


def repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_tree(out: str, commit: str = "HEAD", patches: tuple[str, ...] = (), force: bool = False,
              repo: str | None = None) -> dict:
    """Unpacks `commit` of `repo` (this repository by default) into `out` and applies `patches` in order;
    returns what TREE.json records. Raises ValueError, with `out` removed, when anything fails."""
    repo = repo or repo_root()
    if os.path.exists(out) and os.listdir(out):
        if not force:
            raise ValueError(f"{out} exists and is not empty (--force replaces it)")
        shutil.rmtree(out)
    full = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True)
    if full.returncode != 0:
        raise ValueError(f"no commit {commit!r} in {repo}")
    sha = full.stdout.strip()
    for p in patches:
        if not os.path.isfile(p):
            raise ValueError(f"no patch file {p}")
    os.makedirs(out, exist_ok=True)
    try:
        archive = subprocess.run(["git", "-C", repo, "archive", sha], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", out, "--exclude=experiments/results"], input=archive, check=True)
        record = {"commit": sha, "patches": []}
        for p in patches:
            done = subprocess.run(["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-d", out,
                                   "-i", os.path.abspath(p)], capture_output=True, text=True)
            if done.returncode != 0:
                lines = (done.stdout + done.stderr).strip().splitlines()
                raise ValueError(f"{p} does not apply to {sha[:12]}: {lines[-1] if lines else 'patch failed'}")
            with open(p, "rb") as f:
                record["patches"].append({"name": os.path.basename(p), "sha256": hashlib.sha256(f.read()).hexdigest()})
        with open(os.path.join(out, TREE_FILE), "w") as f:
            json.dump(record, f, indent=2)
        return record
    except (ValueError, subprocess.CalledProcessError):
        shutil.rmtree(out, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--patch", action="append", default=[], help="applied in the order given")
    parser.add_argument("--force", action="store_true", help="replace `out` if it exists")
    args = parser.parse_args(argv)
    try:
        record = make_tree(args.out, args.commit, tuple(args.patch), args.force)
    except ValueError as e:
        sys.exit(f"make_tree: {e}")
    names = ", ".join(p["name"] for p in record["patches"]) or "no patch"
    print(f"{args.out}: {record['commit'][:12]} + {names}")


if __name__ == "__main__":
    main()
