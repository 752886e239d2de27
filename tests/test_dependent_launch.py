"""The PDL launch path on CPU (discrete/dependent_launch.py): the ctypes structures match cuda.h's layout, the
arguments reach the driver as it reads them, and every kernel the launcher starts with the attribute waits
for the launch before it (a kernel that did not could read its inputs before they are written)."""

import ctypes
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from discrete.dependent_launch import (PROGRAMMATIC_STREAM_SERIALIZATION, LaunchAttribute, LaunchConfig,
                                       kernel_params, serialization_attribute)
from discrete.launcher import GEMV_KERNEL, KERNEL_OF

ROOT = Path(__file__).resolve().parents[1]


def test_structures_match_cuda_h():
    # cuda.h (CUDA 13.0): CUlaunchAttribute {id; char pad[4]; union value (64 bytes)}, CUlaunchConfig {3
    # grid, 3 block, shared bytes: unsigned int; hStream; attrs; numAttrs}
    assert ctypes.sizeof(LaunchAttribute) == 72 and LaunchAttribute.value.offset == 8
    assert LaunchConfig.shared_bytes.offset == 24 and LaunchConfig.stream.offset == 32
    assert LaunchConfig.attrs.offset == 40 and LaunchConfig.num_attrs.offset == 48
    assert ctypes.sizeof(LaunchConfig) == 56


@pytest.mark.parametrize("allowed", [True, False])
def test_serialization_attribute(allowed):
    attr = serialization_attribute(allowed)
    assert attr.id == PROGRAMMATIC_STREAM_SERIALIZATION == 6
    assert int.from_bytes(bytes(attr.value)[:4], "little") == int(allowed)
    assert not any(bytes(attr.value)[4:])


def test_kernel_params_point_at_the_values():
    arena = SimpleNamespace(data=SimpleNamespace(ptr=0x7F00_0000_1000))
    program = bytes(range(200)) * 4  # a by-value structure (a launch program)
    array, _values = kernel_params((arena, np.int32(-3), np.uint32(7), program))
    assert len(array) == 4
    assert ctypes.c_uint64.from_address(array[0]).value == 0x7F00_0000_1000
    assert ctypes.c_int32.from_address(array[1]).value == -3
    assert ctypes.c_uint32.from_address(array[2]).value == 7
    assert ctypes.string_at(array[3], len(program)) == program


def test_kernel_params_refuse_other_types():
    with pytest.raises(TypeError, match="expected a device array, np.int32 or bytes"):
        kernel_params((3,))


def test_every_launched_kernel_waits_for_the_launch_before_it():
    # each kernel's first statement (after its shared-memory declarations) is launch_context, which copies
    # the launch program (a parameter) and then waits, before it returns the context every read of device
    # memory goes through
    source = (ROOT / "discrete" / "kernels.cu").read_text()
    launched = set(KERNEL_OF.values()) | {GEMV_KERNEL}
    for name in launched:
        m = re.search(rf'__global__ void [^\n]*\b{name}\(PROGRAM_ARGS[^\n]*\{{\n(.*?)\n}}', source, re.DOTALL)
        assert m, f"{name} not found in kernels.cu"
        lines = [line.strip() for line in m.group(1).strip().splitlines()]
        first = next(line for line in lines if "__shared__" not in line)
        assert first.startswith("const mk::Ctx ctx = mk::launch_context(arena, weights, launch, "), \
            f"{name} reads before waiting: {first!r}"
    common = (ROOT / "megakernel" / "runtime" / "cuda" / "common.cuh").read_text()
    body = re.search(r"Ctx launch_context\(.*?\{\n(.*?)\n}", common, re.DOTALL).group(1).splitlines()
    assert [line.strip() for line in body[-3:]] == ["__syncthreads();", "previous_launch_done();",
                                                   "return Ctx{arena, weights, reinterpret_cast<const u8*>(copy)};"]
    assert "arena" not in "".join(body[:-1])  # nothing before the wait touches device memory but the parameter
