"""Program size, compile time and validation of the 27B (and tiny) programs, on this machine's CPU.

  python experiments/compile_report.py [--out experiments/results]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

from compiler import lower, validate
from megakernel.model.config import preset
from megakernel.provenance import git_commit

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    rows = []
    for name in ("qwen3.5-27b", "tiny"):
        for m in (1, 8):
            for g in (1, 7, 132):
                compile_s = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    program = lower(preset(name), rows=m, sms=g)
                    compile_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                report = validate(program, g)
                summary = program.to_json()
                rows.append({
                    "config": name, "rows": m, "sms": g, "words": summary["words"], "opcodes": summary["opcodes"],
                    "counters": summary["counters"], "waits": sum(len(w.waits) for w in program.words),
                    "arena_bytes": summary["arena_bytes"], "weight_bytes": summary["weight_bytes"],
                    "compile_seconds_median_of_3": round(sorted(compile_s)[1], 3),
                    "validate_seconds": round(time.perf_counter() - t0, 3), "validated": report.ok,
                    "validated_nodes": report.nodes})
                print({k: v for k, v in rows[-1].items() if k != "opcodes"})
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "compile_report.json")
    with open(path, "w") as f:
        json.dump({"device": f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)",
                   "git_commit": git_commit(),
                   "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
                   "model": "synthetic:qwen3.5-27b, synthetic:tiny (configs only)", "read_bandwidth_gbps": None,
                   "programs": rows}, f, indent=2)
    print("wrote", path)


if __name__ == "__main__":
    main()
