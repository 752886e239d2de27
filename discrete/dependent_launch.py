"""Kernel launches with programmatic dependent launch (PDL; docs/DECISIONS.md D40), which CuPy's RawKernel
cannot ask for: `cuLaunchKernelEx` from the CUDA driver that CuPy has loaded, through ctypes, with the
launch attribute CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION. Such a launch may start while the
previous kernel on its stream still runs, so the kernel must wait for it before reading what it wrote
(every discrete kernel does: megakernel/runtime/cuda/common.cuh previous_launch_done). Captured into a CUDA
graph, the launches keep that overlap as programmatic edges.

The structures follow cuda.h (read in CUDA 13.0): CUlaunchAttribute is a 4-byte id, 4 bytes of padding and a
64-byte value union; CUlaunchConfig is the grid, the block, the dynamic shared bytes, the stream, the
attribute array and its length.
"""

from __future__ import annotations

import copy
import ctypes
import functools

import numpy as np

PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class LaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_ubyte * 64)]


class LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("num_attrs", ctypes.c_uint)]


def serialization_attribute(allowed: bool) -> LaunchAttribute:
    """The PDL attribute: `allowed` lets the launch overlap the previous kernel on its stream."""
    attr = LaunchAttribute(id=PROGRAMMATIC_STREAM_SERIALIZATION)
    ctypes.memmove(ctypes.addressof(attr.value), ctypes.byref(ctypes.c_int(int(allowed))), 4)
    return attr


def kernel_params(args) -> tuple:
    """(the void* array cuLaunchKernelEx takes, the values it points to, kept alive with it): device arrays
    (anything with .data.ptr) as pointers, NumPy int32 / uint32 scalars as 4-byte values, bytes as a
    by-value structure of that size (common.cuh LaunchProgram)."""
    values = []
    for a in args:
        if isinstance(a, bytes):
            values.append((ctypes.c_ubyte * len(a)).from_buffer_copy(a))
        elif hasattr(a, "data") and hasattr(a.data, "ptr"):
            values.append(ctypes.c_void_p(a.data.ptr))
        elif isinstance(a, np.int32):
            values.append(ctypes.c_int32(int(a)))
        elif isinstance(a, np.uint32):
            values.append(ctypes.c_uint32(int(a)))
        else:
            raise TypeError(f"kernel argument of type {type(a).__name__}: expected a device array, np.int32 or bytes")
    array = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    return array, values


@functools.cache
def _driver():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.cuLaunchKernelEx.restype = ctypes.c_int
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


class DependentLaunch:
    """One kernel launch, prepared once (kernel, grid, block, shared bytes, arguments), issued by `launch`
    on a stream with the PDL attribute set to `overlap`."""

    def __init__(self, kernel, grid: int, block: int, shared_bytes: int, args, overlap: bool = True):
        self.grid, self.shared_bytes = grid, shared_bytes
        function = getattr(kernel, "kernel", kernel)  # a CuPy RawKernel holds its cupy.cuda.Function
        self.function = ctypes.c_void_p(function.ptr)
        self.params, self._values = kernel_params(args)
        self.attribute = serialization_attribute(overlap)
        self.config = LaunchConfig(grid=(ctypes.c_uint * 3)(grid, 1, 1), block=(ctypes.c_uint * 3)(block, 1, 1),
                                   shared_bytes=shared_bytes, attrs=ctypes.pointer(self.attribute), num_attrs=1)

    def with_args(self, args) -> DependentLaunch:
        """The same launch (kernel, grid, block, shared bytes, overlap) with other arguments."""
        other = copy.copy(self)
        other.params, other._values = kernel_params(args)
        other.config = LaunchConfig.from_buffer_copy(self.config)  # launch() sets its own stream in it
        return other

    def launch(self, stream_ptr: int) -> None:
        self.config.stream = stream_ptr
        lib = _driver()
        result = lib.cuLaunchKernelEx(ctypes.byref(self.config), self.function, self.params, None)
        if result != 0:
            name = ctypes.c_char_p()
            lib.cuGetErrorName(result, ctypes.byref(name))
            raise RuntimeError(f"cuLaunchKernelEx failed: {(name.value or b'?').decode()} ({result})")


__all__ = ["DependentLaunch", "LaunchAttribute", "LaunchConfig", "kernel_params", "serialization_attribute"]
