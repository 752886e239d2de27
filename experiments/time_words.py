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

from bench_step import TOKEN, per_instruction
from time_step import write_tagged


def chosen_words(program, words: list[str], layers: list[int] | None) -> set[int]:
    """Indices of the words whose name is L<layer>.<one of words> (any layer when layers is None), or one of
    words itself (a word outside the layers: embed, handoff)."""
    out = set()
    for i, name in enumerate(program.meta["instructions"]):
        layer, _, op = name.partition(".")
        if name in words or (op in words and (layers is None or layer in {f"L{n}" for n in layers})):
            out.add(i)
    return out


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.launcher import DiscreteProgram
    from megakernel.runtime.device import DeviceSession
    from megakernel.model.models import model_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--words", required=True, help="comma-separated word names without the layer, e.g. gdn_core")
    parser.add_argument("--layers", default=None, help="comma-separated layer numbers (default: every layer)")
    parser.add_argument("--rows", default="1,8")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--tag", default="", help="a name for this tree in the output file's name and record")
    args = parser.parse_args()
    words = args.words.split(",")
    layers = [int(n) for n in args.layers.split(",")] if args.layers else None
    config = model_config(args.model)
    weights, passes = None, []
    for m in (int(r) for r in args.rows.split(",")):
        program = lower(config, rows=m, sms=132, capacity=args.context + 64)
        if weights is None:
            weights = device_weights(program, args.model, progress=False)
        session = DeviceSession(program)
        runner = DiscreteProgram(program, weights, session)
        session.set_tokens([TOKEN] * m, config.vocab_size)
        kernels = per_instruction(runner, program, args.context, only=chosen_words(program, words, layers))
        passes.append({"rows": m, "kernels": kernels})
        for w in words:
            us = [k["us"] for k in kernels if k["name"] == w or k["name"].endswith("." + w)]
            if us:
                print(json.dumps({"tag": args.tag, "rows": m, "word": w, "words": len(us),
                                  "mean_us": round(sum(us) / len(us), 2)}), flush=True)
        runner = session = None
        cupy.get_default_memory_pool().free_all_blocks()
    write_tagged(args, "time_words", passes)


if __name__ == "__main__":
    main()
