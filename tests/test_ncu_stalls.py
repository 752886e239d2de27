"""experiments/ncu_stalls.py on CPU: a source page cut into functions after each RET, a launch listed
twice counted once, launches of one kernel added, the instruction-fetch share and executed lines right,
the slim copy read back the same, and a page without the sampling columns refused in one line."""

import csv
import gzip
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "ncu_stalls.py"
HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed", "L1 Tag Requests Global",
          "stall_no_inst", "stall_wait", "stall_no_inst (Not Issued)"]


@pytest.fixture(scope="module")
def ncu_stalls():
    spec = importlib.util.spec_from_file_location("ncu_stalls", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ncu_stalls"] = module  # its dataclass looks its module up while it is made
    spec.loader.exec_module(module)
    yield module
    del sys.modules["ncu_stalls"]


def listing(name, instructions):
    """Rows of one kernel listing: (source, executed, no_inst samples, wait samples) per instruction."""
    rows = [["Kernel Name", name, ""], HEADER]
    for i, (source, executed, no_inst, wait) in enumerate(instructions):
        rows.append([hex(0x7F0000001000 + 16 * i), f"      {source}", str(no_inst + wait), str(executed), "0",
                     str(no_inst), str(wait), str(no_inst)])
    return rows


# An entry of 9 instructions (its executed ones span two 128-byte lines), then a called function of 3 that
# returns, then one never run.
ENTRY = [("LDC R1, c[0x0][0x28]", 4, 2, 0)] + [("NOP", 4, 0, 1)] * 8
CALLEE = [("IADD3 R1, R2, R3, RZ", 8, 6, 2), ("FADD R1, R1, R2", 8, 0, 0), ("RET.REL.NODEC R20 0x0", 8, 0, 0)]
DEAD = [("BRA 0x0", 0, 0, 0), ("RET.ABS.NODEC R20 0x0", 0, 0, 0)]


def write(path, rows):
    with gzip.open(path, "wt", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)


def test_functions_launches_and_shares(ncu_stalls, tmp_path):
    first = listing("megakernel", ENTRY + CALLEE + DEAD)
    second = listing("megakernel", ENTRY + [("IADD3 R1, R2, R3, RZ", 8, 2, 0)] + CALLEE[1:] + DEAD)
    path = tmp_path / "page.csv.gz"
    write(path, first + first + second)  # the first launch listed twice, as ncu prints it
    kernels = ncu_stalls.read(str(path))
    assert list(kernels) == ["megakernel"]
    entry_and_callee, dead = kernels["megakernel"]
    # the entry has no RET of its own: it and the callee are one function; the code after the RET another
    assert entry_and_callee.instructions == 12 and dead.instructions == 2
    assert len(entry_and_callee.executed) == 12 and entry_and_callee.lines == 2 and dead.lines == 0
    # samples of both launches, the first once: no_inst 2 + 6 (first) + 2 + 2 (second), wait 8 + 2 and 8
    assert entry_and_callee.stalls["no_inst"] == 12 and entry_and_callee.stalls["wait"] == 18
    assert entry_and_callee.samples == 30
    table = ncu_stalls.report(kernels, top=2)
    assert "| megakernel | 0 | 12 | 12 | 2 (0.2) | 30 (100.0 %) | 40.0 % | wait 60 %, no_inst 40 % |" in table
    assert "| megakernel | 1 |" not in table  # never run, never sampled


def test_slim_copy_reads_the_same(ncu_stalls, tmp_path):
    path, slim = tmp_path / "page.csv.gz", tmp_path / "slim.csv.gz"
    write(path, listing("tile_gemv", ENTRY + CALLEE) * 2 + listing("tile_gdn", CALLEE))
    assert ncu_stalls.main([str(path), "--slim", str(slim)]) == 0
    full, small = ncu_stalls.read(str(path)), ncu_stalls.read(str(slim))
    assert ncu_stalls.report(full, 5) == ncu_stalls.report(small, 5)
    with gzip.open(slim, "rt") as f:
        rows = list(csv.reader(f))
    assert sum(r[0] == "Kernel Name" for r in rows) == 2  # one listing a launch
    assert "L1 Tag Requests Global" not in rows[1] and "stall_no_inst (Not Issued)" not in rows[1]


def test_a_page_without_samples_is_refused(ncu_stalls, tmp_path, capsys):
    path = tmp_path / "page.csv.gz"
    write(path, [["Kernel Name", "tile_gemv"], ["Address", "Source"], ["0x10", "NOP"]])
    assert ncu_stalls.main([str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ncu_stalls: kernel tile_gemv has no column") and "\n" not in err
    empty = tmp_path / "empty.csv"
    empty.write_text("==WARNING== Unable to open source file\n")
    assert ncu_stalls.main([str(empty)]) == 1
    assert "holds no kernel's source page" in capsys.readouterr().err
