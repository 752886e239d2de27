"""Device time of chosen words of the graph build (27B synthetic, weights generated on the GPU) at one
context and M-row pass: the fast loop for one device function, e.g. GDN_CORE or the attention tiles,
compared across source trees run one after another in one device call. Each word is timed alone as
bench_step.per_instruction times it (its launches repeated in a CUDA graph), so a word's inputs and
state sit in L2 after the first repeat: a latency figure, not a streaming one. Writes
time_words[_TAG].json (docs/RESULTS_FILES.md).

  python experiments/time_words.py --out DIR --words gdn_core,attn_scores [--layers 0,3] [--rows 1,8]
      [--context 1024] [--tag NAME]
"""

from __future__ import annotations

import argparse
import json

from bench_step import per_instruction
from time_step import add_tagged_arguments, row_sessions, write_tagged


def chosen_words(program, words: list[str], layers: list[int] | None) -> set[int]:
    """Indices of the words whose name is L<layer>.<one of words> (any layer when layers is None), or one of
    words itself (a word outside the layers: embed, handoff)."""
    out = set()
    for i, name in enumerate(program.meta["instructions"]):
        layer, _, op = name.partition(".")
        if name in words or (op in words and (layers is None or layer in {f"L{n}" for n in layers})):
            out.add(i)
    return out


def word_times(kernels: list[dict], word: str) -> list[float]:
    """The us of every timed kernel named `word` (a name without its layer, or a whole name)."""
    return [k["us"] for k in kernels if k["name"] == word or k["name"].endswith("." + word)]


def main() -> None:
    from discrete.launcher import DiscreteProgram

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tagged_arguments(parser)
    parser.add_argument("--words", required=True, help="comma-separated word names without the layer, e.g. gdn_core")
    parser.add_argument("--layers", default=None, help="comma-separated layer numbers (default: every layer)")
    args = parser.parse_args()
    words = args.words.split(",")
    layers = [int(n) for n in args.layers.split(",")] if args.layers else None
    passes = []
    for m, program, weights, session in row_sessions(args):
        runner = DiscreteProgram(program, weights, session)
        kernels = per_instruction(runner, program, args.context, only=chosen_words(program, words, layers))
        passes.append({"rows": m, "kernels": kernels})
        for w in words:
            us = word_times(kernels, w)
            if us:
                print(json.dumps({"tag": args.tag, "rows": m, "word": w, "words": len(us),
                                  "mean_us": round(sum(us) / len(us), 2)}), flush=True)
        runner = session = None
    write_tagged(args, "time_words", passes)


if __name__ == "__main__":
    main()
