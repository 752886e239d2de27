import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from megakernel.model.config import preset
from megakernel.model.synthetic import synthetic_weights

GPU_TESTS = Path(__file__).resolve().parent / "gpu"
# The CUDA runtime's answers that mean "no GPU here": cudaErrorInsufficientDriver (no driver loaded at all)
# and cudaErrorNoDevice. Any other error is a broken set-up, and must not pass as a skip.
NO_DEVICE_STATUS = (35, 100)
SESSION_CACHE = "MEGAKERNEL_TEST_SESSION_CACHE"


def gpu_required() -> bool:
    """MEGAKERNEL_REQUIRE_GPU=1 (experiments/gpu_run.sh sets it): a GPU test that is skipped fails instead."""
    return os.environ.get("MEGAKERNEL_REQUIRE_GPU", "") == "1"


@functools.cache
def gpu_available() -> bool:
    """Whether CuPy sees a device. False only where CuPy is not installed or the runtime says there is no
    driver or no device; a CuPy that is installed but fails to import, or any other CUDA error, is raised."""
    if importlib.util.find_spec("cupy") is None:
        return False
    import cupy

    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError as error:
        if error.status in NO_DEVICE_STATUS:
            return False
        raise


def pytest_configure(config):
    """One cache directory for the test session (the built tokenizer.json, its token table, the synthetic
    weight sets of synthetic_cache.py): tests never read or write the user's cache, and every subprocess a
    test starts shares this one, so tiny's weights are generated once per session, not once per command."""
    if SESSION_CACHE in os.environ:  # a pytest run inside a test (pytester): the outer session's cache
        return
    config._megakernel_cache = tempfile.mkdtemp(prefix="megakernel-test-cache-")
    os.environ["MEGAKERNEL_CACHE"] = os.environ[SESSION_CACHE] = config._megakernel_cache


def pytest_unconfigure(config):
    if hasattr(config, "_megakernel_cache"):
        shutil.rmtree(config._megakernel_cache, ignore_errors=True)
        del os.environ[SESSION_CACHE]


def is_gpu_test(path) -> bool:
    return GPU_TESTS in Path(str(path)).resolve().parents


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_gpu_test(item.path):
            item.add_marker(pytest.mark.gpu)
    if gpu_available():
        return
    if gpu_required():
        raise pytest.UsageError("MEGAKERNEL_REQUIRE_GPU=1, but CuPy sees no GPU on this machine")
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _skip_fails(report, what: str) -> None:
    report.outcome = "failed"
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
    report.longrepr = f"MEGAKERNEL_REQUIRE_GPU=1: {what} was skipped ({reason})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.skipped and gpu_required() and "gpu" in item.keywords:
        _skip_fails(report, f"GPU test {item.nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A GPU test module that skips itself (pytest.importorskip("cupy")) fails too where a GPU is required."""
    report = (yield).get_result()
    if report.skipped and gpu_required() and is_gpu_test(collector.path):
        _skip_fails(report, f"GPU test module {collector.nodeid}")


@pytest.fixture(scope="session")
def micro_weights():
    """synthetic:tiny's structure with a 2,048-row vocabulary (checkpoint_tools.micro_config), built once per
    test session: every layer kind, the MTP head and every program shape of tiny at ~1/120 of its head. For
    the interpreter-heavy tests, whose properties (bit identities, rollbacks) do not depend on the vocabulary
    size; tests that tokenize text keep tiny_weights."""
    from checkpoint_tools import micro_config

    weights = synthetic_weights(micro_config(), seed=0)
    for tensor in weights.tensors.values():
        tensor.flags.writeable = False
    return weights


@pytest.fixture(scope="session")
def tiny_weights():
    """synthetic:tiny:0, built once per test session (a few seconds each time on the 2-core CI machine);
    read-only, so no test can change what another sees."""
    weights = synthetic_weights(preset("tiny"), seed=0)
    for tensor in weights.tensors.values():
        tensor.flags.writeable = False
    return weights
