"""A CuPy memory hook that counts device allocations (tests/gpu: the no-allocation checks)."""

from cupy.cuda import memory_hook


class Allocations(memory_hook.MemoryHook):
    """Counts CuPy's pool mallocs and frees and the pool's own device allocations (cudaMalloc)."""

    name = "Allocations"

    def __init__(self):
        self.mallocs = self.frees = self.device_allocs = 0

    def malloc_postprocess(self, **kwargs):
        self.mallocs += 1

    def free_postprocess(self, **kwargs):
        self.frees += 1

    def alloc_postprocess(self, **kwargs):
        self.device_allocs += 1
