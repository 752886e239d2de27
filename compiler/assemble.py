"""Assembly: the partitioned, allocated instructions -> a Program (tables and encoded words).

Waits and counters are left empty here; compiler/dependencies.py fills them in.
"""

from __future__ import annotations

from isa import GEMM_OPS, GEMV_OPS, NO_BUFFER, NO_LAYER, PROMPT_OPS, BufferEntry, DType, Program, WeightEntry, Word
from isa.opcodes import PARAMS
from isa.word import BUFFER_ROLES, f32_bits
from megakernel.model.config import ModelConfig
from megakernel.model.tensors import F8, F32, scale_name, tensor_specs

from .allocate import align
from .ir import Lowered
from .tiling import single_segment

_DTYPES = {F8: DType.FP8_E4M3, "BF16": DType.BF16, F32: DType.F32}


def _weight_table(names: tuple[str, ...], c: ModelConfig) -> tuple[list[WeightEntry], dict[str, int]]:
    specs = {s.name: s for s in tensor_specs(c)}
    entries, top = [], 0
    for name in names:
        spec = specs[name]
        rows, cols = spec.shape[0], spec.numel // spec.shape[0]
        entry = WeightEntry(name, rows, cols, _DTYPES[spec.dtype], offset=top)
        top = align(top + spec.nbytes)
        if spec.is_fp8:
            scale = specs[scale_name(name)]
            entry.scale_dtype, entry.scale_offset = DType.BF16, top
            top = align(top + scale.nbytes)
        entries.append(entry)
    return entries, {e.name: i for i, e in enumerate(entries)}


def assemble(low: Lowered, c: ModelConfig, offsets: dict[str, int], sms: int, meta: dict,
             weight_names: tuple[str, ...]) -> Program:
    """`weight_names`: the config's weight table (compiler/build.py weight_order), every name an
    instruction uses among them; an instruction's weights must be consecutive entries in its order."""
    order = ["ctrl"] + [n for n in low.buffers if n != "ctrl"]
    buffer_id = {name: i for i, name in enumerate(order)}
    buffers = [BufferEntry(n, low.buffers[n].rows, low.buffers[n].cols, low.buffers[n].dtype, low.buffers[n].kind,
                           offsets[n]) for n in order]
    weights, weight_id = _weight_table(weight_names, c)
    words = []
    for ins in low.instrs:
        ids = [weight_id[name] for name in ins.weights]
        if ids != list(range(ids[0], ids[0] + len(ids)) if ids else []):
            raise ValueError(f"{ins.name}: weights {ins.weights} are not consecutive in the weight table")
        ids = {role: buffer_id[name] for role, name in ins.bufs.items()}
        param_values = []
        for name, kind in PARAMS[ins.op]:
            value = ins.params[name]
            if (kind == "w") != isinstance(value, str):
                raise ValueError(f"{ins.name}: parameter {name} ({kind!r}) = {value!r}: weights by name, nothing else")
            param_values.append(weight_id[value] if kind == "w" else f32_bits(value) if kind == "f" else int(value))
        words.append(Word(
            ins.op, flags=int(ins.flags), layer=NO_LAYER if ins.layer < 0 else ins.layer,
            rows=0 if ins.op in PROMPT_OPS else low.rows, chunk_rows=low.rows if ins.op in PROMPT_OPS else 0,
            n=ins.n, k=ins.k, tile_rows=ins.tile_rows, k_slices=ins.k_slices, tiles=ins.tiles,
            arrival_count=ins.split_groups,
            weight_first=weight_id[ins.weights[0]] if ins.weights else 0, weight_count=len(ins.weights),
            **{f"buf_{role}": ids.get(role, NO_BUFFER) for role in BUFFER_ROLES},
            params=tuple(param_values)))
    for w, ins in zip(words, low.instrs, strict=True):
        if w.opcode in GEMV_OPS | GEMM_OPS and single_segment(w):  # the device takes the segment's rows from n
            rows = weights[w.weight_first].rows if w.weight_count else low.buffers[ins.bufs["aux2"]].rows
            if rows != w.n:
                raise ValueError(f"{ins.name}: n = {w.n}, but its one weight segment has {rows} rows")
    names = [ins.name for ins in low.instrs]
    return Program(words, buffers, weights, [], low.rows, sms, {**meta, "instructions": names})
