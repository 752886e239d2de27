"""Reading a megakernel trace (megakernel/measurement/trace.py) on records built here: the layout the kernel writes
([passes, words, blocks, (start, ready, end, tiles)], ns) with known times."""

import json

import numpy as np
import pytest

from compiler import lower
from compiler.tiling import block_range
from megakernel.measurement import trace
from megakernel.measurement.budgets import instruction_bytes


@pytest.fixture(scope="module")
def program(tiny_weights):
    return lower(tiny_weights.config, rows=1, sms=4, capacity=64)


def fake_records(program, steps=2, wait=50, work=200):
    """Every block runs its tiles of each word one after another: `wait` ns of waiting, `work` ns of
    work per record; blocks without tiles leave zeros (as the kernel does)."""
    blocks = program.sms
    rec = np.zeros((steps, len(program.words), blocks, 4), np.uint64)
    clock = np.full(blocks, 1_000_000, np.int64)
    for step in range(steps):
        for i, w in enumerate(program.words):
            for b in range(blocks):
                n = len(block_range(w.tiles, blocks, b))
                if n:
                    start = clock[b]
                    rec[step, i, b] = (start, start + wait, start + wait + work, n)
                    clock[b] = start + wait + work
    return rec


def test_chrome_trace_has_a_wait_and_a_work_slice_per_record(program):
    rec = fake_records(program)
    doc = trace.chrome_trace(rec, program)
    json.dumps(doc)  # serialisable as written
    records = int((rec[..., 3] > 0).sum())
    work = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "wait"]
    waits = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "wait"]
    assert len(work) == len(waits) == records
    assert all(e["dur"] == pytest.approx(0.2) for e in work) and all(e["dur"] == pytest.approx(0.05) for e in waits)
    assert min(e["ts"] for e in waits) == 0  # times from the first start
    assert {e["tid"] for e in work} <= set(range(program.sms))


def test_opcode_table_sums_work_waits_spans_and_bytes(program):
    rec = fake_records(program, steps=2)
    rows = {r["opcode"]: r for r in trace.opcode_table(rec, program, context=10, read_gbps=1000.0)}
    for op, r in rows.items():
        words = [i for i, w in enumerate(program.words) if w.opcode.name == op]
        records = sum(int((rec[:, i, :, 3] > 0).sum()) for i in words)
        assert r["instructions"] == 2 * len(words)
        assert r["work_us"] == pytest.approx(records * 0.2) and r["wait_us"] == pytest.approx(records * 0.05)
        assert r["bytes"] == 2 * sum(instruction_bytes(program, program.words[i], 10) for i in words)
        assert r["span_us"] > 0
        if r["bytes"]:
            assert r["gbps"] == pytest.approx(r["bytes"] / (r["span_us"] * 1e3))
            assert r["fraction_of_bandwidth"] == pytest.approx(r["gbps"] / 1000.0)
    assert "NORM_GEMV" in trace.table_text(list(rows.values()))


def test_an_empty_trace_reads_as_nothing(program):
    rec = np.zeros((1, len(program.words), 2, program.sms, 4), np.uint64)
    assert trace.slices(rec) == [] and trace.opcode_table(rec, program, context=1) == []


def test_timeline_png_is_written(program, tmp_path):
    path = tmp_path / "timeline.png"
    trace.timeline_png(fake_records(program, steps=1), program, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"



def test_critical_path_adds_up_to_the_pass_and_names_each_words_share(program):
    rec = fake_records(program, steps=2, wait=50, work=200)
    added, gaps = trace.critical_path(rec, 1)
    ran = (rec[1][..., 3] & 0xFFFFFFFF) > 0
    assert added.sum() == rec[1][..., 2][ran].max() - rec[0][..., 2].max()  # last tile to last tile
    assert (added >= 0).all() and (gaps >= 0).all() and (gaps <= added).all()
    # a word that ends later than everything before it adds exactly its lateness
    i = int(np.argmax(added))
    ends = np.where(ran, rec[1][..., 2], 0).max(axis=1)
    before = max(int(rec[0][..., 2].max()), int(ends[:i].max()) if i else 0)
    assert added[i] == ends[i] - before
    with pytest.raises(ValueError):
        trace.critical_path(rec, 0)


def test_slices_unpack_tiles_and_polls(program):
    rec = fake_records(program, steps=1)
    rec[..., 3] |= np.uint64(7) << np.uint64(32)  # 7 sleeping polls above the tile count
    s = trace.slices(rec)[0]
    assert s.polls == 7 and 1 <= s.tiles < 7


def test_timeline_png_window(program, tmp_path):
    path = tmp_path / "window.png"
    trace.timeline_png(fake_records(program, steps=2), program, str(path), step=1, window=(0.0, 1.0))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_records_from_before_d50_read_as_one_record_per_block_and_word():
    """Saved traces from the reduce-stage days ([passes, words, 2 stages, blocks, 4]) still read: a block's
    main and reduce records of a word merge (earliest start, main ready, latest end, tiles and polls added)."""
    old = np.zeros((1, 2, 2, 3, 4), np.uint64)
    old[0, 0, 0, 0] = (100, 150, 400, 1 | (2 << 32))  # block 0: a main tile, then a reduce tile
    old[0, 0, 1, 0] = (400, 450, 600, 1)
    old[0, 0, 1, 1] = (300, 320, 500, 1)  # block 1: a reduce tile alone
    old[0, 1, 0, 2] = (700, 710, 900, 2)
    new = trace.current_layout(old)
    assert new.shape == (1, 2, 3, 4)
    assert new[0, 0, 0].tolist() == [100, 150, 600, 2 | (2 << 32)]
    assert new[0, 0, 1].tolist() == [300, 320, 500, 1]
    assert new[0, 0, 2].tolist() == [0, 0, 0, 0] and new[0, 1, 2].tolist() == [700, 710, 900, 2]
    assert trace.current_layout(new) is new
    with pytest.raises(ValueError, match="expected"):
        trace.current_layout(np.zeros((1, 2, 3), np.uint64))
