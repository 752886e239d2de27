"""Where a kernel's warps stall, function by function, from Nsight Compute's source page (CPU only): per
kernel in the file and per function inside it (the SASS cut after each RET, so a persistent kernel's
called functions come apart), the instructions, those executed at least once and the 128-byte lines they
touch (the code a pass needs in the instruction cache), the warp-state samples and their main stall
reasons; `no_inst` is the share of samples waiting for an instruction fetch. Launches of one kernel are
added together.

  ncu --section SourceCounters --section WarpStateStats -o REP python3 experiments/profile_step.py [--megakernel]
  ncu -i REP.ncu-rep --page source --print-source sass --csv > SOURCE.csv
  python experiments/ncu_stalls.py SOURCE.csv[.gz] [--top 6] [--slim SLIM.csv.gz]
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import sys
from dataclasses import dataclass, field

LINE_BYTES = 128  # an instruction-cache line: 8 SASS instructions of 16 bytes


@dataclass
class Part:
    """One function's instructions (or a whole kernel's), summed over the launches read."""
    instructions: int = 0
    executed: set = field(default_factory=set)  # byte offsets (from the kernel's start) run at least once
    samples: int = 0
    stalls: collections.Counter = field(default_factory=collections.Counter)

    @property
    def lines(self) -> int:
        return len({offset // LINE_BYTES for offset in self.executed})

    def add(self, other: "Part") -> None:
        self.instructions = self.instructions or other.instructions  # every launch lists the same code
        self.executed |= other.executed
        self.samples += other.samples
        self.stalls.update(other.stalls)


def _listings(rows: list[list[str]]):
    """(kernel name, header, instruction rows) per listing in a source-page CSV."""
    name, header, body = None, None, []
    for row in rows:
        if row and row[0] == "Kernel Name":
            if name is not None and header is not None:
                yield name, header, body
            name, header, body = row[1], None, []
        elif name is not None and header is None:
            header = row
        elif header is not None and len(row) == len(header):
            body.append(row)
    if name is not None and header is not None:
        yield name, header, body


def _launches(rows: list[list[str]]):
    """The listings, one per launch: ncu 2025.3 prints each launch's listing twice in a row (the same rows)."""
    last = None
    for listing in _listings(rows):
        if listing != last:
            yield listing
        last = listing


SLIM_COLUMNS = ("Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed")


def write_slim(rows: list[list[str]], path: str) -> None:
    """The same source page with only what `read` uses, one listing per launch (gzipped when `path` ends
    in .gz): ~10x smaller, for committing."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", newline="") as f:
        out = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for name, header, body in _launches(rows):
            keep = [i for i, h in enumerate(header)
                    if h in SLIM_COLUMNS or (h.startswith("stall_") and "Not Issued" not in h)]
            out.writerow(["Kernel Name", name])
            out.writerow([header[i] for i in keep])
            for row in body:
                out.writerow([row[i] for i in keep])


def _functions(name: str, header: list[str], body: list[list[str]]) -> list[Part]:
    """One launch's instructions cut into functions after each RET."""
    col = {h: i for i, h in enumerate(header)}
    needed = ("Address", "Source", "Instructions Executed", "Warp Stall Sampling (All Samples)")
    for h in needed:
        if h not in col:
            raise ValueError(f"kernel {name} has no column {h!r} (needs --section SourceCounters and WarpStateStats)")
    stall_cols = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    parts, base = [Part()], None
    for row in body:
        address = int(row[col["Address"]], 16)
        base = address if base is None else base
        part = parts[-1]
        part.instructions += 1
        if int(row[col["Instructions Executed"]] or 0) > 0:
            part.executed.add(address - base)
        part.samples += int(row[col["Warp Stall Sampling (All Samples)"]] or 0)
        for h in stall_cols:
            part.stalls[h[len("stall_"):]] += int(row[col[h]] or 0)
        words = row[col["Source"]].split()
        if words and words[0].split(".")[0] == "RET":
            parts.append(Part())
    return [p for p in parts if p.instructions]


def read_rows(path: str) -> list[list[str]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        return list(csv.reader(f))


def read(path: str) -> dict[str, list[Part]]:
    """Per kernel name, its functions in address order, summed over that kernel's launches."""
    rows = read_rows(path)
    kernels: dict[str, list[Part]] = {}
    for name, header, body in _launches(rows):
        parts = kernels.setdefault(name, [])
        for k, part in enumerate(_functions(name, header, body)):
            if k == len(parts):
                parts.append(Part())
            parts[k].add(part)
    return kernels


def _stall_share(stalls: collections.Counter, reason: str) -> float:
    return 100 * stalls[reason] / max(1, sum(stalls.values()))


def report(kernels: dict[str, list[Part]], top: int) -> str:
    """A markdown table: a row per function, then one per kernel."""
    out = ["| kernel | function | instructions | executed | lines (KB) | samples | no_inst | main stalls |",
           "|---|---|---|---|---|---|---|---|"]
    for name, parts in kernels.items():
        whole = Part(instructions=sum(p.instructions for p in parts))
        for p in parts:
            whole.add(p)
        for label, p in [*enumerate(parts), ("all", whole)]:
            if not p.executed and not p.samples:
                continue  # code this profile never ran
            stalls = sum(p.stalls.values()) or 1
            main = ", ".join(f"{s} {100 * v / stalls:.0f} %" for s, v in p.stalls.most_common(top)) if label != "all" else ""
            out.append(f"| {name} | {label} | {p.instructions} | {len(p.executed)} | {p.lines} "
                       f"({p.lines * LINE_BYTES / 1024:.1f}) | {p.samples} ({100 * p.samples / max(1, whole.samples):.1f} %) "
                       f"| {_stall_share(p.stalls, 'no_inst'):.1f} % | {main} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="ncu source page as CSV (optionally gzipped)")
    parser.add_argument("--top", type=int, default=5, help="stall reasons named per function")
    parser.add_argument("--slim", metavar="OUT", help="also write the columns read here, one listing a launch, to OUT")
    args = parser.parse_args(argv)
    try:
        kernels = read(args.source)
        if args.slim:
            write_slim(read_rows(args.source), args.slim)
    except (OSError, ValueError, csv.Error, EOFError) as e:
        print(f"ncu_stalls: {e}", file=sys.stderr)
        return 1
    if not kernels:
        print(f"ncu_stalls: {args.source} holds no kernel's source page", file=sys.stderr)
        return 1
    print(report(kernels, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
