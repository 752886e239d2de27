"""Sessions from a pool sized at start-up (issue 8): one device allocation holds `slots` session arenas;
create, fork and evict hand slots out and take them back, and allocate nothing.

A fork copies the parent's session state (DeviceSession.copy_from: GDN states, conv and gate rings,
hidden rows, control, and each KV cache's rows below its position). KV pages are copied, not shared
copy-on-write: the caches are contiguous per layer, not paged, and the copy is one memcpy per cache
(docs/DECISIONS.md D21 has its measured cost).

CuPy is imported inside the methods: the package imports on machines without a GPU.
"""

from __future__ import annotations

from compiler.allocate import align
from isa import Program

from .device import DeviceSession
from ..errors import InputError


class SessionPool:
    """`slots` sessions laid out for `program` (with `arena_bytes` of room, as DeviceSession)."""

    def __init__(self, program: Program, slots: int, arena_bytes: int = 0):
        import cupy

        if slots < 1:
            raise ValueError(f"a pool needs at least one slot, got {slots}")
        self.program, self.slots = program, slots
        # every slot starts where a buffer of the arena may
        self.slot_bytes = align(max(program.arena_bytes, arena_bytes))
        self.memory = cupy.zeros(slots * self.slot_bytes, dtype=cupy.uint8)
        self._free = list(range(slots - 1, -1, -1))
        self._slot_of: dict[int, int] = {}  # id(session) -> its slot

    @property
    def in_use(self) -> int:
        return len(self._slot_of)

    def create(self) -> DeviceSession:
        """A new session (state zeroed, activations poisoned) in a free slot."""
        if not self._free:
            raise InputError(f"all {self.slots} sessions of the pool are in use: evict one first")
        slot = self._free.pop()
        arena = self.memory[slot * self.slot_bytes:(slot + 1) * self.slot_bytes]
        session = DeviceSession(self.program, self.slot_bytes, arena=arena)
        self._slot_of[id(session)] = slot
        return session

    def fork(self, parent: DeviceSession) -> DeviceSession:
        """A new session that continues exactly as `parent` would."""
        child = self.create()
        child.copy_from(parent)
        return child

    def evict(self, session: DeviceSession) -> None:
        """Give the session's slot back; the session object is unusable afterwards."""
        slot = self._slot_of.pop(id(session), None)
        if slot is None:
            raise ValueError("this session does not hold a slot of this pool")
        session.arena = None
        self._free.append(slot)


__all__ = ["SessionPool"]
