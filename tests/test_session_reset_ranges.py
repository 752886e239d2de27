"""DeviceSession.reset's activation ranges (megakernel/runtime/device.py _ranges): buffers that touch or overlap
poisoned by one memset, a gap (padding between buffers, which stays zero) kept."""

from megakernel.runtime.device import _ranges


def test_touching_and_overlapping_spans_merge_and_gaps_stay():
    assert _ranges([(0, 10), (10, 20), (30, 40), (35, 50), (36, 38), (60, 70)]) == [(0, 20), (30, 50), (60, 70)]
    assert _ranges([]) == []
    assert _ranges([(5, 6)]) == [(5, 6)]
