"""What a GDN_CORE word's state traffic alone costs on this GPU (issue 19 item 2): the 48 value heads' fp32
state (64 KB a head, 3 MB a layer) read into shared memory and written back in place by a kernel that does
nothing else (experiments/gdn_floor.cu), launched as GDN_CORE is (512 threads, one block per SM), timed as
time_words.py times a word (launches repeated in a CUDA graph; per-launch device time). One head a block
(48 blocks, the tile's shape today) against a head split over 2 or 4 blocks; with 0 or `--chain` dependent
loads before the copies (the tile's word fields, control block and buffer table); by the threads' async
copies and stores, as the tile moves it, or by the tensor memory accelerator's bulk copies. State in L2 (one
copy, as in time_words) and from HBM (copies rotated over 3x L2).

  python experiments/gdn_floor.py --out DIR [--iters 30] [--chain 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gemv import ROTATE_BYTES, graph_us, read_bandwidth  # noqa: E402

from megakernel.runtime import cuda_build  # noqa: E402

SOURCE = Path(__file__).with_name("gdn_floor.cu")
HEADS, COLUMN_BYTES, HEAD_COLUMNS = 48, 128 * 4, 128  # Qwen3.5-27B: 48 value heads, dk = 128, dv = 128
MODES = ("launch_only", "read", "write", "read_write", "bulk_read", "bulk_write", "bulk_read_write")  # gdn_floor.cu `mode`


def main() -> None:
    import cupy
    import numpy as np

    from megakernel.provenance import git_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--chain", type=int, default=3, help="dependent loads before the copies (besides 0)")
    args = parser.parse_args()
    bandwidth = read_bandwidth(args.iters)
    print(f"read bandwidth {bandwidth:.0f} GB/s", flush=True)
    layer_bytes = HEADS * HEAD_COLUMNS * COLUMN_BYTES
    states = {"l2": [cupy.zeros(layer_bytes // 4, dtype=cupy.float32)],
              "hbm": [cupy.zeros(layer_bytes // 4, dtype=cupy.float32) for _ in range(-(-ROTATE_BYTES // layer_bytes))]}
    links = cupy.arange(1, 65, dtype=cupy.int32)
    sink = cupy.zeros(1, dtype=cupy.int32)
    kernel = cuda_build.module(SOURCE, cupy.cuda.Device().id).get_function("state_trip")
    kernel.max_dynamic_shared_size_bytes = HEAD_COLUMNS * COLUMN_BYTES + 16
    threads = cuda_build.tile_threads()
    rows = []
    for where, buffers in states.items():
        for split in (1, 2, 4):
            cols = HEAD_COLUMNS // split
            for chain in sorted({0, args.chain}):
                for mode, name in enumerate(MODES):
                    def launch(i, cols=cols, mode=mode, chain=chain, buffers=buffers, split=split):
                        kernel((HEADS * split,), (threads,), (buffers[i % len(buffers)], links, np.int32(cols),
                                                              np.int32(mode), np.int32(chain), sink),
                               shared_mem=cols * COLUMN_BYTES + 16)
                    us, p10, p90 = graph_us(launch, args.iters)
                    moved = (name.count("read") + name.count("write")) * layer_bytes
                    rows.append({"state_in": where, "blocks_a_head": split, "blocks": HEADS * split, "chain": chain,
                                 "mode": name, "bytes": moved, "us": round(us, 2), "p10": round(p10, 2),
                                 "p90": round(p90, 2), "bandwidth_fraction": round(moved / us / 1e3 / bandwidth, 4)})
                    print(f"{where:3s} {HEADS * split:3d} blocks chain {chain} {name:11s} {us:6.2f} us "
                          f"({p10:.2f}-{p90:.2f})  {moved / us / 1e3 / bandwidth:6.1%}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(),
        "command": "python experiments/gdn_floor.py " + " ".join(sys.argv[1:]),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "read_bandwidth_gbps": round(bandwidth, 1),
        "layer_state_bytes": layer_bytes,
        "threads": threads,
        "rows": rows,
    }
    (out / "gdn_floor.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out / 'gdn_floor.json'}")


if __name__ == "__main__":
    main()
