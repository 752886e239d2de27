"""Bar chart of one word's device time per tree from time_words JSON files (experiments/time_words.py),
one bar group per file, M = 1 and M = 8 side by side.

  python experiments/words_plot.py --word gdn_core --out PNG FILE [FILE ...] [--labels a,b,...]
"""

from __future__ import annotations

import argparse
import json

from time_words import word_times


def word_us(path: str, word: str) -> dict[int, float]:
    """rows -> the word's mean us over the file's layers."""
    with open(path) as f:
        passes = json.load(f)["passes"]
    times = {p["rows"]: word_times(p["kernels"], word) for p in passes}
    return {rows: sum(us) / len(us) for rows, us in times.items() if us}


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--word", required=True)
    parser.add_argument("--labels", default=None, help="comma-separated, one per file (default: each file's tag)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    labels = args.labels.split(",") if args.labels else [json.load(open(f))["tag"] for f in args.files]
    if len(labels) != len(args.files):
        parser.error(f"{len(labels)} labels for {len(args.files)} files")
    times = [word_us(f, args.word) for f in args.files]
    rows = sorted({r for t in times for r in t})
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(args.files), 3.6))
    width = 0.8 / len(rows)
    for i, r in enumerate(rows):
        xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(times))]
        ys = [t.get(r, 0.0) for t in times]
        bars = ax.bar(xs, ys, width, label=f"M = {r}")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{args.word}, us a word")
    ax.set_title(args.title or f"{args.word} per tree (time_words)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
