"""Does the order in which the GEMV tiles read their weights cost DRAM bandwidth? A pure read of the 27B's
in_proj bytes as 2 KB units through the GEMV's per-warp cp.async ring (experiments/access_pattern.cu), in
the tiles' order, in contiguous per-warp shares and as one sequential sweep, at ring depths 6 and 2;
fractions of the read bandwidth measured in the same process (D43).

  python experiments/access_pattern.py --out DIR [--iters 30]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gemv import ROTATE_BYTES, graph_us, read_bandwidth  # noqa: E402

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


def main() -> None:
    import cupy
    import numpy as np

    from megakernel.provenance import git_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--tiles", type=int, default=130, help="in_proj at M = 1: 130 row groups of 128 rows")
    parser.add_argument("--strips", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=40, help="k-blocks a strip (k = 5120)")
    args = parser.parse_args()
    steps = check_geometry(args.strips, args.blocks)
    bandwidth = read_bandwidth(args.iters)
    print(f"read bandwidth {bandwidth:.0f} GB/s", flush=True)
    nbytes = args.tiles * args.strips * args.blocks * UNIT_BYTES
    copies = max(2, -(-ROTATE_BYTES // nbytes))
    buffers = [cupy.random.randint(0, 256, size=nbytes, dtype=cupy.uint8) for _ in range(copies)]
    sink = cupy.zeros(1, dtype=cupy.uint32)
    mod = cuda_build.module(SOURCE, cupy.cuda.Device().id)
    rows = []
    for depth in (6, 2):
        kernel = mod.get_function(f"ring_read_{depth}")
        smem = WARPS * depth * UNIT_BYTES
        kernel.max_dynamic_shared_size_bytes = smem
        for pattern, name in enumerate(PATTERNS):
            def launch(i, pattern=pattern, kernel=kernel, smem=smem):
                kernel((args.tiles,), (32 * WARPS,), (buffers[i % copies], np.int32(pattern), np.int32(args.tiles),
                                                      np.int32(args.strips), np.int32(args.blocks), np.int32(steps),
                                                      sink), shared_mem=smem)

            us, p10, p90 = graph_us(launch, args.iters, reps=copies)
            gbps = nbytes / us / 1e3
            rows.append({"pattern": name, "depth": depth, "bytes": nbytes, "us": round(us, 2), "p10": round(p10, 2),
                         "p90": round(p90, 2), "gbps": round(gbps, 1), "bandwidth_fraction": round(gbps / bandwidth, 4)})
            print(f"depth {depth} {name:10s} {us:7.2f} us  {gbps:6.0f} GB/s  {gbps / bandwidth:6.1%}", flush=True)
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
    (out / "access_pattern.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out / 'access_pattern.json'}")


if __name__ == "__main__":
    main()
