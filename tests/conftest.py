import functools

import pytest

from megakernel.config import preset
from megakernel.synthetic import synthetic_weights


@functools.cache
def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU here"
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_weights():
    """synthetic:tiny:0, built once per test session (a few seconds each time on the 2-core CI machine);
    read-only, so no test can change what another sees."""
    weights = synthetic_weights(preset("tiny"), seed=0)
    for tensor in weights.tensors.values():
        tensor.flags.writeable = False
    return weights
