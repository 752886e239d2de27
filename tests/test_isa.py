import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from compiler import lower
from isa import NO_BUFFER, Op, Program, Wait, WaitMode, Word, decode, encode
from isa.opcodes import PARAMS
from isa.program import DType, WeightEntry
from isa.word import FIELDS, PARAM_SLOTS, WAIT_FIELDS, WORD_U32, canonical
from megakernel.model.config import preset

ROOT = Path(__file__).resolve().parents[1]


def random_word(rng) -> Word:
    op = list(Op)[int(rng.integers(len(Op)))]
    waits = tuple(Wait(int(rng.integers(1 << 16)), int(rng.integers(1, 256)), WaitMode(int(rng.integers(1, 3))),
                       int(rng.integers(1 << 32)), int(rng.integers(8)))
                  for _ in range(int(rng.integers(5))))
    values = {name: int(rng.integers(1 << min(bits, 32))) for name, _, _, bits in FIELDS if name != "opcode"}
    params = tuple(int(x) for x in rng.integers(1 << 32, size=int(rng.integers(PARAM_SLOTS + 1)), dtype=np.uint64))
    return Word(op, **values, waits=waits, params=params)


def test_encode_decode_round_trips_random_words():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        w = random_word(rng)
        raw = encode(w)
        assert raw.dtype == np.dtype("<u4") and raw.shape == (WORD_U32,)
        assert decode(raw) == canonical(w)
        assert np.array_equal(encode(decode(raw)), raw)


def test_fields_tile_the_word_without_overlap():
    used = np.zeros((WORD_U32, 32), bool)
    for _, index, first, bits in FIELDS:
        assert not used[index, first:first + bits].any()
        used[index, first:first + bits] = True
    for slot in range(4):
        for _, offset, first, bits in WAIT_FIELDS:
            assert not used[13 + 2 * slot + offset, first:first + bits].any()
            used[13 + 2 * slot + offset, first:first + bits] = True
    assert not used[21:].any()  # the 11 parameter words
    assert all(len(p) <= PARAM_SLOTS for p in PARAMS.values())


def test_out_of_range_fields_are_refused():
    with pytest.raises(ValueError, match="rows"):
        encode(Word(Op.EMBED, rows=256))
    with pytest.raises(ValueError, match="waits"):
        encode(Word(Op.EMBED, waits=(Wait(0, 1, WaitMode.ALL, 1),) * 5))


def test_isa_md_documents_every_field_at_its_bit_range():
    doc = (ROOT / "docs" / "ISA.md").read_text()
    for name, index, first, bits in FIELDS:
        bit_range = f"{first}-{first + bits - 1}" if bits > 1 else f"{first}"
        assert re.search(rf"\|\s*{index}\s*\|\s*{bit_range}\s*\|\s*`{name}`", doc), name
    for op in Op:
        assert f"`{op.name}`" in doc, op.name


@pytest.mark.parametrize("rows", [1, 8])
def test_program_bytes_round_trip(rows):
    p = lower(preset("tiny"), rows=rows, sms=7, capacity=64)
    data = p.to_bytes()
    q = Program.from_bytes(data)
    assert q.to_bytes() == data
    assert [canonical(w) for w in p.words] == q.words
    assert q.buffers == p.buffers and q.weights == p.weights and q.counters == p.counters
    assert q.rows == rows and q.sms == 7 and q.meta == p.meta
    with pytest.raises(ValueError, match="megakernel Program"):
        Program.from_bytes(b"XXXX" + data[4:])


def test_weight_bytes_include_the_block_scales_of_a_last_fp8_weight():
    fp8 = WeightEntry("w", 200, 300, DType.FP8_E4M3, DType.BF16, offset=0, scale_offset=60_160)
    assert Program([], [], [fp8], [], 1, 1).weight_bytes == 60_160 + 2 * 3 * 2  # [ceil(200/128), ceil(300/128)] bf16


def test_control_block_is_buffer_zero_and_buffers_are_aligned():
    p = lower(preset("tiny"), rows=2, sms=7, capacity=64)
    assert p.buffers[0].name == "ctrl" and p.buffers[0].offset == 0
    assert all(b.offset % 256 == 0 for b in p.buffers)
    for w in p.words:
        for role in ("buf_in", "buf_out", "buf_aux0", "buf_aux1", "buf_aux2", "buf_scratch"):
            assert getattr(w, role) == NO_BUFFER or getattr(w, role) < len(p.buffers)


def test_listing_of_tiny_matches_the_golden():
    """tests/fixtures/tiny_listing.txt: regenerate with
    megakernel compile --model synthetic:tiny --rows 2 --sms 7 --context 64 --listing > tests/fixtures/tiny_listing.txt"""
    p = lower(preset("tiny"), rows=2, sms=7, capacity=64)
    golden = (ROOT / "tests" / "fixtures" / "tiny_listing.txt").read_text().splitlines()
    assert p.listing().splitlines() == golden[:-1]  # the last line carries the compile time


def test_json_form_has_the_summary_keys():
    j = lower(preset("tiny"), rows=1, sms=7, capacity=64).to_json()
    assert {"words", "opcodes", "counters", "arena_bytes", "weight_bytes"} <= set(j)
    assert j["words"] == 48 and sum(j["opcodes"].values()) == 48
    assert dataclasses.asdict(Wait(1, 2, WaitMode.ALL, 3)) == {  # waits serialise
        "base": 1, "count": 2, "mode": WaitMode.ALL, "expected": 3, "lag": 0}
