"""The PDL launch path on CPU (discrete/dependent_launch.py): the ctypes structures match cuda.h's layout, the
arguments reach the driver as it reads them, and every kernel the launcher starts with the attribute waits
for the launch before it (a kernel that did not could read its inputs before they are written)."""

import ctypes
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from discrete.dependent_launch import (PROGRAMMATIC_STREAM_SERIALIZATION, DependentLaunch, LaunchAttribute,
                                       LaunchConfig, kernel_params, serialization_attribute)
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


def kernel_statements(source: str, name: str) -> list[str]:
    """The statements of a discrete kernel's body, after its shared-memory declarations."""
    m = re.search(rf'__global__ void [^\n]*\b{name}\(PROGRAM_ARGS[^\n]*\{{\n(.*?)\n}}', source, re.DOTALL)
    assert m, f"{name} not found in kernels.cu"
    return [line.strip() for line in m.group(1).strip().splitlines() if "__shared__" not in line]


def test_with_args_keeps_the_launch_and_changes_only_its_arguments():
    # experiments/graph_trace.py: the same launches with a trace slot in their launch programs
    launch = DependentLaunch(SimpleNamespace(ptr=0x1234), 7, 512, 4096, (np.int32(1), b"ab"), overlap=True)
    other = launch.with_args((np.int32(2), b"cd"))
    assert (other.grid, other.shared_bytes, other.function.value) == (7, 4096, 0x1234)
    assert list(other.config.grid) == [7, 1, 1] and list(other.config.block) == [512, 1, 1]
    assert other.config.shared_bytes == 4096 and other.config.attrs[0].id == PROGRAMMATIC_STREAM_SERIALIZATION
    assert ctypes.c_int32.from_address(launch.params[0]).value == 1
    assert ctypes.c_int32.from_address(other.params[0]).value == 2
    assert ctypes.string_at(other.params[1], 2) == b"cd" and ctypes.string_at(launch.params[1], 2) == b"ab"
    other.config.stream = 99  # what launch() sets: the original's config is its own
    assert launch.config.stream != 99


def test_every_launched_kernel_waits_for_the_launch_before_it():
    # each kernel's first statement (after its shared-memory declarations) is launch_context, which copies
    # the launch program (a parameter) and then waits, before it returns the context every read of device
    # memory goes through; the GEMV tile alone primes its weights first (which no launch writes), between
    # launch_context_before_wait (the same copy without the wait) and its own wait, and the GDN tile there
    # its state, conv ring rows and norm weight (gdn_reads_ahead: no launch of the pass writes them, D58)
    source = (ROOT / "discrete" / "kernels.cu").read_text()
    ahead = {GEMV_KERNEL: ["mk::gemv_main_weights(ctx, "], "tile_gdn": ["mk::GdnSmem& sm = ", "mk::gdn_reads_ahead(ctx, "]}
    for name in set(KERNEL_OF.values()) - set(ahead):
        first = kernel_statements(source, name)[0]
        assert first.startswith("const mk::Ctx ctx = mk::launch_context(arena, weights, launch, "), \
            f"{name} reads before waiting: {first!r}"
    for name, before in ahead.items():
        body = kernel_statements(source, name)
        assert body[0].startswith("const mk::Ctx ctx = mk::launch_context_before_wait(arena, weights, launch, "), body[0]
        assert all(line.startswith(b) for line, b in zip(body[1:], before)), (name, body)
        assert body[len(before) + 1] == "mk::previous_launch_done();", (name, body)
    common = (ROOT / "megakernel" / "runtime" / "cuda" / "common.cuh").read_text()
    bodies = {name: re.search(rf"Ctx {name}\(.*?\{{\n(.*?)\n}}", common, re.DOTALL).group(1).splitlines()
              for name in ("launch_context", "launch_context_before_wait")}
    assert [line.strip() for line in bodies["launch_context"]] == [
        "const Ctx ctx = launch_context_before_wait(arena, weights, launch, copy);", "previous_launch_done();",
        "graph_trace(launch, 1);", "return ctx;"]
    copy = bodies["launch_context_before_wait"]
    assert [line.strip() for line in copy[-2:]] == ["__syncthreads();",
                                                   "return Ctx{arena, weights, reinterpret_cast<const u8*>(copy)};"]
    assert "arena" not in "".join(copy[:-1])  # nothing before the wait touches device memory but the parameter


def test_every_kernel_stamps_the_graph_trace_at_its_start_wait_and_end():
    # experiments/graph_trace.py reads start, past the wait and end from every launch of the step (common.cuh
    # graph_trace: nothing unless built with MEGAKERNEL_GRAPH_TRACE)
    source = (ROOT / "discrete" / "kernels.cu").read_text()
    for name in set(KERNEL_OF.values()) | {GEMV_KERNEL}:
        assert kernel_statements(source, name)[-1] == "mk::graph_trace(launch, 2);", name
    for name in (GEMV_KERNEL, "tile_gdn"):
        body = kernel_statements(source, name)
        wait = body.index("mk::previous_launch_done();")
        assert body[wait + 1] == "mk::graph_trace(launch, 1);", name
    common = (ROOT / "megakernel" / "runtime" / "cuda" / "common.cuh").read_text()
    copy = re.search(r"Ctx launch_context_before_wait\(.*?\{\n(.*?)\n}", common, re.DOTALL).group(1)
    assert copy.strip().startswith("graph_trace(launch, 0);")
