"""Where a time to first token goes outside the prompt chunks' graphs (issue 21, D74): one backend (graph build,
27B synthetic by default), a prompt through the prompt program with the device synchronised after each step, each
step's wall time: the session reset, each chunk (tokens written, graph launched), the last token's one-row pass
and its logits on the host, the greedy choice. The steps' sum is comparable with `bench --ttft` (it adds the
synchronisations' own few microseconds).

  python experiments/ttft_breakdown.py [--model M] [--tokens 4096] [--chunk 2048] [--repeats 3] [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def breakdown(backend, prompt: list[int]) -> dict:
    """One prompt's steps (ms), each ended by a device synchronisation."""
    import cupy

    from megakernel.generation.passes import prompt_path_chunks
    from megakernel.model.sampling import greedy

    sync = cupy.cuda.Device().synchronize
    steps, t = {}, time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        sync()
        now = time.perf_counter()
        steps[name] = round((now - t) * 1e3, 3)
        t = now

    sync()
    t = time.perf_counter()
    backend.reset()
    lap("reset")
    chunks, last = prompt_path_chunks(prompt, backend.prompt_chunk)
    for i, chunk in enumerate(chunks):
        backend._run_prompt(backend._prompt_runner(), chunk)
        lap(f"chunk {i} ({len(chunk)} rows)")
    logits = backend.run_rows([last])
    lap("last token's pass and logits")
    greedy(logits, backend.defined_vocab)
    lap("greedy")
    return steps


def main(argv=None) -> int:
    from discrete.backend import DiscreteBackend

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="synthetic:qwen3.5-27b")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    backend = DiscreteBackend(args.model, args.tokens + 16, "graph", prompt_path="program", prompt_chunk=args.chunk)
    prompt = np.random.default_rng(0).integers(0, backend.defined_vocab, args.tokens).tolist()
    backend.prepare(args.tokens)
    backend.start(prompt[:128])  # warm: module loads, first replays
    runs = []
    for _ in range(args.repeats):
        runs.append(breakdown(backend, prompt))
        print(runs[-1], f"sum {sum(runs[-1].values()):.1f} ms", flush=True)
    if args.out:
        import datetime

        import cupy

        from megakernel.provenance import git_commit

        out = {"device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
               "git_commit": git_commit(), "command": "python experiments/ttft_breakdown.py " + " ".join(sys.argv[1:]),
               "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": args.model,
               "tokens": args.tokens, "chunk": args.chunk, "runs": runs}
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
