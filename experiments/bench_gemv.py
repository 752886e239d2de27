"""GEMV kernel bandwidth on the GPU for every distinct GEMV shape of the 27B decode step and MTP head,
M = 1 and 8, as fractions of the measured pure-read bandwidth. Writes gemv_bench.json (docs/RESULTS_FILES.md
results contract, `kernels`: device time per launch from CUDA-graph replay, and `us_eager`, back-to-back
eager launches with the host's launch cost; `fit`: stream fraction and fixed cost per launch from the fp8
shapes at M = 1), plus the registers and resident blocks per SM of each kernel, `k_sweep` (the fp8 GEMV on
in_proj's grid at k = 1280 .. 20480, M = 1 and 8, and the same fit per M: the stream's rate with the grid
held fixed; run when every shape is benched as launched) and a k-slice sweep of every fp8 shape at M = 1
(`slice_sweep`: grid tiles and waves against the SM count).

  python experiments/bench_gemv.py --out DIR [--iters 50] [--shapes in_proj,down] [--no-sweep]

Each shape is tiled as the engine tiles its word (the plan's row groups: gate_up's 144 rows of gate and up
together, qkv's one head; `tiles` in each row) and each launch gets what the discrete build's launcher gives
a GEMV word: one block per SM with all the shared memory it may take (D57; before it, two blocks per SM
where a ring two k-blocks deep fitted, D39).

Weights are random e4m3 bytes (NaN codes avoided) with small positive scales; each shape rotates over
enough copies to exceed 2 x L2, so no timing is served from the cache.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys


from megakernel.provenance import git_commit

L2_BYTES = 60 << 20
ROTATE_BYTES = 3 * L2_BYTES


def median_us(fn, iters: int, reps: int = 10) -> tuple[float, float, float]:
    """Median, p10, p90 of the per-launch time (us) over `iters` samples of `reps` back-to-back eager
    launches (call i uses operand copy i), timed with CUDA events: host launch cost included."""
    import cupy

    for i in range(3):
        fn(i)
    times = []
    for it in range(iters):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for r in range(reps):
            fn(it * reps + r)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / reps)
    times.sort()
    return times[len(times) // 2], times[len(times) // 10], times[9 * len(times) // 10]


def graph_us(fn, iters: int, reps: int = 10) -> tuple[float, float, float]:
    """Median, p10, p90 of the per-launch device time (us): `reps` launches (call i uses operand copy i)
    captured in one CUDA graph, the graph replayed `iters` times between CUDA events. The host's
    per-launch cost (Python, CuPy argument packing: tens of us) is excluded, as it is in the graph and
    megakernel builds."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for i in range(3):
            fn(i)  # compile and warm up outside the capture
        stream.synchronize()
        stream.begin_capture()
        for r in range(reps):
            fn(r)
        graph = stream.end_capture()
        graph.upload(stream)
        graph.launch(stream)
        times = []
        for _ in range(iters):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / reps)
    times.sort()
    return times[len(times) // 2], times[len(times) // 10], times[9 * len(times) // 10]


def read_bandwidth(iters: int) -> float:
    """Pure streaming read over 4 GiB, GB/s (discrete.kernels.read_bandwidth_gbps: the one method)."""
    from discrete.kernels import read_bandwidth_gbps

    return read_bandwidth_gbps(iters)


def random_fp8(shape):
    import cupy

    raw = cupy.random.randint(0, 256, size=shape, dtype=cupy.uint8)
    return cupy.where((raw & 0x7F) == 0x7F, raw ^ 1, raw).astype(cupy.uint8)  # no NaN codes


def bench_shape(name, n, k, slices, is_fp8, iters, bandwidth, ms=(1, 8), tile_rows=128, paired=False):
    import cupy

    from discrete.kernels import gemv_slices

    elem = 1 if is_fp8 else 2
    nbytes = n * k * elem
    copies = max(2, -(-ROTATE_BYTES // nbytes))
    if is_fp8:  # random bytes: the unit layout of random bytes is random bytes (gemv_slices in_units)
        weights = [random_fp8((n, k)) for _ in range(copies)]
        scales = [cupy.full((n // 128, k // 128), 0x3A80, dtype=cupy.uint16) for _ in range(copies)]  # bf16 ~1e-3
    else:
        weights = [cupy.random.randint(0x3000, 0x3C00, size=(n, k), dtype=cupy.uint16) for _ in range(copies)]
        scales = [None] * copies
    rows = []
    for m in ms:
        x = cupy.random.randint(0x3C00, 0x4000, size=(m, k), dtype=cupy.uint16)
        out = cupy.empty((slices, m, n), dtype=cupy.float32)

        def launch(i, x=x, out=out):
            gemv_slices(weights[i % copies], scales[i % copies], x, slices, out=out, in_units=True, tile_rows=tile_rows,
                        paired=paired)

        us, p10, p90 = graph_us(launch, iters)
        eager, _, _ = median_us(launch, iters)
        moved = nbytes + (0 if scales[0] is None else scales[0].nbytes) + m * k * 2 + slices * m * n * 4
        tiles = -(-n // (2 if paired else 1) // tile_rows) * slices
        rows.append({"name": name, "shape": [n, k], "dtype": "fp8" if is_fp8 else "bf16", "rows": m,
                     "k_slices": slices, "tile_rows": tile_rows, "paired": paired, "tiles": tiles,
                     "bytes": moved, "us": round(us, 2),
                     "us_p10": round(p10, 2), "us_p90": round(p90, 2), "bandwidth_fraction": round(moved / us / 1e3 / bandwidth, 4),
                     "us_eager": round(eager, 2)})
        geometry = f"S={slices}@{tile_rows}{'x2' if paired else ''} {tiles} tiles"
        print(f"{name:<24} {n:>7}x{k:<6} M={m} {geometry}  {us:8.1f} us  {moved / us / 1e3:7.0f} GB/s  "
              f"{rows[-1]['bandwidth_fraction']:.1%} of read bandwidth  (eager back-to-back {eager:.1f} us)")
    return rows


def gemv_shapes(c) -> list[tuple[str, int, int, int, bool, int, bool]]:
    """(name, rows, k, k-slices, fp8?, rows per row group, paired?) of each distinct GEMV shape of the decode
    step and the MTP head, in program order, dtypes from the tensor manifest. A fused group with fp8 and bf16
    weights (in_proj's b and a: 96 of 16,480 rows) is timed on its fp8 part; a paired group (gate_up) is
    timed as its tiles run, each over the same rows of both halves."""
    from megakernel.model import plan
    from megakernel.model.tensors import tensor_specs

    specs = {spec.name: spec for spec in tensor_specs(c)}
    out, seen = [], set()
    for group in plan.gemv_groups(c):
        fp8_rows = sum(specs[w].shape[0] for w in group.weights if specs[w].is_fp8)
        rows, is_fp8 = (fp8_rows, True) if fp8_rows else (group.rows, False)
        if (rows, group.k, is_fp8) not in seen:
            seen.add((rows, group.k, is_fp8))
            name = group.name.split(".")[-1]
            out.append(("mtp_" + name if group.name.startswith("mtp.") else name, rows, group.k, group.slices, is_fp8,
                        group.tile_rows, group.paired))
    return out


def line_fit(points: list[tuple[int, float]], bandwidth: float) -> dict:
    """Least squares t = fixed_us + bytes / (stream_fraction x bandwidth) over (bytes, us) points: the slope is
    how fast a running kernel streams, the intercept what each launch loses (launch gap, ramp-up, tail)."""
    import numpy as np

    if len(points) < 2:
        return {}
    b, t = np.array(points, dtype=np.float64).T
    slope, fixed = np.polyfit(b, t, 1)  # us per byte, us
    return {"stream_fraction": round(float(1 / (slope * 1e3 * bandwidth)), 4), "fixed_us": round(float(fixed), 2),
            "points": len(points)}


def stream_fit(kernels: list[dict], bandwidth: float) -> dict:
    """line_fit over the fp8 shapes at M = 1 (the issue's figure). The shapes differ in their grids (tiles
    against the SM count, waves, tails), which the line puts into the slope: k_sweep's fit is the stream's
    rate on one grid."""
    fit = line_fit([(k["bytes"], k["us"]) for k in kernels if k["dtype"] == "fp8" and k["rows"] == 1], bandwidth)
    return {"stream_fraction": fit["stream_fraction"], "fixed_us": fit["fixed_us"], "shapes": fit["points"]} if fit else {}


K_SWEEP = (1280, 2560, 3840, 5120, 10240, 20480)
K_SWEEP_M8 = 5120  # 8 input rows of a wider slice leave the ring fewer than three k-blocks a warp


def k_sweep(iters: int, bandwidth: float, n: int = 16384) -> dict:
    """The fp8 GEMV on one grid (n rows in 128-row groups, one k-slice: in_proj's grid at M = 1), as launched,
    at k = 1280 .. 20480 for M = 1 and up to K_SWEEP_M8 for M = 8, and a line_fit per M (M = 1 also over
    the M = 8 points' k alone): how fast the device function streams once running and what a launch of it
    loses, with the grid held fixed (D44)."""
    rows = []
    for k in K_SWEEP:
        rows += bench_shape(f"k_sweep_{k}", n, k, 1, True, iters, bandwidth, ms=(1, 8) if k <= K_SWEEP_M8 else (1,))
    points = {m: [(r["bytes"], r["us"]) for r in rows if r["rows"] == m] for m in (1, 8)}
    fits = {"m1": line_fit(points[1], bandwidth), "m8": line_fit(points[8], bandwidth),
            "m1_at_m8_k": line_fit([(r["bytes"], r["us"]) for r in rows
                                    if r["rows"] == 1 and r["shape"][1] <= K_SWEEP_M8], bandwidth)}
    for name, f in fits.items():
        print(f"k sweep fit {name:11s} stream {f['stream_fraction']:.3f} of the read bandwidth, fixed {f['fixed_us']:.2f} us")
    return {"rows": rows, "fits": fits}


def kernel_facts() -> dict:
    """Registers and resident blocks per SM of the GEMV kernels: the wave arithmetic behind the numbers."""
    import cupy

    from discrete.kernels import gemv_threads, module

    facts = {}
    for name in ("gemv_fp8_slices", "gemv_bf16_slices"):
        fn = module().get_function(name)
        try:
            blocks = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, gemv_threads(), 0)
        except (AttributeError, cupy.cuda.driver.CUDADriverError):
            blocks = None
        facts[name] = {"registers": fn.num_regs, "threads": gemv_threads(), "blocks_per_sm": blocks}
    return facts


def slice_sweep(shapes, iters: int, bandwidth: float, sms: int) -> list[dict]:
    """Every fp8 shape at k-slice counts 1..16: how the grid (row groups x slices) against the SM
    count decides the time, for the plan's k-slice policy."""
    rows = []
    for name, (n, k) in shapes.items():
        for slices in (1, 2, 3, 4, 5, 6, 8, 10, 12, 13, 16):
            if slices > k // 128:
                continue
            for row in bench_shape(name, n, k, slices, True, iters, bandwidth, ms=(1,)):
                groups = n // 128 * slices
                row["tiles"], row["waves"] = groups, -(-groups // sms)
                rows.append(row)
    return rows


def main() -> None:
    import cupy

    from megakernel.model.config import preset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--shapes", help="comma-separated subset of the shapes (default: all)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the k-slice sweep")
    args = parser.parse_args()
    bandwidth = read_bandwidth(args.iters)
    print(f"read bandwidth {bandwidth:.0f} GB/s")
    c = preset("qwen3.5-27b")
    chosen = args.shapes.split(",") if args.shapes else None
    kernels, fp8_shapes = [], {}
    for name, rows, k, slices, is_fp8, tile_rows, paired in gemv_shapes(c):
        if chosen is None or name in chosen:  # the engine's row groups (gate_up's 144 rows, qkv's one head)
            kernels += bench_shape(name, rows, k, slices, is_fp8, args.iters, bandwidth, tile_rows=tile_rows,
                                   paired=paired)
            if is_fp8:
                fp8_shapes[name] = (rows, k)
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    facts = kernel_facts()
    print(facts)
    sweep = [] if args.no_sweep else slice_sweep(fp8_shapes, args.iters, bandwidth, sms)
    one_grid = k_sweep(args.iters, bandwidth) if chosen is None else {}
    os.makedirs(args.out, exist_ok=True)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "git_commit": git_commit(),
        "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
        "model": "synthetic:qwen3.5-27b shapes (random weights)", "read_bandwidth_gbps": round(bandwidth, 1),
        "sms": sms, "launch": "one_block_deepest_ring", "kernel_facts": facts,
        "kernels": kernels, "fit": stream_fit(kernels, bandwidth), "k_sweep": one_grid,
        "slice_sweep": sweep,
    }
    with open(os.path.join(args.out, "gemv_bench.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
