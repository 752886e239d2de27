"""`megakernel bench --ttft LENGTHS` (issue 21): time to first token through each prompt path, per build, and
where a prompt chunk's time goes.

* time to first token: wall ms from a fresh session to the first generated token's id on the host, the prompt
  through the decode passes (8 rows a pass) or the prompt program (chunks of `chunk` rows, the last token by
  a one-row pass); every Program built and captured before the clock starts;
* a chunk's profile: each word of the prompt program launched alone between CUDA events, at a chunk's first
  position (its attention reads that many keys), summed by opcode, beside the chunk's graph replay;
* the prompt GEMMs' TFLOP/s (2 x rows x k x the word's weight rows over its time) against the dense rate of
  cuBLAS's f16 product (8192^3, through CuPy: Hopper's f16 and bf16 tensor-core rates are the same) measured
  in the same process.
"""

from __future__ import annotations

import time

import numpy as np

from isa import GEMM_OPS

from ..model.sampling import greedy

PATHS = ("program", "passes")
PASSES_MAX = 4096  # longer prompts through the decode passes take minutes (3.4 ms a token, D63): not timed


def _sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def ttft(backend, lengths: list[int], paths: list[str], repeats: int, seed: int) -> list[dict]:
    """{prompt_tokens, prompt_path, ms (median), ms_runs} per (path, length); a short untimed prompt first."""
    rng = np.random.default_rng(seed)
    prompts = {n: rng.integers(0, backend.defined_vocab, n).tolist() for n in lengths}
    out = []
    for path in paths:
        backend.prompt_path = path
        for n in lengths:
            if path == "passes" and n > PASSES_MAX:
                out.append({"prompt_tokens": n, "prompt_path": path, "skipped": f"longer than {PASSES_MAX}"})
                continue
            backend.prepare(n)  # Programs built and graphs captured outside the timing
            greedy(backend.start(prompts[n][:128]), backend.defined_vocab)  # warm: module loads, first replays
            runs = []
            for _ in range(repeats):
                _sync()
                t0 = time.perf_counter()
                greedy(backend.start(prompts[n]), backend.defined_vocab)
                runs.append((time.perf_counter() - t0) * 1e3)
            out.append({"prompt_tokens": n, "prompt_path": path, "ms": round(float(np.median(runs)), 2),
                        "ms_runs": [round(r, 2) for r in runs]})
            print(f"  {path:<8} {n:>6} tokens: {out[-1]['ms']:.1f} ms", flush=True)
    return out


def gemm_flops(program, word, rows: int) -> int:
    """2 x rows x k x the output rows of the word's weights (gate_up: both)."""
    return 2 * rows * word.k * sum(program.weights[word.weight_first + s].rows for s in range(word.weight_count))


def chunk_profile(backend, position: int, rows: int, repeats: int, dense_tflops: float) -> dict:
    """One chunk of `rows` rows at `position`: its graph replay (ms), each word alone (us, median of
    `repeats`), by opcode, and the GEMM words' TFLOP/s. The session's contents are left undefined."""
    import cupy

    runner, session = backend._prompt_runner(), backend.session
    program = runner.program
    session.set_position(position, program)
    session.set_prompt_chunk([0] * rows, backend.vocab, program)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()

    def timed(launch) -> float:
        session.set_position(position, program)  # PROMPT_ADVANCE moved it on
        start.record()
        launch()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end)

    replay = float(np.median([timed(runner.launch_graph) for _ in range(repeats)]))
    words, by_op, gemm_us, flops = [], {}, 0.0, 0
    names = program.meta.get("instructions", [])
    for i, w in enumerate(program.words):
        us = 1e3 * float(np.median([timed(lambda: runner.run_word(i)) for _ in range(repeats)]))
        entry = {"index": i, "name": names[i] if i < len(names) else str(i), "op": w.opcode.name, "us": round(us, 2)}
        if w.opcode in GEMM_OPS:
            f = gemm_flops(program, w, rows)
            entry["tflops"] = round(f / us / 1e6, 1)
            gemm_us, flops = gemm_us + us, flops + f
        words.append(entry)
        by_op[w.opcode.name] = round(by_op.get(w.opcode.name, 0.0) + us, 2)
    gemm_tflops = flops / gemm_us / 1e6 if gemm_us else 0.0
    return {"position": position, "rows": rows, "graph_ms": round(replay, 3),
            "words_ms": round(sum(e["us"] for e in words) / 1e3, 3), "by_op_us": by_op,
            "gemm_tflops": round(gemm_tflops, 1), "gemm_fraction_of_dense": round(gemm_tflops / dense_tflops, 4),
            "words": words}


def dense_f16_tflops(n: int = 8192, reps: int = 10) -> float:
    """cuBLAS's f16 product of two n x n matrices (CuPy), median TFLOP/s of `reps` after three untimed."""
    import cupy

    a = cupy.random.default_rng(0).standard_normal((n, n), dtype=cupy.float32).astype(cupy.float16)
    b = a.T.copy()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for i in range(reps + 3):
        start.record()
        cupy.matmul(a, b)
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(cupy.cuda.get_elapsed_time(start, end))
    return 2 * n ** 3 / float(np.median(times)) / 1e9


def run(model: str, modes: list[str], lengths: list[int], paths: list[str], chunk: int, repeats: int,
        seed: int = 0) -> dict:
    from discrete.backend import DiscreteBackend

    capacity = max(lengths) + 16
    dense = dense_f16_tflops()
    print(f"dense f16 (cuBLAS 8192^3): {dense:.0f} TFLOP/s", flush=True)
    result, weights = {"prompt_chunk": chunk, "dense_f16_tflops": round(dense, 1), "builds": {}}, None
    for mode in modes:
        backend = DiscreteBackend(model, capacity, mode, weights=weights, prompt_path="program", prompt_chunk=chunk)
        weights = backend.weights
        print(mode, "time to first token", flush=True)
        runs = ttft(backend, lengths, paths, repeats, seed)
        build = {"time_to_first_token": [{"backend": mode, **r} for r in runs]}
        if "program" in paths and mode == modes[0]:  # the chunk's words are the same in every build
            rows = min(chunk, max(lengths) - 1)
            last = max(0, (max(lengths) - 1 - rows) // 64 * 64)
            build["chunk_profiles"] = [chunk_profile(backend, p, rows, repeats, dense) for p in sorted({0, last})]
            for prof in build["chunk_profiles"]:
                print(f"  chunk of {rows} rows at {prof['position']}: graph {prof['graph_ms']:.2f} ms, words "
                      f"{prof['words_ms']:.2f} ms, GEMMs {prof['gemm_tflops']:.0f} TFLOP/s "
                      f"({100 * prof['gemm_fraction_of_dense']:.1f} % of dense), by op {prof['by_op_us']}", flush=True)
        result["builds"][mode] = build
        backend = None
    result["prompt_flops_per_token"] = _flops_per_token(model, chunk, capacity)
    return result


def _flops_per_token(model: str, chunk: int, capacity: int) -> int:
    """The prompt program's GEMM FLOPs a row (the compute floor's numerator; attention left out)."""
    from compiler import lower_prompt
    from megakernel.model.models import model_config

    program = lower_prompt(model_config(model), rows=chunk, capacity=capacity)
    return sum(gemm_flops(program, w, 1) for w in program.words if w.opcode in GEMM_OPS)


def plot(result: dict, path: str) -> None:
    """Time to first token against prompt length, one line per (build, path), and the linears' compute floor
    (derived: GEMM FLOPs a token x tokens / the dense rate measured in the run)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    lengths = set()
    for mode, build in result["builds"].items():
        for p in PATHS:
            pts = [(r["prompt_tokens"], r["ms"]) for r in build["time_to_first_token"]
                   if r["prompt_path"] == p and "ms" in r]
            if pts:
                lengths.update(n for n, _ in pts)
                ax.plot(*zip(*pts), marker="o", label=f"{mode}, {p}")
    xs = sorted(lengths)
    ax.plot(xs, [result["prompt_flops_per_token"] * n / result["dense_f16_tflops"] / 1e9 for n in xs], "k--",
            linewidth=0.8, label="linears at the dense f16 rate (derived)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [f"{n:,}" for n in xs])  # the measured lengths only: log minor labels collide
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("time to first token, ms")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


__all__ = ["PATHS", "chunk_profile", "dense_f16_tflops", "gemm_flops", "plot", "run", "ttft"]
