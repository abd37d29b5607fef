"""Tokens with their character spans in the text as written, and what they are for: a
``span_qa`` prediction's answer read back from its context (``3-1``, curly quotes and
``don't`` as the context wrote them), in evaluation and in predict."""
from __future__ import annotations

import json
import random

import pytest

from elmo.tasks.datasets import Answer, Example, SourceText
from elmo.tasks.files import read_examples
from elmo.tasks.kinds import answer_texts, located_answer
from elmo.tasks.metrics import METRICS
from elmo.tokenize import INVISIBLE, TEXT_MAP, token_spans, tokenize, whitespace_spans

TEXTS = [
    "He said \u201chi\u201d and \"bye\" to John's dog.",
    "I don't know -- well-known caf\u00e9\u2014bar, 3.14pm or U.S. stuff...",
    "co\u00adoperate \u200bzero\u00a0width \ufeffbom e\u0301t\u00e9 \u0915\u093f",
    "  leading and trailing  \t spaces  ",
    "",
    "\u201c\u201d\"\"''",
]


def _random_texts(n: int, seed: int = 0):
    """Texts drawn from an alphabet of what the tokenizer treats specially."""
    alphabet = list("ab1.,:/-'\"()n't ") + ["\u00ad", "\u200d", "\u201c", "\u201d", "\u2019",
                                               "\u00a0", "\u200b", "\u0301", "\u2014", "\t"]
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("text", TEXTS + _random_texts(300))
def test_token_spans_give_tokenizes_tokens_and_where_each_was_read(text):
    spans = token_spans(text)
    assert [t for t, _, _ in spans] == tokenize(text)
    previous_end = 0
    for token, start, end in spans:
        assert previous_end <= start < end <= len(text)
        written = text[start:end]
        # what was read there: the text with the map applied (quotes a PTB quote came from)
        read = written.translate(TEXT_MAP)
        if token in ("``", "''") and read == '"':
            pass
        else:
            assert read == token, (text, token, written)
        assert written[0] not in INVISIBLE and written[-1] not in INVISIBLE
        previous_end = end


@pytest.mark.parametrize("text", ["a  b\tc", " x ", "", "a\u3000b\x1cc\x85d\u2028e", "aa a aaa a"])
def test_whitespace_spans_give_splits_tokens_at_their_places(text):
    spans = whitespace_spans(text)
    assert [t for t, _, _ in spans] == text.split()
    assert all(text[s:e] == t for t, s, e in spans)
    assert [s for _, s, _ in spans] == sorted({s for _, s, _ in spans})


def test_an_answer_is_read_back_from_the_context_as_written():
    context = "The score was 3\u20131 at the caf\u00e9\u2014bar: \u201cwe don\u2019t care\u201d."
    tokens, source = SourceText.split(context, tokenize=True)
    example = Example(["q"], (), tokens, source)
    quote = tokens.index("``"), tokens.index("''") + 1
    got = located_answer(example, {"text": " ".join(tokens[quote[0]:quote[1]]),
                                   "start": quote[0], "end": quote[1]})
    assert got["text"] == "\u201cwe don\u2019t care\u201d"
    assert context[got["char_start"]:got["char_end"]] == got["text"]
    cafe = tokens.index("caf\u00e9")
    assert located_answer(example, {"text": "", "start": cafe, "end": cafe + 3})["text"] == "caf\u00e9\u2014bar"
    # an empty span (an empty context's answer) is "" at a defined place
    empty = Example(["q"], (), [], SourceText.split("   ", tokenize=False)[1])
    assert located_answer(empty, {"text": "", "start": 0, "end": 0}) == \
        {"text": "", "start": 0, "end": 0, "char_start": 3, "char_end": 3}
    # a context given as tokens has no text but its tokens
    given = Example(["q"], (), ["3", "-", "1"])
    assert located_answer(given, {"text": "3 - 1", "start": 0, "end": 3}) == \
        {"text": "3 - 1", "start": 0, "end": 3, "char_start": None, "char_end": None}


@pytest.mark.parametrize("tokenize_texts", [False, True])
def test_evaluation_compares_the_answer_as_the_context_wrote_it(tmp_path, tokenize_texts):
    """The right span scores exact match 100 even where the tokenizer split the answer
    (``3\u20131``, ``caf\u00e9\u2014bar``): the tokens joined by spaces missed it, as SQuAD's
    normalisation keeps the spaces and non-ASCII punctuation."""
    # split on whitespace, the answer keeps the context's own spacing
    rows = [("score?", "it ended 3 -\t1 today", "3 -\t1", 2, 5),
            ("where?", "at the  caf\u00e9 \u2014 bar we met", "caf\u00e9 \u2014 bar", 2, 5)]
    if tokenize_texts:     # the tokenizer itself splits these
        rows = [("score?", "it ended 3\u20131 today", "3\u20131", 2, 5),
                ("where?", "at the caf\u00e9\u2014bar we met", "caf\u00e9\u2014bar", 2, 5)]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"q": q, "c": c, "a": [{"text": a, "start": s, "end": e}]}) + "\n"
                            for q, c, a, s, e in rows), encoding="utf-8")
    examples = read_examples(path, "span_qa", {"type": "jsonl", "text": "q", "text_b": "c", "label": "a"},
                             tokenize=tokenize_texts)
    assert all(isinstance(ex.source_b, SourceText) for ex in examples)
    answers = [ex.label[0] for ex in examples]
    assert all(isinstance(a, Answer) for a in answers)
    pred = [{"text": " ".join((ex.tokens_b or [])[a.start:a.end]), "start": a.start, "end": a.end}
            for ex, a in zip(examples, answers)]
    gold, guess = answer_texts(examples, pred)
    assert guess == [r[2] for r in rows]
    assert METRICS["exact_match"](gold, guess) == 1.0


def test_a_context_given_as_tokens_keeps_its_tokens(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"q": "score?", "c": ["it", "ended", "3", "-", "1"],
                                "a": [{"text": "3-1", "start": 2, "end": 5}]}) + "\n", encoding="utf-8")
    [example] = read_examples(path, "span_qa", {"type": "jsonl", "text": "q", "text_b": "c", "label": "a"})
    assert example.source_b is None
    assert answer_texts([example], [{"text": "3 - 1", "start": 2, "end": 5}])[1] == ["3 - 1"]
