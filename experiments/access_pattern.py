"""Does the order in which the GEMV tiles read their weights cost DRAM bandwidth? A pure read of the 27B's
in_proj bytes as 2 KB units through the GEMV's per-warp cp.async ring (experiments/access_pattern.cu), in
the tiles' order, in contiguous per-warp shares and as one sequential sweep, at ring depths 6 and 2;
fractions of the read bandwidth measured in the same process (D43).

  python experiments/access_pattern.py --out DIR [--iters 30] [--sweep]

With --sweep it also times, at k = 1280 .. 20480 over 128 row groups of 128 rows (in_proj's grid at M = 1),
the ring read in the tiles' order and the GEMV itself (discrete.kernels.gemv_slices, M = 1, as launched: the
deepest ring since D57), and fits t = fixed_us + bytes / (stream_fraction x read bandwidth) to each: how
fast each streams once running, and what each launch loses, on one grid.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gemv import ROTATE_BYTES, graph_us, line_fit, read_bandwidth  # noqa: E402

from megakernel.model import plan  # noqa: E402
from megakernel.runtime import cuda_build  # noqa: E402

SOURCE = Path(__file__).with_name("access_pattern.cu")
PATTERNS = ("tiles", "contiguous", "global")  # access_pattern.cu `pattern` 0, 1, 2
UNIT_BYTES = plan.STRIP_ROWS * plan.K_BLOCK  # one fp8 unit (gemv.cuh UNIT_BYTES)
WARPS = cuda_build.tile_threads() // 32


def check_geometry(strips: int, blocks: int) -> int:
    """Units each warp reads (every order reads each unit once), or ValueError."""
    if WARPS % strips or blocks % (WARPS // strips) or (strips * blocks) % WARPS:
        raise ValueError(f"strips {strips} must divide {WARPS} and blocks {blocks} split evenly over the phases")
    return strips * blocks // WARPS


def ring_read_us(mod, buffers, depth: int, pattern: int, tiles: int, strips: int, blocks: int, iters: int):
    """Per-launch device time (median, p10, p90 us) of one ring read over `buffers` (rotated)."""
    import cupy
    import numpy as np

    kernel = mod.get_function(f"ring_read_{depth}")
    smem = WARPS * depth * UNIT_BYTES
    kernel.max_dynamic_shared_size_bytes = smem
    steps = check_geometry(strips, blocks)
    sink = cupy.zeros(1, dtype=cupy.uint32)

    def launch(i):
        kernel((tiles,), (32 * WARPS,), (buffers[i % len(buffers)], np.int32(pattern), np.int32(tiles),
                                         np.int32(strips), np.int32(blocks), np.int32(steps), sink), shared_mem=smem)

    return graph_us(launch, iters)


def size_sweep(mod, bandwidth: float, iters: int) -> dict:
    """The ring read (tiles' order, depths 6 and 2) and the GEMV (M = 1, as launched: timed by
    bench_gemv.bench_shape) over 128 row groups at k = 1280 .. 20480: rows and a fit per series."""
    import cupy

    from bench_gemv import bench_shape

    n, tiles, strips = 16384, 128, 8
    rows, series = [], {}
    for k in (1280, 2560, 5120, 10240, 20480):
        nbytes = n * k
        buffers = [cupy.random.randint(0, 256, size=nbytes, dtype=cupy.uint8)
                   for _ in range(max(2, -(-ROTATE_BYTES // nbytes)))]
        timed = {}
        for depth in (6, 2):
            us = ring_read_us(mod, buffers, depth, 0, tiles, strips, k // plan.K_BLOCK, iters)
            timed[f"ring_read_depth{depth}"] = (us, nbytes)
        del buffers
        r = bench_shape(f"k_{k}", n, k, 1, True, iters, bandwidth, ms=(1,))[0]
        timed["gemv_as_launched"] = ((r["us"], r["us_p10"], r["us_p90"]), r["bytes"])
        for kind, ((us, p10, p90), moved) in timed.items():
            rows.append({"series": kind, "k": k, "bytes": moved, "us": round(us, 2), "p10": round(p10, 2),
                         "p90": round(p90, 2), "bandwidth_fraction": round(moved / us / 1e3 / bandwidth, 4)})
            series.setdefault(kind, []).append((moved, us))
            print(f"k {k:6d} {kind:20s} {us:7.2f} us  {moved / us / 1e3 / bandwidth:6.1%}", flush=True)
    fits = {kind: line_fit(points, bandwidth) for kind, points in series.items()}
    for kind, f in fits.items():
        print(f"fit {kind:20s} stream {f['stream_fraction']:.3f}  fixed {f['fixed_us']:.2f} us", flush=True)
    return {"rows": rows, "fits": fits, "grid": {"n": n, "tiles": tiles, "strips": strips, "m": 1}}


def main() -> None:
    import cupy

    from megakernel.provenance import git_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--tiles", type=int, default=130, help="in_proj at M = 1: 130 row groups of 128 rows")
    parser.add_argument("--strips", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=40, help="k-blocks a strip (k = 5120)")
    parser.add_argument("--sweep", action="store_true", help="also the ring read and the GEMV at k = 1280 .. 20480")
    args = parser.parse_args()
    steps = check_geometry(args.strips, args.blocks)
    bandwidth = read_bandwidth(args.iters)
    print(f"read bandwidth {bandwidth:.0f} GB/s", flush=True)
    nbytes = args.tiles * args.strips * args.blocks * UNIT_BYTES
    copies = max(2, -(-ROTATE_BYTES // nbytes))
    buffers = [cupy.random.randint(0, 256, size=nbytes, dtype=cupy.uint8) for _ in range(copies)]
    mod = cuda_build.module(SOURCE, cupy.cuda.Device().id)
    rows = []
    for depth in (6, 2):
        for pattern, name in enumerate(PATTERNS):
            us, p10, p90 = ring_read_us(mod, buffers, depth, pattern, args.tiles, args.strips, args.blocks, args.iters)
            gbps = nbytes / us / 1e3
            rows.append({"pattern": name, "depth": depth, "bytes": nbytes, "us": round(us, 2), "p10": round(p10, 2),
                         "p90": round(p90, 2), "gbps": round(gbps, 1), "bandwidth_fraction": round(gbps / bandwidth, 4)})
            print(f"depth {depth} {name:10s} {us:7.2f} us  {gbps:6.0f} GB/s  {gbps / bandwidth:6.1%}", flush=True)
    del buffers
    sweep = size_sweep(mod, bandwidth, args.iters) if args.sweep else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(),
        "command": "python experiments/access_pattern.py " + " ".join(sys.argv[1:]),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "read_bandwidth_gbps": round(bandwidth, 1),
        "geometry": {"tiles": args.tiles, "strips": args.strips, "blocks": args.blocks, "unit_bytes": UNIT_BYTES,
                     "warps": WARPS, "units_per_warp": steps, "copies": copies},
        "reads": rows,
    }
    if sweep is not None:
        result["size_sweep"] = sweep
    (out / "access_pattern.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out / 'access_pattern.json'}")


if __name__ == "__main__":
    main()
