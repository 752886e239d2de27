"""ms per token against context for each backend of a `megakernel bench` run over several contexts, with
the floor drawn on it (the step's bytes: weights, the KV cache read up to the context, the GDN state, over
the read bandwidth measured in the same process). Reads the bench's JSON only (CPU):

  python -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,4096,16384,32768,131072 \\
      --rounds 3 --out ab_bench.json
  python experiments/context_sweep.py experiments/results/ab_bench.json [--out context_sweep.png]
"""

from __future__ import annotations

import argparse
import json
import os


def series(result: dict) -> tuple[dict[str, list[tuple[int, float]]], list[tuple[int, float]]]:
    """Per backend the (context, median ms per token) points, and the floor's (context, ms): the bench
    records each step's fraction of the floor, so floor = fraction x ms (one value per context)."""
    lines: dict[str, list[tuple[int, float]]] = {}
    floor: dict[int, float] = {}
    for step in result["steps"]:
        if step.get("rows", 1) != 1:
            continue
        lines.setdefault(step["backend"], []).append((step["context"], step["ms_per_token"]))
        floor[step["context"]] = step["floor_fraction"] * step["ms_per_token"]
    return {b: sorted(p) for b, p in lines.items()}, sorted(floor.items())


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines, floor = series(result)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for backend, points in lines.items():
        ax.plot(*zip(*points, strict=True), marker="o", label=backend)
    ax.plot(*zip(*floor, strict=True), linestyle="--", color="black", label="floor (bytes / read bandwidth)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("ms per token")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{result['model']} on {result['device']} at {result['git_commit'][:7]}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench_json")
    parser.add_argument("--out", help="the plot (default: context_sweep.png beside the JSON)")
    args = parser.parse_args()
    with open(args.bench_json) as f:
        result = json.load(f)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.bench_json)), "context_sweep.png")
    plot(result, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
