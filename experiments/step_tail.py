"""Which GEMV tiles end a word late, and whether it is the same tiles in every layer: reads the per-tile
stamps `tile_phases.py --step --raw` keeps (step_stamps_mM.npz) and, for each kind of GEMV word (the name
after the layer, e.g. gate_up), averages over its layers each tile's passes time relative to its word's
median and its end relative to the word's median end. A pattern that repeats from layer to layer (a
high correlation between the even and the odd layers' profiles) is the tiling's, not the memory system's
noise. Writes step_tail.json; CPU only.

  python experiments/step_tail.py STAMPS.npz [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

PASSES, PASSES_DONE, START_NS, END_NS, SM = 1, 3, 6, 7, 5  # gemv_tile.cuh tile_stamp slots


def kind_of(name: str) -> str:
    """The word's name after its layer: "L3.gate_up" -> "gate_up"; "head" stays (graph_trace_report too)."""
    return name.split(".", 1)[1] if "." in name else name


def profiles(stamps: np.ndarray, names, tiles) -> dict:
    """Per kind: the mean over its words of each tile's passes / the word's median passes, and of each
    tile's end minus the word's median end (us); the even and odd words' passes profiles correlated."""
    kinds: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        kinds.setdefault(kind_of(str(name)), []).append(j)
    out = {}
    for kind, words in kinds.items():
        t = int(tiles[words[0]])
        if any(int(tiles[j]) != t for j in words):
            continue  # words of one kind share their tiling; anything else is not comparable tile by tile
        s = stamps[words, :t].astype(np.int64)
        passes = (s[:, :, PASSES_DONE] - s[:, :, PASSES]).astype(float)
        relative = passes / np.median(passes, axis=1, keepdims=True)
        end = s[:, :, END_NS].astype(float)
        late = (end - np.median(end, axis=1, keepdims=True)) / 1e3
        profile = relative.mean(axis=0)
        row = {"words": len(words), "tiles": t,
               "passes_relative": [round(float(v), 3) for v in profile],
               "end_after_median_us": [round(float(v), 2) for v in late.mean(axis=0)],
               "last_end_after_median_us": round(float(late.max(axis=1).mean()), 2),
               "sm_of_tile": [int(v) for v in s[0, :, SM]]}
        if len(words) >= 4:
            even, odd = relative[0::2].mean(axis=0), relative[1::2].mean(axis=0)
            row["even_odd_correlation"] = round(float(np.corrcoef(even, odd)[0, 1]), 3)
        out[kind] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stamps", help="step_stamps_mM.npz from tile_phases.py --step --raw")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    try:
        data = np.load(args.stamps, allow_pickle=False)
        stamps, names, tiles = data["stamps"], data["names"], data["tiles"]
    except (OSError, KeyError, ValueError) as e:
        raise SystemExit(f"step_tail: {args.stamps} is not a tile_phases --raw archive ({e})")
    if stamps.ndim != 3 or len(names) != stamps.shape[0] or len(tiles) != stamps.shape[0]:
        raise SystemExit(f"step_tail: {args.stamps}: stamps {stamps.shape} do not match {len(names)} words")
    result = {"stamps": os.path.basename(args.stamps), "kinds": profiles(stamps, names, tiles)}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "step_tail.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    for kind, row in result["kinds"].items():
        print(f"{kind:10s} {row['tiles']:4d} tiles  last end +{row['last_end_after_median_us']:5.2f} us  "
              f"passes {min(row['passes_relative']):.3f}-{max(row['passes_relative']):.3f} of the median  "
              f"even/odd r = {row.get('even_odd_correlation', float('nan')):.2f}")


if __name__ == "__main__":
    main()
