"""The megakernel's host side without a GPU: the watchdog's diagnosis of a stalled Program.

A stall cascades (every block waiting on the stalled instruction's outputs times out too), so the host
names the earliest instruction whose completion counter is short. The CPU interpreter runs the same
counter protocol as the kernel; its counters at a deadlock stand in for the kernel's at a stall.
"""

from types import SimpleNamespace

import pytest

from compiler import lower
from compiler.interpreter import Deadlock, Interpreter
from megakernel.persistent import Megakernel
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
