"""The GPU gate of tests/conftest.py, run on a throwaway test tree (pytest's pytester): without a GPU the
GPU tests are skipped; with MEGAKERNEL_REQUIRE_GPU=1 (experiments/gpu_run.sh) no GPU is an error and
any skip of a GPU test, in the test or by its module (importorskip), is a failure."""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
GPU_MODULES = {
    "test_runs": "def test_runs():\n    assert True\n",
    "test_skips_itself": "import pytest\n\ndef test_skips():\n    pytest.skip('no cupy here')\n",
}
MODULE_SKIP = "import pytest\npytest.importorskip('a_module_that_is_not_there')\n\ndef test_never():\n    pass\n"


def tree(pytester, gpu: bool, modules: dict[str, str]) -> None:
    """This conftest, its GPU probe answering `gpu`, and the GPU test modules under gpu/."""
    pytester.makeconftest(CONFTEST + f"\n\ndef gpu_available():\n    return {gpu}\n")
    gpu_dir = pytester.mkdir("gpu")
    for name, body in modules.items():
        (gpu_dir / f"{name}.py").write_text(body)
    pytester.makepyfile(test_cpu="def test_cpu():\n    assert True\n")


def test_without_a_gpu_the_gpu_tests_are_skipped(pytester, monkeypatch):
    monkeypatch.delenv("MEGAKERNEL_REQUIRE_GPU", raising=False)
    tree(pytester, gpu=False, modules=GPU_MODULES)
    pytester.runpytest().assert_outcomes(passed=1, skipped=2)


def test_required_without_a_gpu_is_one_clear_error(pytester, monkeypatch):
    monkeypatch.setenv("MEGAKERNEL_REQUIRE_GPU", "1")
    tree(pytester, gpu=False, modules=GPU_MODULES)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*MEGAKERNEL_REQUIRE_GPU=1, but CuPy sees no GPU*"])


def test_required_a_skipped_gpu_test_fails(pytester, monkeypatch):
    monkeypatch.setenv("MEGAKERNEL_REQUIRE_GPU", "1")
    tree(pytester, gpu=True, modules=GPU_MODULES)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*MEGAKERNEL_REQUIRE_GPU=1: GPU test *test_skips* was skipped (*no cupy here*"])


def test_required_a_gpu_module_that_skips_itself_fails(pytester, monkeypatch):
    monkeypatch.setenv("MEGAKERNEL_REQUIRE_GPU", "1")
    tree(pytester, gpu=True, modules={"test_module_skip": MODULE_SKIP})
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)  # a collection error stops the session before any test runs
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*MEGAKERNEL_REQUIRE_GPU=1: GPU test module *test_module_skip.py was skipped*"])


def test_not_required_a_skip_stays_a_skip(pytester, monkeypatch):
    monkeypatch.setenv("MEGAKERNEL_REQUIRE_GPU", "0")
    tree(pytester, gpu=True, modules={**GPU_MODULES, "test_module_skip": MODULE_SKIP})
    pytester.runpytest().assert_outcomes(passed=2, skipped=2)


FAKE_CUPY = '''
import types


class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        super().__init__(f"cuda status {status}")
        self.status = status


def getDeviceCount():
    raise CUDARuntimeError({status})


cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(CUDARuntimeError=CUDARuntimeError,
                                                           getDeviceCount=getDeviceCount))
'''


@pytest.mark.parametrize("status,outcome", [(100, "skipped"), (35, "skipped"), (999, "error")])
def test_the_gpu_probe_skips_only_when_there_is_no_device(pytester, monkeypatch, status, outcome):
    """The real probe over a stand-in CuPy whose runtime answers `status`: no device (100) and no driver
    (35) skip the GPU tests, any other CUDA error stops the run; so does a CuPy that fails to import."""
    monkeypatch.delenv("MEGAKERNEL_REQUIRE_GPU", raising=False)
    pytester.makeconftest(CONFTEST)
    (pytester.mkdir("gpu") / "test_runs.py").write_text(GPU_MODULES["test_runs"])
    pytester.makepyfile(cupy=FAKE_CUPY.format(status=status))
    pytester.syspathinsert()
    result = pytester.runpytest()
    if outcome == "skipped":
        result.assert_outcomes(skipped=1)
    else:
        assert result.ret == pytest.ExitCode.INTERNAL_ERROR and "cuda status 999" in result.stdout.str()


def test_a_cupy_that_fails_to_import_is_not_a_skip(pytester, monkeypatch):
    monkeypatch.delenv("MEGAKERNEL_REQUIRE_GPU", raising=False)
    pytester.makeconftest(CONFTEST)
    (pytester.mkdir("gpu") / "test_runs.py").write_text(GPU_MODULES["test_runs"])
    pytester.makepyfile(cupy="raise ImportError('libcudart.so.13: cannot open shared object file')")
    pytester.syspathinsert()
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR and "libcudart.so.13" in result.stdout.str()
