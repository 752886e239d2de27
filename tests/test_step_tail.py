"""experiments/step_tail.py on CPU: a tile slow in every layer shows in its kind's profile, and the
profile's even/odd-layer correlation tells a pattern that repeats from one that does not."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from experiment_tools import load_experiment

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "step_tail.py"


@pytest.fixture(scope="module")
def step_tail():
    return load_experiment("step_tail")


def archive(slow_tile, layers=6, tiles=5, seed=0):
    """Stamps of `layers` gate_up words: every tile's passes take 1000 clocks (plus noise), tile
    `slow_tile` 1100 (None: no tile slower than the others), and each ends as its passes do."""
    rng = np.random.default_rng(seed)
    s = np.zeros((layers, tiles + 2, 10), dtype=np.uint64)  # two unused rows past the tiles
    for j in range(layers):
        for b in range(tiles):
            passes = 1000 + (100 if b == slow_tile else 0) + int(rng.integers(0, 5))
            s[j, b, 1], s[j, b, 3] = 500, 500 + passes
            s[j, b, 5] = 10 + b
            s[j, b, 6], s[j, b, 7] = 10**6, 10**6 + 1000 * passes  # ns: 1 us a clock, to read easily
    names = np.array([f"L{j}.gate_up" for j in range(layers)])
    return s, names, np.full(layers, tiles)


def test_a_tile_slow_in_every_layer_shows_in_the_profile(step_tail):
    s, names, tiles = archive(slow_tile=3)
    row = step_tail.profiles(s, names, tiles)["gate_up"]
    assert row["words"] == 6 and row["tiles"] == 5
    assert max(range(5), key=lambda b: row["passes_relative"][b]) == 3
    assert row["passes_relative"][3] == pytest.approx(1.1, abs=0.01)
    assert row["end_after_median_us"][3] == pytest.approx(100, abs=6)  # 100 clocks = 100 us here
    assert row["even_odd_correlation"] > 0.9
    assert row["sm_of_tile"] == [10, 11, 12, 13, 14]


def test_noise_alone_does_not_correlate(step_tail):
    s, names, tiles = archive(slow_tile=None, layers=40, seed=3)
    row = step_tail.profiles(s, names, tiles)["gate_up"]
    assert abs(row["even_odd_correlation"]) < 0.9


def test_the_script_writes_json_and_refuses_a_wrong_file(tmp_path):
    s, names, tiles = archive(slow_tile=1)
    path = tmp_path / "step_stamps_m1.npz"
    np.savez_compressed(path, stamps=s, names=names, tiles=tiles)
    subprocess.run([sys.executable, str(SCRIPT), str(path), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    result = json.loads((tmp_path / "step_tail.json").read_text())
    assert result["kinds"]["gate_up"]["tiles"] == 5
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an archive")
    run = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert run.returncode != 0 and "is not a tile_phases --raw archive" in run.stderr
