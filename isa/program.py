"""The Program: instruction words plus the tables a backend needs to run them, serialised to bytes
exactly as the GPU reads them (docs/ISA.md, "Program bytes").

    header    64 bytes   magic b"MKPG", version, counts, rows, sms, arena and weight-arena sizes
    words     128 bytes each (isa/word.py)
    buffers   32 bytes each: arena offset u64, rows u32, cols u32, dtype u8, kind u8, 14 bytes pad
    weights   32 bytes each: offset u64, scale offset u64, rows u32, cols u32, dtype u8, scale dtype u8, pad
    counters  8 bytes each: producing instruction u32, arrivals per step u32
    metadata  UTF-8 JSON: names of buffers, weights and counters, config, compile options
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from . import word as word_mod
from .opcodes import GEMM_OPS, GEMV_OPS, NO_BUFFER, NO_LAYER, PROMPT_OPS, Flag, WaitMode
from .word import WORD_BYTES, Word

MAGIC = b"MKPG"
VERSION = 1
NO_OFFSET = (1 << 64) - 1
SCALE_BLOCK = 128  # an fp8 weight has one block scale per 128 x 128 block (docs/ISA.md)
COUNTER_STRIDE = 32  # u32 per counter in device memory: one 128-byte line each (docs/ISA.md; common.cuh)

HEADER = np.dtype([("magic", "S4"), ("version", "<u4"), ("n_words", "<u4"), ("n_buffers", "<u4"),
                   ("n_weights", "<u4"), ("n_counters", "<u4"), ("rows", "<u4"), ("sms", "<u4"),
                   ("arena_bytes", "<u8"), ("weight_bytes", "<u8"), ("meta_bytes", "<u4"), ("pad", "V12")])
BUFFER_RECORD = np.dtype([("offset", "<u8"), ("rows", "<u4"), ("cols", "<u4"), ("dtype", "u1"), ("kind", "u1"),
                          ("pad", "V14")])
WEIGHT_RECORD = np.dtype([("offset", "<u8"), ("scale_offset", "<u8"), ("rows", "<u4"), ("cols", "<u4"),
                          ("dtype", "u1"), ("scale_dtype", "u1"), ("pad", "V6")])
COUNTER_RECORD = np.dtype([("producer", "<u4"), ("expected", "<u4")])
assert HEADER.itemsize == 64 and BUFFER_RECORD.itemsize == 32 and WEIGHT_RECORD.itemsize == 32


class DType(enum.IntEnum):
    NONE = 0
    BF16 = 1
    F32 = 2
    I32 = 3
    FP8_E4M3 = 4

    @property
    def size(self) -> int:
        return {DType.NONE: 0, DType.BF16: 2, DType.F32: 4, DType.I32: 4, DType.FP8_E4M3: 1}[self]


class Kind(enum.IntEnum):
    CONTROL = 0  # the control block (buffer 0): step, position, tokens
    STATE = 1  # per-session, survives steps: KV caches, GDN states, conv rings
    ACTIVATION = 2  # one step's values; the allocator reuses their space


@dataclass
class BufferEntry:
    name: str
    rows: int
    cols: int
    dtype: DType
    kind: Kind
    offset: int = 0  # bytes into the arena, 256-aligned

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.dtype.size


@dataclass
class WeightEntry:
    name: str  # canonical tensor name (megakernel/model/tensors.py)
    rows: int
    cols: int
    dtype: DType
    scale_dtype: DType = DType.NONE  # fp8 weights: their block scales' dtype as stored
    offset: int = 0  # bytes into the weight arena
    scale_offset: int = NO_OFFSET

    @property
    def scale_bytes(self) -> int:
        """The bytes of its block scales (0 without)."""
        blocks = -(-self.rows // SCALE_BLOCK) * -(-self.cols // SCALE_BLOCK)
        return blocks * self.scale_dtype.size if self.scale_dtype != DType.NONE else 0

    @property
    def nbytes(self) -> int:
        """The weight's bytes, its block scales included."""
        return self.rows * self.cols * self.dtype.size + self.scale_bytes

    @property
    def end(self) -> int:
        """One past the weight's last byte in the weight arena, its block scales included."""
        end = self.offset + self.rows * self.cols * self.dtype.size
        return max(end, self.scale_offset + self.scale_bytes) if self.scale_bytes else end


@dataclass
class CounterEntry:
    name: str
    producer: int  # instruction index
    expected: int  # arrivals per step


@dataclass
class Program:
    words: list[Word]
    buffers: list[BufferEntry]
    weights: list[WeightEntry]
    counters: list[CounterEntry]
    rows: int
    sms: int
    meta: dict = field(default_factory=dict)

    @property
    def arena_bytes(self) -> int:
        return max((b.offset + b.nbytes for b in self.buffers), default=0)

    @property
    def state_end(self) -> int:
        """One past the session buffers' last byte: control and state come first in the arena
        (compiler/allocate.py)."""
        return max((b.offset + b.nbytes for b in self.buffers if b.kind != Kind.ACTIVATION), default=0)

    def gemv_weights(self, word: Word) -> list[WeightEntry]:
        """A GEMV word's weight segments: its weight-table entries or, with Flag.WORKING_VOCAB, the session's
        gathered head rows (bf16, no scales) as an entry of their own."""
        if word.flags & Flag.WORKING_VOCAB:
            b = self.buffers[word.buf_aux2]
            return [WeightEntry(b.name, b.rows, b.cols, DType.BF16)]
        return self.weights[word.weight_first:word.weight_first + word.weight_count]

    def session_layout(self) -> tuple:
        """(name, offset, bytes) of the session buffers (control and state): Programs that share a session
        lay them out identically."""
        return tuple((b.name, b.offset, b.nbytes) for b in self.buffers if b.kind != Kind.ACTIVATION)

    @property
    def weight_bytes(self) -> int:
        return max((w.end for w in self.weights), default=0)

    # --- bytes ------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        meta = json.dumps(self._names(), sort_keys=True).encode()
        header = np.zeros(1, HEADER)
        header[0] = (MAGIC, VERSION, len(self.words), len(self.buffers), len(self.weights), len(self.counters),
                     self.rows, self.sms, self.arena_bytes, self.weight_bytes, len(meta), b"")
        buffers = np.zeros(len(self.buffers), BUFFER_RECORD)
        for i, b in enumerate(self.buffers):
            buffers[i] = (b.offset, b.rows, b.cols, b.dtype, b.kind, b"")
        weights = np.zeros(len(self.weights), WEIGHT_RECORD)
        for i, w in enumerate(self.weights):
            weights[i] = (w.offset, w.scale_offset, w.rows, w.cols, w.dtype, w.scale_dtype, b"")
        counters = np.array([(c.producer, c.expected) for c in self.counters], COUNTER_RECORD)
        words = b"".join(word_mod.encode(w).tobytes() for w in self.words)
        return header.tobytes() + words + buffers.tobytes() + weights.tobytes() + counters.tobytes() + meta

    @classmethod
    def from_bytes(cls, data: bytes) -> Program:
        header = np.frombuffer(data, HEADER, count=1)[0]
        if header["magic"] != MAGIC or header["version"] != VERSION:
            raise ValueError(f"not a version-{VERSION} megakernel Program (magic {header['magic']!r})")
        pos = HEADER.itemsize
        n_words = int(header["n_words"])
        raw = np.frombuffer(data, "<u4", count=n_words * word_mod.WORD_U32, offset=pos).reshape(n_words, -1)
        words = [word_mod.decode(r) for r in raw]
        pos += n_words * WORD_BYTES
        tables = {}
        for name, dtype, count in (("buffers", BUFFER_RECORD, header["n_buffers"]),
                                   ("weights", WEIGHT_RECORD, header["n_weights"]),
                                   ("counters", COUNTER_RECORD, header["n_counters"])):
            tables[name] = np.frombuffer(data, dtype, count=int(count), offset=pos)
            pos += dtype.itemsize * int(count)
        names = json.loads(data[pos:pos + int(header["meta_bytes"])].decode())
        buffers = [BufferEntry(n, int(r["rows"]), int(r["cols"]), DType(r["dtype"]), Kind(r["kind"]), int(r["offset"]))
                   for n, r in zip(names["buffers"], tables["buffers"])]
        weights = [WeightEntry(n, int(r["rows"]), int(r["cols"]), DType(r["dtype"]), DType(r["scale_dtype"]),
                               int(r["offset"]), int(r["scale_offset"])) for n, r in zip(names["weights"], tables["weights"])]
        counters = [CounterEntry(n, int(r["producer"]), int(r["expected"]))
                    for n, r in zip(names["counters"], tables["counters"])]
        return cls(words, buffers, weights, counters, int(header["rows"]), int(header["sms"]), names["meta"])

    def _names(self) -> dict:
        return {"buffers": [b.name for b in self.buffers], "weights": [w.name for w in self.weights],
                "counters": [c.name for c in self.counters], "meta": self.meta}

    # --- human and machine readable forms ------------------------------------------------------------
    def listing(self) -> str:
        lines = [(f"# program: {len(self.words)} words, rows M={self.rows}, sms G={self.sms}, "
                  f"{len(self.buffers)} buffers ({self.arena_bytes:,} arena bytes), {len(self.weights)} weights "
                  f"({self.weight_bytes:,} bytes), {len(self.counters)} counters")]
        for i, w in enumerate(self.words):
            lines.append(self.line(i, w))
        return "\n".join(lines)

    def line(self, index: int, w: Word) -> str:
        layer = "  -" if w.layer == NO_LAYER else f"{w.layer:3d}"
        shape = f"{w.n}x{w.k}" if w.k else f"{w.n}"
        tiles = f"tiles {w.tiles}"
        split = f" rows/tile {w.tile_rows} S={w.k_slices}" if w.opcode in GEMV_OPS | GEMM_OPS else ""
        rows = f"R{w.chunk_rows}" if w.opcode in PROMPT_OPS else f"M{w.rows}"  # a prompt chunk's most rows
        waits = " ".join(_wait_text(wt) for wt in w.waits) or "-"
        signal = f"c{w.signal_base}" + (f"..c{w.signal_base + w.signal_count - 1}" if w.signal_count > 1 else "")
        bufs = ",".join(self.buffers[b].name for b in (w.buf_in, w.buf_out) if b != NO_BUFFER)
        return (f"{index:4d} {w.opcode.name:<24} L{layer} {rows} {shape:>13} {tiles:<14}{split:<22} "
                f"wait {waits:<28} signal {signal} (+{w.signal_expected}/step)  [{bufs}]")

    def to_json(self) -> dict:
        def word_dict(w: Word) -> dict:
            d = asdict(w)
            d["opcode"] = w.opcode.name
            d["waits"] = [{**asdict(wt), "mode": wt.mode.name} for wt in w.waits]
            return d
        histogram: dict[str, int] = {}
        for w in self.words:
            histogram[w.opcode.name] = histogram.get(w.opcode.name, 0) + 1
        return {
            "words": len(self.words), "opcodes": histogram, "counters": len(self.counters),
            "arena_bytes": self.arena_bytes, "weight_bytes": self.weight_bytes, "rows": self.rows, "sms": self.sms,
            "meta": self.meta,
            "program": [word_dict(w) for w in self.words],
            "buffers": [{**asdict(b), "dtype": b.dtype.name, "kind": b.kind.name} for b in self.buffers],
            "weights": [{**asdict(w), "dtype": w.dtype.name, "scale_dtype": w.scale_dtype.name} for w in self.weights],
        }


def _wait_text(w) -> str:
    rng = f"c{w.base}" + (f"..c{w.base + w.count - 1}" if w.count > 1 else "")
    mode = "" if w.mode == WaitMode.ALL else "/slice"
    lag = "" if w.lag == 0 else f"@-{w.lag}"
    return f"{rng}{mode}{lag}"
