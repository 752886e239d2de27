"""Small synthetic weight sets kept on disk (megakernel/model/synthetic_cache.py): the same bytes as generating
them, a damaged entry rebuilt, an unwritable cache harmless, large presets never written."""

import dataclasses

import numpy as np
import pytest

from checkpoint_tools import micro_config
from megakernel.model import synthetic_cache
from megakernel.model.synthetic import synthetic_weights
from megakernel.model.synthetic_cache import cached_synthetic_weights, entry_path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEGAKERNEL_CACHE", str(tmp_path))
    return tmp_path


def same_bytes(a, b) -> bool:
    return list(a.tensors) == list(b.tensors) and all(
        np.array_equal(a[n].view(np.uint8), b[n].view(np.uint8)) for n in a.tensors)


def test_a_second_call_reads_what_the_first_generated(cache):
    c = micro_config()
    first = cached_synthetic_weights(c, 3)
    assert entry_path(c, 3, False).is_dir() and not first.files  # generated, then written
    second = cached_synthetic_weights(c, 3)
    assert second.files  # memory-mapped from the cache
    assert second.config == c and second.source == f"synthetic:{c.name}:3"
    assert same_bytes(second, synthetic_weights(c, 3)) and same_bytes(first, second)
    assert not same_bytes(second, synthetic_weights(c, 4))  # the comparison can fail


def test_the_entry_names_everything_the_bytes_depend_on(cache):
    c = micro_config()
    names = {entry_path(c, 0, False), entry_path(c, 1, False), entry_path(c, 0, True),
             entry_path(dataclasses.replace(c, rms_norm_eps=1e-5), 0, False)}
    assert len(names) == 4


@pytest.mark.parametrize("damage", ["truncate", "drop_config", "garbage"])
def test_a_damaged_entry_is_rebuilt(cache, damage):
    c = micro_config()
    cached_synthetic_weights(c, 5)
    path = entry_path(c, 5, False)
    shard = next(path.glob("*.safetensors"))
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    elif damage == "drop_config":
        (path / "config.json").unlink()
    else:
        shard.write_bytes(b"\0" * 64)
    again = cached_synthetic_weights(c, 5)
    assert same_bytes(again, synthetic_weights(c, 5))
    assert cached_synthetic_weights(c, 5).files  # rebuilt on disk, read from it next time


def test_an_unwritable_cache_costs_time_only(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MEGAKERNEL_CACHE", str(blocker / "cache"))
    c = micro_config()
    assert same_bytes(cached_synthetic_weights(c, 2), synthetic_weights(c, 2))
    assert not (blocker / "cache").exists()


def test_large_presets_are_not_written(cache, monkeypatch):
    monkeypatch.setattr(synthetic_cache, "MAX_CACHED_BYTES", 1000)
    c = micro_config()
    assert same_bytes(cached_synthetic_weights(c, 0), synthetic_weights(c, 0))
    assert not any(cache.iterdir())
