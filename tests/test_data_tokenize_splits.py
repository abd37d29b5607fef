"""PTB-style tokenization with spaCy, and the fixed task splits."""
from __future__ import annotations

from collections import Counter

import pytest

from elmo.data.splits import brown_file_splits, hashed_split, splits_keeping_copies

pytest.importorskip("spacy")


@pytest.fixture(scope="module")
def tok():
    from elmo.tokenize import Tokenizer
    return Tokenizer()


def test_ptb_clitics_and_punctuation(tok):
    assert tok.sentences("I don't know, can't you? It's John's.") == [
        ["I", "do", "n't", "know", ",", "ca", "n't", "you", "?"],
        ["It", "'s", "John", "'s", "."]]


def test_split_clitics_of_pretokenized_text():
    from elmo.tokenize import split_clitics
    assert split_clitics("That isn't it , it's Atlanta's ; can't won't 's o'clock I'm".split()) == [
        "That", "is", "n't", "it", ",", "it", "'s", "Atlanta", "'s", ";", "ca", "n't", "wo",
        "n't", "'s", "o'clock", "I", "'m"]


def test_hyphenated_words_stay_whole_but_dashes_split(tok):
    assert tok.tokens("A well-known state-of-the-art result--or not\u2014\"Look\"") == [
        "A", "well-known", "state-of-the-art", "result", "--", "or", "not", "\u2014", "``",
        "Look", "''"]


def test_quotes_become_ptb_quotes(tok):
    assert tok.tokens('He said "hello," then \u201cleft\u201d (\"x\").') == [
        "He", "said", "``", "hello", ",", "''", "then", "``", "left", "''", "(", "``", "x",
        "''", ")", "."]


def test_sentence_split_keeps_abbreviations(tok):
    sents = tok.sentences("Mr. Smith paid $5.00 in the U.S. today. Really?! Yes.")
    assert sents[0][:2] == ["Mr.", "Smith"] and "$" in sents[0] and "5.00" in sents[0]
    assert sents[-1] == ["Yes", "."]
    assert all(" " not in t and t for s in sents for t in s)


def test_pipe_matches_single_calls_and_whitespace_is_collapsed(tok):
    texts = ["One.  Two.", "\n\tThree\u00a0four .\n", ""]
    assert list(tok.pipe(texts)) == [tok.sentences(t) for t in texts]
    assert tok.sentences(texts[1]) == [["Three", "four", "."]]
    assert tok.sentences("") == []


def test_spans_point_into_the_original_text(tok):
    text = 'At  Levi\'s Stadium, "Denver" won.'
    spans = tok.spans(text)
    assert [t for t, _, _ in spans] == ["At", "Levi", "'s", "Stadium", ",", "``", "Denver",
                                        "''", "won", "."]
    assert [text[s:e] for _, s, e in spans][1:4] == ["Levi", "'s", "Stadium"]


def test_brown_split_is_stratified_by_genre():
    cats = {f"ca{i:02d}": "news" for i in range(1, 45)}
    cats.update({f"cm{i:02d}": "science_fiction" for i in range(1, 7)})
    split = brown_file_splits(cats)
    news = Counter(split[f] for f in cats if f.startswith("ca"))
    assert news == {"test": 5, "dev": 4, "train": 35}
    assert [split[f"cm{i:02d}"] for i in range(1, 7)] == ["test", "train", "train", "train",
                                                          "train", "dev"]
    # Independent of the order the categories are given in.
    assert brown_file_splits(dict(reversed(list(cats.items())))) == split


def test_hashed_split_is_stable_and_about_80_10_10():
    assert hashed_split("squad:Super_Bowl_50") == hashed_split("squad:Super_Bowl_50")
    counts = Counter(hashed_split(f"item:{i}") for i in range(20000))
    assert set(counts) == {"train", "dev", "test"}
    assert 0.08 < counts["test"] / 20000 < 0.12 and 0.08 < counts["dev"] / 20000 < 0.12


def test_the_embed_tokenizer_agrees_with_the_corpus_tokenizer_on_quotes(tok):
    """`elmo embed --tokenize` (regex) writes quotes as the training corpus (spaCy) does."""
    from elmo.tokenize import tokenize
    text = 'She said "no" and \u201cyes\u201d (\u2018maybe\u2019), then "bye."'
    assert tokenize(text) == tok.tokens(text)


@pytest.mark.parametrize("text", ["at 3.14pm", "v2.0 of python3.11", "a 2.5x speedup, 12:30pm."])
def test_the_embed_tokenizer_agrees_with_the_corpus_tokenizer_on_numbers_with_letters(tok, text):
    """`elmo embed --tokenize` split `3.14pm` into `3 . 14pm` (and `v2.0` into `v2 . 0`), where
    the training corpus (spaCy) keeps them whole."""
    from elmo.tokenize import tokenize
    assert tokenize(text) == tok.tokens(text)


def test_spans_drop_invisible_joiners_as_tokens_does(tok):
    """spans gave 'co\\xadoperate' and 'with\\u200d' (and a lone mark a token of its own) where
    tokens() gives 'cooperate' and 'with': a SQuAD context then held other words than its
    question. The texts now match tokens(); the offsets still point into the text as given."""
    text = "We co\u00adoperate with\u200d them \u200e, don\u00ad't we?"
    spans = tok.spans(text)
    assert [t for t, _, _ in spans] == tok.tokens(text)
    assert [text[s:e].replace("\u00ad", "").replace("\u200d", "") for t, s, e in spans][:4] == [
        "We", "cooperate", "with", "them"]
    assert all("\u200e" not in text[s:e] for _, s, e in spans)


@pytest.mark.parametrize("text", ["I \u2764\ufe0f it", "so \u263a\ufe0f.", "ok \u2714\ufe0f\u2714\ufe0f done",
                                  "a\u2764\ufe0fb", "(\u2603\ufe0f)"])
def test_the_embed_tokenizer_agrees_with_the_corpus_tokenizer_on_a_symbol_with_its_marks(tok, text):
    """spaCy splits a symbol (an emoji such as U+2764) off as a prefix, suffix or infix without
    the variation selector (U+FE0F, a combining mark) that follows it, which became an invisible
    token of its own ('so \u263a\ufe0f.' even gave the token '\ufe0f.'), where `elmo embed
    --tokenize` keeps a mark with the character before it: the corpus and the embedded text held
    other tokens. A symbol's marks now stay with it in both, in tokens and spans alike."""
    from elmo.tokenize import tokenize
    assert tok.tokens(text) == tokenize(text)
    assert [t for t, _, _ in tok.spans(text)] == tokenize(text)
    assert all(text[s:e] == t for t, s, e in tok.spans(text))


@pytest.mark.parametrize("text", [
    "Mr. Smith met Dr. Jones of Apple Inc. on Jan. 5 in St. Louis, Mo., vs. Mrs. Brown.",
    "John F. Kennedy met J. R. R. Tolkien, Ph.D., and a. the first b. the second.",
    "O'Neill's team beat O'Donnell's; D'Arcy saw rock'n'roll at AT&T's R&B-soul night.",
    "(Mr. Smith) and Mr., Dr.'s note, Co. and co. and Messrs. Hale.",
    "RT @bbc: see http://www.bbc.co.uk/news?x=1, mail john.smith@example.com :) <3",
    "Amazon.com's results.json and node.js at bbc.co.uk. The end.The start, J.K.Rowling :-(",
])
def test_the_embed_tokenizer_agrees_with_the_corpus_tokenizer_on_short_forms_and_names(tok, text):
    """`elmo embed --tokenize` split `Mr.` into `Mr .`, an initial `F.` into `F .`, `O'Neill`
    into `O ' Neill` and `AT&T` into `AT & T`, where the training corpora (spaCy), the Penn
    Treebank and the 1B Word Benchmark keep them whole (tokenizer revision 6)."""
    from elmo.tokenize import token_spans, tokenize
    assert tokenize(text) == tok.tokens(text)
    assert [t for t, _, _ in token_spans(text)] == tokenize(text)


@pytest.mark.parametrize("text", [
    "Python >=3.7, <3.13 only", "x <3.5 y", "price <3,000 here", "time <3:00 here", "see :3.5", ":P.S. hi",
    "We'll no longer update it anymore._", "clone git://github.com/x/y.git now",
    "\u6771\u4eac.Tokyo", "\u092e\u0948\u0902.Hello", "\u0645\u0631\u062d\u0628\u0627.Hello",
    "\uc11c\uc6b8.Seoul", "\u6771\u4eac.\u6771\u4eac", "tokyo.\u6771\u4eac",
    "@jose\u0301 hi", "mail jose\u0301@example.com", "type http:// or s3:// first",
    "so :D\u0301 ok", "so <3\u0301",
])
def test_the_embed_tokenizer_agrees_with_the_corpus_tokenizer_next_to_emoticons_and_inner_periods(tok, text):
    """Revision 6 read an emoticon out of a version bound, a number or a short form (``<3`` ``.``
    ``13``, ``:P`` ``.`` ``S.``), the emoticon ``:/`` out of an address or a scheme alone
    (``git`` ``:/`` ``/``, ``http`` ``:/`` ``/``), kept a period in a word before an underscore
    (``anymore._``) and one that ends a sentence of a script without case before an upper-case
    letter (``\u6771\u4eac.Tokyo``), and left the accent of a decomposed ``@jos\u00e9`` a token
    of its own. Revision 5 agreed with the corpus tokenizer on all of them but the addresses
    (``git : / / github . com``) and the names."""
    from elmo.tokenize import tokenize
    assert tokenize(text) == tok.tokens(text)


def test_every_short_form_kept_whole_is_kept_whole_by_the_corpus_tokenizer(tok):
    """ABBREVIATIONS is the regex tokenizer's copy of spaCy's English short forms: each one
    (in its case) keeps its period in both tokenizers, mid-sentence and at the end."""
    from elmo.tokenize import ABBREVIATIONS, tokenize
    for form in ABBREVIATIONS:
        for text in (f"We saw {form}. Hale there", f"We saw {form}.", f"({form}.)"):
            assert f"{form}." in tok.tokens(text), text
            assert tokenize(text) == tok.tokens(text), text


def test_every_emoticon_kept_whole_is_kept_whole_by_the_corpus_tokenizer(tok):
    """(Glued to a word or before a period spaCy's affix rules cut some apart, ``great:-`` and
    ``)``: there the two differ, and ``great`` ``:-)`` is kept.)"""
    from elmo.tokenize import EMOTICONS, tokenize
    for face in EMOTICONS:
        for text in (f"so {face} ok", f"({face}", f'"{face}"', f"so {face}, ok"):
            assert face in tok.tokens(text), text
            assert tokenize(text) == tok.tokens(text), text


def test_an_item_whose_text_repeats_an_earlier_ones_takes_its_split():
    keys = [f"k{i}" for i in range(60)]
    texts = [f"t{i}" for i in range(60)]
    test_item = next(i for i, k in enumerate(keys) if hashed_split(k) == "test")
    train_later = next(i for i, k in enumerate(keys) if i > test_item and hashed_split(k) == "train")
    texts[train_later] = texts[test_item]
    splits = splits_keeping_copies(zip(keys, texts))
    assert splits[train_later] == "test"
    assert [s for i, s in enumerate(splits) if i != train_later] == [hashed_split(k) for i, k in enumerate(keys)
                                                                     if i != train_later]
