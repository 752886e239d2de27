"""A checkpoint's files as untrusted input: a regular file (not a directory, FIFO, device or a symlink
loop) of bounded size, and its JSON parsed strictly (no NaN or Infinity, no duplicate keys, bounded
nesting). Each failure is one line naming the file, raised as the caller's error class.
"""

from __future__ import annotations

import json
import os
import stat

from ..errors import MegakernelError

MAX_CONFIG_BYTES = 1 << 20  # config.json, generation_config.json: a few KB in the published release
MAX_INDEX_BYTES = 64 << 20  # model.safetensors.index.json: ~100 KB for the 27B's 1,273 tensors


def check_regular_file(path: str | os.PathLike, error: type[MegakernelError], expected: str = "a file") -> int:
    """The size of `path` if it is a regular file (symlinks followed, as a Hugging Face cache snapshot
    needs); a missing path, a dangling symlink, a directory or a special file raise `error` in one line."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise error(f"{path}: dangling symlink (its target {os.readlink(path)} does not exist)") from None
        raise error(f"{path}: file not found") from None
    except OSError as e:  # a symlink loop, a path through a file, no permission
        raise error(f"{path}: cannot be read ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{path}: is a directory, expected {expected}")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{path}: is not a regular file")
    return st.st_size


class DuplicateKey(ValueError):
    """A JSON object names a key twice (the message is the key's repr)."""


def no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    """json.loads object_pairs_hook: a repeated key is an error, not silently the last value."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(repr(key))
        out[key] = value
    return out


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes, where: str, error: type[MegakernelError]) -> object:
    """Strict JSON: NaN / Infinity and duplicate keys refused; nesting too deep for the parser is one line."""
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=no_duplicate_keys)
    except RecursionError:
        raise error(f"{where}: not valid JSON (nested too deeply)") from None
    except DuplicateKey as e:
        raise error(f"{where}: not valid JSON (key {e} twice)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, the hooks above
        raise error(f"{where}: not valid JSON ({' '.join(str(e).split())})") from None


def read_json(path: str | os.PathLike, error: type[MegakernelError], max_bytes: int = MAX_CONFIG_BYTES) -> object:
    """The strictly parsed JSON of a regular file of at most `max_bytes` bytes."""
    path = os.fspath(path)
    size = check_regular_file(path, error, "a JSON file")
    if size > max_bytes:
        raise error(f"{path}: {size} bytes, over the {max_bytes}-byte limit for this file")
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)  # the file may have grown since the stat
    except OSError as e:
        raise error(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(raw) > max_bytes:
        raise error(f"{path}: over the {max_bytes}-byte limit for this file")
    return parse_json(raw, path, error)
