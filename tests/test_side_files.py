"""A checkpoint's JSON side files as hostile input (megakernel/model/side_files.py, config.load_config): every
corruption is one ConfigError line naming the file or the field, or a clean load; never another exception,
a hang, or unbounded reading."""

import copy
import json
import os
import random
import time

import pytest

from megakernel.model import side_files
from megakernel.model.checkpoint_writer import config_json
from megakernel.model.config import ModelConfig, load_config, preset
from megakernel.errors import ConfigError


def write_checkpoint_configs(directory, config=None, generation=None):
    (directory / "config.json").write_text(json.dumps(config_json(preset("tiny")) if config is None else config))
    if generation is not None:
        (directory / "generation_config.json").write_text(json.dumps(generation))


def one_line_error(directory) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(directory)
    message = str(e.value)
    assert "\n" not in message and message, message
    return message


@pytest.mark.parametrize("make, message", [
    (lambda p: os.mkdir(p), "is a directory, expected a JSON file"),
    (lambda p: os.mkfifo(p), "is not a regular file"),  # a reader would block on it forever
    (lambda p: os.symlink(p.name, p), "cannot be read"),  # a symlink loop
    (lambda p: os.symlink("never-downloaded", p), "dangling symlink"),
    (lambda p: p.write_bytes(b" " * (side_files.MAX_CONFIG_BYTES + 1)), "over the 1048576-byte limit"),
    (lambda p: p.write_bytes(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
    (lambda p: p.write_bytes(b'{"hidden_size": NaN}'), "NaN is not a JSON number"),
    (lambda p: p.write_bytes(b'{"rope_theta": Infinity}'), "Infinity is not a JSON number"),
    (lambda p: p.write_bytes(b'{"a": 1, "a": 2}'), "key 'a' twice"),
    (lambda p: p.write_bytes(b"\xff\xfe{}"), "not valid JSON"),
])
@pytest.mark.parametrize("name", ["config.json", "generation_config.json"])
def test_a_side_file_that_is_not_a_small_regular_json_file_is_one_line(tmp_path, make, message, name):
    if name == "generation_config.json":
        write_checkpoint_configs(tmp_path)
    make(tmp_path / name)
    started = time.monotonic()
    error = one_line_error(tmp_path)
    assert error.startswith(str(tmp_path / name) + ": ") and message in error, error
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("field, value, message", [
    ("rms_norm_eps", True, "'rms_norm_eps' must be a finite number"),  # a JSON boolean is not a number
    ("rms_norm_eps", "1e-6", "'rms_norm_eps' must be a finite number"),
    ("rms_norm_eps", 0.0, "'rms_norm_eps' must be a finite number above 0"),
    ("rms_norm_eps", 2.0, "and at most 1.0"),
    ("hidden_size", 256.0, "'hidden_size' must be a positive integer"),
    ("hidden_size", 1 << 40, "hidden_size must be an integer in"),
    ("num_hidden_layers", False, "'num_hidden_layers' must be a positive integer"),
    ("layer_types", 4, "'layer_types' must be a list of strings"),
    ("layer_types", [1, 2, 3, 4], "'layer_types' must be a list of strings"),
    ("rope_parameters", [10000000], "'rope_parameters' must be a JSON object"),
    ("tie_word_embeddings", "false", "'tie_word_embeddings' must be true or false"),
    ("eos_token_id", [248046, "x"], "'eos_token_id' must be a token id"),
    ("eos_token_id", -1, "'eos_token_id' must be a token id"),
    ("linear_conv_kernel_dim", 16, "linear_conv_kernel_dim 16 (supported: at most 8)"),
])
def test_a_field_of_the_wrong_type_or_range_is_named(tmp_path, field, value, message):
    raw = config_json(preset("tiny"))
    raw["text_config"][field] = value
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert message in one_line_error(tmp_path)


def test_non_finite_numbers_are_refused_from_a_parsed_dict_too():
    """JSON files cannot carry NaN or Infinity (parse_json refuses them); a dict built in Python can."""
    from megakernel.model.config import config_from_hf_dict

    for value in (float("inf"), float("nan")):
        raw = config_json(preset("tiny"))
        raw["text_config"]["rms_norm_eps"] = value
        with pytest.raises(ConfigError, match="'rms_norm_eps' must be a finite number"):
            config_from_hf_dict(raw)


def test_generation_config_must_hold_an_object_of_token_ids(tmp_path):
    write_checkpoint_configs(tmp_path, generation={"eos_token_id": [248046, 248044]})
    assert load_config(tmp_path).eos_token_ids == (248046, 248044)
    for bad, message in (([1, 2], "must hold a JSON object"), ({"eos_token_id": 1.5}, "must be a token id"),
                         ({"eos_token_id": [True]}, "must be a token id")):
        write_checkpoint_configs(tmp_path, generation=bad)
        assert message in one_line_error(tmp_path)


HOSTILE_VALUES = [None, True, False, 0, -1, 1, 3, 7, 2 ** 31, 2 ** 64, -2 ** 63, 0.0, -0.5, 0.5, 1e-300, 1e300,
                  "", "5120", "nan", [], [0], [1, 2], [[[]]], {}, {"a": 1}, {"rope_theta": None}]


def corrupt(raw: dict, rng: random.Random) -> dict:
    """One random corruption of a nested config.json: a value replaced by a hostile one, a key dropped, or
    a key added, anywhere in the object tree."""
    raw = copy.deepcopy(raw)
    paths = []

    def walk(obj, path):
        if isinstance(obj, dict):
            for key, value in obj.items():
                paths.append(path + [key])
                walk(value, path + [key])

    walk(raw, [])
    path = rng.choice(paths)
    parent = raw
    for key in path[:-1]:
        parent = parent[key]
    action = rng.random()
    if action < 0.8:
        parent[path[-1]] = rng.choice(HOSTILE_VALUES)
    elif action < 0.9:
        del parent[path[-1]]
    else:
        parent["unexpected_" + str(rng.randrange(100))] = rng.choice(HOSTILE_VALUES)
    return raw


def test_random_corruptions_of_config_json_give_one_line_or_a_clean_load(tmp_path):
    """The property: whatever a corruption does, load_config returns a ModelConfig or raises ConfigError in
    one line, quickly. 400 corruptions from a fixed seed, each applied one to three times (negative control:
    the corruptions do reach the loader, most are refused)."""
    rng = random.Random(20261201)
    base = config_json(preset("tiny"))
    refused = 0
    started = time.monotonic()
    for _ in range(400):
        raw = base
        for _ in range(rng.randint(1, 3)):
            raw = corrupt(raw, rng)
        (tmp_path / "config.json").write_text(json.dumps(raw))
        try:
            assert isinstance(load_config(tmp_path), ModelConfig)
        except ConfigError as e:
            assert "\n" not in str(e) and str(e)
            refused += 1
    assert 200 < refused < 400, refused  # most corruptions are refused; unknown extra keys are not
    assert time.monotonic() - started < 60


def test_random_truncations_and_byte_flips_give_one_line_or_a_clean_load(tmp_path):
    rng = random.Random(7)
    text = json.dumps(config_json(preset("tiny"))).encode()
    for _ in range(200):
        data = bytearray(text[:rng.randrange(len(text) + 1)] if rng.random() < 0.5 else text)
        for _ in range(rng.randint(0, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        (tmp_path / "config.json").write_bytes(bytes(data))
        try:
            load_config(tmp_path)
        except ConfigError as e:  # the file's path (unreadable JSON), or the field and its value
            assert "\n" not in str(e) and str(e)


@pytest.mark.parametrize("make, message", [
    (lambda p: os.mkdir(p), "is a directory, expected tokenizer.json"),
    (lambda p: os.mkfifo(p), "is not a regular file"),
    (lambda p: os.symlink(p.name, p), "cannot be read"),
])
def test_a_tokenizer_json_that_is_not_a_regular_file_is_one_line_not_the_built_in_tokenizer(tmp_path, make, message):
    from megakernel.errors import CheckpointError
    from megakernel.model.tokenizer import load_tokenizer

    make(tmp_path / "tokenizer.json")
    with pytest.raises(CheckpointError, match=message) as e:
        load_tokenizer(tmp_path)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(tmp_path / "tokenizer.json"))


@pytest.mark.parametrize("make, message", [
    (lambda p: os.mkfifo(p), "is not a regular file"),
    (lambda p: p.write_bytes(b'{"text_config": {"hidden_size": NaN}}'), "NaN is not a JSON number"),
])
def test_the_cli_reports_a_hostile_config_json_in_one_line_with_status_2(tmp_path, capsys, make, message):
    from megakernel.cli import main

    make(tmp_path / "config.json")
    code = main(["info", "--model", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
