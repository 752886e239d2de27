"""The megakernel's host side without a GPU: the watchdog's diagnosis of a stalled Program.

A stall cascades (every block waiting on the stalled instruction's outputs times out too), so the host
names the earliest instruction whose completion counter is short. The CPU interpreter runs the same
counter protocol as the kernel; its counters at a deadlock stand in for the kernel's at a stall.
"""

from types import SimpleNamespace

import pytest

from compiler import lower
from compiler.interpreter import Deadlock, Interpreter
from megakernel.runtime.persistent import Megakernel
from program_tools import impossible_wait


@pytest.mark.parametrize("opcode", ["GDN_CORE", "ATTN_PV", "NORM_HEAD"])
def test_the_stall_report_names_the_first_incomplete_instruction(tiny_weights, opcode):
    program = lower(tiny_weights.config, rows=1, sms=132, capacity=16)
    index = next(i for i, w in enumerate(program.words) if w.opcode.name == opcode)
    broken = impossible_wait(program, index)
    interp = Interpreter(broken, tiny_weights)
    interp.set_tokens([7])
    with pytest.raises(Deadlock):
        interp.run(2)
    report = Megakernel._first_incomplete(SimpleNamespace(program=broken), interp.counters)
    assert broken.line(index, broken.words[index]) in report, report
    assert "needs 1000000" in report


def test_the_stall_report_file_has_every_blocks_place_and_every_counter(tiny_weights, tmp_path):
    """The kernel leaves, per block, where it stood when the watchdog stopped it (pass + 1, word, tile, 0;
    zeros: no place); the report names each block's instruction and every counter's value."""
    import json

    import numpy as np

    from megakernel.runtime.persistent import ERROR_PLACES, stall_report

    program = lower(tiny_weights.config, rows=1, sms=4, capacity=16)
    index = next(i for i, w in enumerate(program.words) if w.opcode.name == "GDN_CORE")
    error = np.zeros(ERROR_PLACES + 4 * program.sms, np.uint32)
    error[:6] = [1, 2, index, 5, 1000000, 0]  # block 2 waited for counter 5 before the GDN word
    error[ERROR_PLACES:ERROR_PLACES + 12] = [1, index, 3, 0, 1, index + 1, 0, 0, 2, index, 7, 0]
    held = np.arange(len(program.counters))
    report = stall_report(program, error, held, 0.5)
    name = program.meta["instructions"][index]
    assert report["watchdog"]["instruction"] == name and report["watchdog"]["expected"] == 1000000
    assert report["watchdog"]["counter"] == 5
    assert report["blocks"][0] == {"block": 0, "pass": 0, "word": index, "instruction": name, "tile": 3}
    assert report["blocks"][2]["pass"] == 1 and report["blocks"][2]["tile"] == 7
    assert report["blocks"][3] == {"block": 3, "place": None}  # finished, or never waited
    assert [c["holds"] for c in report["counters"]] == held.tolist()
    path = Megakernel._write_report(SimpleNamespace(report_dir=str(tmp_path)), report)
    assert json.loads(open(path).read()) == json.loads(json.dumps(report))
