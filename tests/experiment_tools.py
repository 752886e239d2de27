"""Loading an experiments/ script as a module in a CPU test (the scripts are not a package)."""

import importlib.util
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def load_experiment(name: str):
    """experiments/NAME.py as module NAME: registered in sys.modules (dataclasses look their module up
    there) and run with experiments/ on sys.path (scripts import their neighbours, e.g. bench_gemv)."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXPERIMENTS))
    return module
