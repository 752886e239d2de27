"""Warp-stall samples of one kernel in an `ncu --page source --csv --print-source sass` export, summed over
ranges of SASS instruction indices (the ranges read off the SASS by hand: README.md names them).

  python3 ncu_phases.py SOURCE.csv.gz SECTION CUT,CUT,...   (SECTION: 0-based kernel in the export)
"""
import csv
import gzip
import sys


def sections(path):
    rows, out = list(csv.reader(gzip.open(path, "rt"))), []
    for i, r in enumerate(rows):
        if r and r[0] == "Kernel Name":
            out.append((r[1], rows[i + 1], []))
        elif out and r and r[0].startswith("0x"):
            out[-1][2].append(r)
    return out


def main():
    name, header, instructions = sections(sys.argv[1])[int(sys.argv[2])]
    samples = [int(r[header.index("Warp Stall Sampling (All Samples)")]) for r in instructions]
    cuts = [int(c) for c in sys.argv[3].split(",")] + [len(samples)]
    print(f"{name}: {len(samples)} instructions, {sum(samples)} samples")
    lo = 0
    for hi in cuts:
        part = sum(samples[lo:hi])
        print(f"  [{lo:5d}, {hi:5d}) {part:6d} samples {100 * part / sum(samples):5.1f} %")
        lo = hi


if __name__ == "__main__":
    main()
