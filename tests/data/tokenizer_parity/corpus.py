"""The parity corpus: a deterministic list of >= 2,000 strings, grouped by class, that exercises
what a byte-level BPE tokenizer can get wrong: ASCII prose with contractions, CJK, emoji (ZWJ
sequences, skin tones, flags, keycaps), combining marks (including sequences NFC changes), digits
of every Unicode number category, long whitespace runs (U+0085, U+3000, U+00A0, U+2028, ...),
code, special-token text inside prose, random mixtures of all of these, and hand-written edges.
build_corpus() returns [(cls, text)]; the same seed always gives the same corpus.

The corpus was first written in JavaScript (mulberry32 on 32-bit integers, Math.floor of a double):
this port keeps every draw in the same order, so corpus.jsonl is unchanged byte for byte. Python
evaluates the operands of `+` and call arguments left to right, as JavaScript does; keep it that
way when editing (a draw moved into a variable before an earlier one changes every later string).
"""
import re

_MASK = 0xFFFFFFFF


def _imul(a, b):
    """JavaScript's Math.imul: the low 32 bits of a * b (as unsigned here; every use is masked)."""
    return (a * b) & _MASK


class Rng:
    """mulberry32: a small seeded PRNG, so the corpus never depends on a library's generator."""

    def __init__(self, seed):
        self.a = seed & _MASK

    def next(self):
        self.a = (self.a + 0x6D2B79F5) & _MASK
        t = self.a
        t = _imul(t ^ (t >> 15), t | 1)
        t ^= (t + _imul(t ^ (t >> 7), t | 61)) & _MASK
        return (t ^ (t >> 14)) / 4294967296

    def int(self, n):
        return int(self.next() * n)  # floor: the product is never negative

    def pick(self, xs):
        return xs[self.int(len(xs))]


WORDS = (
    "the of and to in is was for that with as on be at by this had not are but from or have an they "
    "which one you were her all she there would their we him been has when who will more no if out so said what up "
    "its about into than them can only other new some could time these two may then do first any my now such like "
    "our over man me even most made after also did many before must through back years where much your way well down "
    "should because each just those people Mr how too little state good very make world still own see men work long "
    "get here between both life being under never day same another know while last might us great old year off come "
    "since against go came right used take three tokenizer merges vocabulary gradient reinforcement policy rollout "
    "Transformer attention Qwen Llama GPT HuggingFace PyTorch CUDA MPI don't can't won't it's I'm you're they've "
    "we'll she'd He's IT'S DON'T O'Neill rock'n'roll"
).split(" ")
PUNCT = [".", ",", "!", "?", ";", ":", " -", " --", "...", " (ok)", " \"quoted\"", " 'single'", " [x]", " {y}"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'Ll", "'rE",
                "'ſ", "'ſa", "’s", "'x", "''s", "'"]

CJK = ["我们", "今天", "天气", "很好", "机器学习", "强化学习", "分词器", "模型", "训练", "中文", "日本語", "ひらがな",
       "カタカナ", "東京", "こんにちは", "ありがとう", "한국어", "안녕하세요", "감사합니다", "서울", "汉字", "繁體字", "的", "是",
       "不", "了", "人", "在", "有", "这个", "那个", "为什么", "怎么样", "𠀀𠀁", "𪚥", "〇", "〜", "ー"]
CJK_PUNCT = ["，", "。", "！", "？", "、", "「", "」", "『", "』", "（", "）", "：", "；", "…", "—", "《", "》", "\u3000"]

EMOJI = ["😀", "😂", "🥲", "🤖", "🚀", "🔥", "❤️", "❤", "👍", "👍🏽", "👍🏿", "👋🏻", "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏾‍🚀",
         "🏳️‍🌈", "🇺🇸", "🇯🇵", "🇩🇪", "🇨🇳", "1️⃣", "#️⃣", "*️⃣", "✅", "⚡", "☕", "🫠", "🪐", "🧬", "🐍", "🦀", "™", "©", "®",
         "🀄", "🂡", "♠️", "✌🏼", "🤷‍♀️", "👁️‍🗨️", "😶‍🌫️"]

# Combining marks, precomposed and decomposed, plus code points NFC replaces (U+212B ANGSTROM SIGN,
# U+2126 OHM SIGN, U+0344, U+0958 DEVANAGARI QA) and Hangul jamo that NFC composes into syllables.
COMBINING = [
    "é", "e\u0301", "ñ", "n\u0303", "Å", "A\u030a", "\u212b", "\u2126", "Ω", "ệ", "e\u0323\u0302", "e\u0302\u0323",
    "ǘ", "u\u0308\u0301", "\u0344", "\u0958", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab", "각", "ḱ",
    "q\u0307\u0323", "a\u0300\u0301\u0302\u0303\u0304", "Z\u0335\u0310\u0352", "ก\u0e34\u0e4a", "नमस्ते",
    "क्षत्रिय", "שָׁלוֹם", "مَرْحَبًا", "Tiếng Việt", "Ελληνικά", "ά", "α\u0301", "ﬁ", "ﬀ", "Ǆ", "ǅ", "ǆ", "İ", "ı",
    "ß", "ẞ", "ſ", "\u00a8", "\u0301", "\u0345", "\u200d", "\u200c", "\ufeff", "o\u0308\u0304", "ö\u0304", "ȫ",
    "x\u20dd", "\u0e40\u0e01\u0e21"]

NUMBERS = ["0", "7", "42", "123", "1234", "12345", "123456789", "3.14159", "2,147,483,647", "-17", "+1e-9",
           "0x7fffffff", "1/2", "½", "¾", "²", "³", "¹⁰", "Ⅻ", "ⅷ", "٣٤٥", "۱۲۳", "१२३", "১২৩", "௧௨", "１２３", "①②③", "⑴",
           "𝟙𝟚𝟛", "〇一二", "零", "万", "1st", "2nd", "3rd", "10th", "v2.5.1", "2024-06-30", "12:34:56", "$1,000.00",
           "€9,99", "100%", "98.6°F"]

# Whitespace in every form the split regexes treat differently.
SPACES = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\u000b", "\u000c", "\u0085",
          "\u00a0", "\u1680", "\u2000", "\u2002", "\u2003", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
          "\u3000", "\u180e", "\u200b", " \n", "\n ", " \t \n ", "\u3000\u3000", " \u0085 "]

CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n  sum += a[i];\n}",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; }",
    "const x = await fetch(`https://example.com/api?q=${q}&n=10`);",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
    "if __name__ == \"__main__\":\n\tmain()\n",
    "x_BTC = torch.randn(B, T, C)  # shape (B, T, C)",
    "fn main() -> Result<(), Box<dyn Error>> {\n    Ok(())\n}",
    "<div class=\"row\"><span>&nbsp;&lt;tag&gt;</span></div>",
    "regex = r'(?i:\\'s|\\'t)|\\p{L}+|\\s+(?!\\S)'",
    "$ ls -la | grep '.cpp' > out.txt 2>&1 && echo \"done\"",
    "    \n        \n    pass",
    "a=b;c=d;;e==f!=g<=h>=i&&j||k",
    "// comment with trailing spaces   \n/* block */",
    "    def method(self):\n        '''Docstring.'''\n        return {k: v for k, v in self.items()}\n",
    "```python\nprint('hi')\n```",
    "| col1 | col2 |\n|------|------|\n| 1    | 2    |",
    "\\begin{equation} E = mc^2 \\end{equation}",
    "git commit -m \"Fix: handle U+0085 in the pre-tokenizer\"",
]

# Text of special and added tokens of both tokenizers, and near misses that must stay plain text.
SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<|vision_pad|>", "<|fim_prefix|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|reserved_special_token_5|>", "<|reserved_special_token_250|>"]
NEAR_MISSES = [
    "<|im_start", "im_start|>", "<|IM_START|>", "< |im_end|>", "<|endoftext|", "<think", "</ think>",
    "<|eot_id", "<|begin_of_text|", "<<|im_end|>>", "<|im_start|><|im_start|>", "<|reserved_special_token_999|>"]


def sentence(r, num_words):
    parts = []
    for i in range(num_words):
        w = r.pick(WORDS)
        if i == 0 or r.int(8) == 0:
            w = w[0].upper() + w[1:]  # WORDS are ASCII: one character is one UTF-16 unit
        if r.int(10) == 0:
            w += r.pick(CONTRACTIONS)
        parts.append(w)
        if r.int(6) == 0:
            parts.append(r.pick(PUNCT))
    return re.sub(r" ([.,!?;:])", r"\1", " ".join(parts))


def join_random(r, pool, n, sep_pool=None):
    s = ""
    for _ in range(n):
        s += r.pick(pool) + (r.pick(sep_pool) if sep_pool else "")
    return s


def gen_ascii(r):
    k = r.int(4)
    if k == 0:
        return sentence(r, 1 + r.int(6))
    if k == 1:
        return sentence(r, 5 + r.int(30)) + r.pick([".", "!", "?", ""])
    if k == 2:
        return sentence(r, 3 + r.int(10)) + r.pick(CONTRACTIONS) + " " + sentence(r, 2 + r.int(5))
    return r.pick(["  ", " ", "\n", ""]) + sentence(r, 2 + r.int(12)) + r.pick(["  ", " ", "\n", "\n\n", ""])


def gen_cjk(r):
    k = r.int(3)
    if k == 0:
        return join_random(r, CJK, 1 + r.int(12), [""]) + r.pick(CJK_PUNCT)
    if k == 1:
        return join_random(r, CJK, 2 + r.int(8), CJK_PUNCT + ["", "", " "])
    return sentence(r, 2 + r.int(4)) + " " + join_random(r, CJK, 1 + r.int(6), [""]) + " " + r.pick(NUMBERS)


def gen_emoji(r):
    k = r.int(3)
    if k == 0:
        return join_random(r, EMOJI, 1 + r.int(6), ["", " "])
    if k == 1:
        return sentence(r, 2 + r.int(6)) + " " + join_random(r, EMOJI, 1 + r.int(4), [""])
    return join_random(r, EMOJI, 1 + r.int(3), [""]) + join_random(r, CJK, 1 + r.int(3), [""]) + r.pick(EMOJI)


def gen_combining(r):
    k = r.int(3)
    if k == 0:
        return join_random(r, COMBINING, 1 + r.int(8), ["", " ", ""])
    if k == 1:
        return sentence(r, 1 + r.int(4)) + r.pick(COMBINING) + r.pick(WORDS) + r.pick(COMBINING)
    return r.pick(WORDS) + "\u0301" + r.pick(["\u0308", "\u0323", "\u20dd", ""]) + " " + r.pick(COMBINING)


def gen_digits(r):
    k = r.int(4)
    if k == 0:
        return join_random(r, NUMBERS, 1 + r.int(5), [" ", "", ", ", "\n"])
    if k == 1:
        return "".join(str(r.int(10)) for _ in range(1 + r.int(40)))
    if k == 2:
        return sentence(r, 2 + r.int(6)) + " " + r.pick(NUMBERS) + " " + r.pick(WORDS) + r.pick(NUMBERS)
    return r.pick(NUMBERS) + r.pick(CJK) + r.pick(NUMBERS) + r.pick(EMOJI) + r.pick(NUMBERS)


def gen_whitespace(r):
    k = r.int(4)

    def run():
        return "".join(r.pick(SPACES) for _ in range(1 + r.int(12)))

    if k == 0:
        return run()
    if k == 1:
        return r.pick(WORDS) + run() + r.pick(WORDS) + run()
    if k == 2:
        return run() + sentence(r, 1 + r.int(4)) + run() + r.pick(CJK) + run()
    return " " * (1 + r.int(200)) + r.pick(["x", "\n", "\u0085", "\u3000", "", "y "]) + r.pick(SPACES) * r.int(20)


def gen_code(r):
    k = r.int(3)
    if k == 0:
        return r.pick(CODE)
    if k == 1:
        return r.pick(CODE) + "\n" + r.pick(CODE)
    return " " * r.int(9) + r.pick(CODE).replace("\n", "\n" + " " * r.int(9))


def gen_special_tokens(r):
    k = r.int(4)

    def tok():
        return r.pick(NEAR_MISSES if r.int(4) == 0 else SPECIALS)

    if k == 0:
        return tok() + sentence(r, 1 + r.int(5)) + tok()
    if k == 1:
        return (sentence(r, 1 + r.int(4)) + r.pick(["", " ", "  ", "\n", "\u3000"]) + tok() +
                r.pick(["", " ", "\n", "\t"]) + sentence(r, 1 + r.int(4)))
    if k == 2:
        return ("<|im_start|>" + r.pick(["user", "assistant", "system"]) + "\n" + sentence(r, 2 + r.int(8)) +
                "<|im_end|>\n" + r.pick(["", "<|im_start|>assistant\n", "<think>\n\n</think>\n\n"]))
    return join_random(r, SPECIALS + NEAR_MISSES, 1 + r.int(5), ["", " ", "x", "\n", "中"])


def gen_mixed(r):
    pools = [WORDS, CJK, EMOJI, COMBINING, NUMBERS, SPACES, SPECIALS, PUNCT, CONTRACTIONS, CJK_PUNCT]
    return "".join(r.pick(r.pick(pools)) for _ in range(2 + r.int(14)))


def gen_random_code_points(r):
    # Random scalar values from ranges with every general category: controls, Latin, combining marks,
    # Greek, Cyrillic, Arabic, Indic, Thai, symbols, CJK, Hangul, private use, and the supplementary planes.
    ranges = [(0x00, 0x7f), (0x80, 0xff), (0x100, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff),
              (0x600, 0x6ff), (0x900, 0x97f), (0xe00, 0xe7f), (0x2000, 0x206f), (0x20a0, 0x20cf),
              (0x2100, 0x214f), (0x2190, 0x22ff), (0x2e80, 0x2eff), (0x3000, 0x30ff), (0x4e00, 0x9fff),
              (0xac00, 0xd7a3), (0xe000, 0xe0ff), (0xff00, 0xffef), (0x1d400, 0x1d7ff), (0x1f300, 0x1f6ff),
              (0x20000, 0x2a6df)]
    s = ""
    for _ in range(1 + r.int(24)):
        lo, hi = r.pick(ranges)
        s += chr(lo + r.int(hi - lo + 1))
    return s


# In corpus order: each class's strings follow the previous class's, all from one generator stream.
GENERATORS = {
    "ascii": gen_ascii,
    "cjk": gen_cjk,
    "emoji": gen_emoji,
    "combining": gen_combining,
    "digits": gen_digits,
    "whitespace": gen_whitespace,
    "code": gen_code,
    "special_tokens": gen_special_tokens,
    "mixed": gen_mixed,
    "random_code_points": gen_random_code_points,
}

# Hand-written edge cases (kept first in the corpus so a failure there is easy to find).
EDGES = ["", " ", "  ", "\n", "\t", "a", "A", "'", "''", "'s", " 's", "I'm", "x's'", "'ſ", "'ſa", "ſ",
         "\u0085", "a\u0085b", "\u0085\u0085", " \u0085", "\u3000", "a\u3000b", "\u3000\u3000x", "\u00a0", "\r\n\r\n",
         "a" * 1000, "ab" * 300, " " * 1000, "\n" * 300, "\u3000" * 100, "1" * 100,
         "😀" * 50, "中" * 200, "<|im_start|>", "<|im_end|><|im_end|>", "<|endoftext|>", "<|begin_of_text|>",
         "<|eot_id|>", "<think></think>", "\u0000", "\u0001\u0002\u001f\u007f", "\ufffd", "\uffff", "\U0010ffff",
         "\U000e0001\U000e0041", "\u200d\u200d", "e\u0301\u0301\u0301", "\u212b\u2126", "Hello, world!", "hello world",
         "Hello World", " Hello", "  Hello", "\tHello", "\nHello", "Hello ", "Hello  ", "Hello\n", "don't", "DON'T",
         "'ll've'd", "...", "!!!???", "---", "http://a.b/c?d=e&f=g#h", "user@example.com", "C++", "C#", "x86_64",
         "\U0001f600\U0001f3fd", "\U0001f1fa\U0001f1f8\U0001f1fa", "\u0930\u094d\u200d", "\ud55c\uad6d\uc5b4"]


def build_corpus(seed=20240607, per_class=240):
    r = Rng(seed)
    out = [("edge", text) for text in EDGES]
    for cls, gen in GENERATORS.items():
        out.extend((cls, gen(r)) for _ in range(per_class))
    return out
