"""``elmo vocab build``: count a corpus and write its vocabulary and counts."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Dict, Optional, Sequence

from ..checks import require_count, require_integer
from ..data.corpus import count_words, expand_paths, would_find
from ..data.text_choice import check_not_whole_corpus
from ..io import no_empty_folder_on_failure
from ..output_checks import check_output_file, check_replaceable
from ..output_lock import output_lock
from ..vocab import SPECIAL, Vocabulary


def build_vocabulary_files(corpus: Sequence[str], output: str | Path, min_count: int = 1,
                           max_size: Optional[int] = None, counts_path: Optional[str | Path] = None,
                           progress: bool = False) -> Dict:
    """Write ``output`` (one word a line) and the word<TAB>count file; return a summary.

    Refused before counting (a ValueError naming the problem): ``min_count`` below 1,
    ``max_size`` with no room for a word beside the specials, the two outputs on one path (the
    counts would replace the vocabulary) or on a corpus file (the text would be lost), a folder
    or glob that takes in a whole corpus folder (:func:`~elmo.data.text_choice.check_not_whole_corpus`), and a
    corpus without a word (the vocabulary would hold only the specials). ``progress``: count
    the sentences read on stderr (:func:`~elmo.data.corpus.count_words`).
    """
    min_count = require_count("--min-count", min_count)
    if max_size is not None and require_integer("--max-size", max_size) <= len(SPECIAL):
        raise ValueError(f"--max-size must be more than {len(SPECIAL)} (the entries {', '.join(SPECIAL)} "
                         f"come first), got {max_size}")
    check_not_whole_corpus("corpus", corpus)   # (its held-out words and stats.json's keys were counted)
    output = Path(output)
    counts_path = Path(counts_path) if counts_path else default_counts_path(output)
    if output.resolve() == counts_path.resolve():
        raise ValueError(f"{output}: both the vocabulary and the counts would be written there; "
                         f"give --counts another file")
    # One build at a time writes these files: two at once (two corpora into one -o) left the
    # vocabulary of one beside the counts of the other, which elmo train read as one.
    with ExitStack() as locks:
        for path, what in ((output, "vocabulary"), (counts_path, "counts file")):
            check_output_file(path, what)   # (before its lock file is made beside it)
            locks.enter_context(no_empty_folder_on_failure(path.parent))   # (made for the lock file)
            locks.enter_context(output_lock(path))
        counts, vocab = _count_and_write(corpus, output, counts_path, min_count, max_size, progress)
    words_total = sum(c for w, c in counts.items() if w not in SPECIAL)
    covered = sum(c for w, c in zip(vocab.words, vocab.counts) if w not in SPECIAL)
    info = {"vocab": str(output), "counts": str(counts_path), "size": len(vocab),
            "covered": covered / max(words_total, 1)}
    if counts_path.resolve() != default_counts_path(output).resolve():
        # elmo train --vocab OUTPUT looks for the counts beside it under the default name only:
        # the trained model came out without vocab_counts.tsv, silently
        info["note"] = (f"elmo train --vocab {output} will not find these counts (it reads "
                        f"{default_counts_path(output).name} beside the vocabulary); give it "
                        f"--vocab {counts_path} (the same words, with their counts) to keep them "
                        f"in the trained model")
    return info


def _count_and_write(corpus: Sequence[str], output: Path, counts_path: Path, min_count: int,
                     max_size: Optional[int], progress: bool):
    """Check the outputs, count ``corpus`` and write both files (the caller holds their locks)."""
    files = {f.resolve() for f in expand_paths(corpus)}
    for path, what, starts in ((output, "vocabulary", f"{SPECIAL[0]}\n"),
                               (counts_path, "counts file", f"{SPECIAL[0]}\t")):
        check_output_file(path, what)
        _refuse_a_models_vocabulary(path, what)
        if path.resolve() in files:
            raise ValueError(f"{path}: is a corpus file; write the {what} to another file")
        # (written into the corpus folder, it was read as text by the training run on that
        # folder, and the next vocab build refused it as a corpus file)
        within = next((p for p in corpus if would_find(p, path)), None)
        if within is not None:
            raise ValueError(f"{path}: would be a file of the corpus {within} (every file below a folder, or "
                             f"matching a glob, is read as text); write the {what} outside it")
        check_replaceable(path, starts.encode(), what)
    counts = count_words(corpus, progress)
    if not any(w not in SPECIAL for w in counts):
        raise ValueError(f"{', '.join(map(str, corpus))}: no words (empty or blank lines only)")
    top = max((c for w, c in counts.items() if w not in SPECIAL), default=0)
    if top < min_count:   # (it wrote <S>, </S>, <UNK> alone: a model of every word as <UNK>)
        raise ValueError(f"--min-count {min_count}: no word of {', '.join(map(str, corpus))} is seen that often "
                         f"(the most frequent, {top:,} times); the vocabulary would hold only {', '.join(SPECIAL)}")
    vocab = Vocabulary.from_counts(counts, min_count=min_count, max_size=max_size)
    _write_pair(vocab, output, counts_path)
    return counts, vocab


def _refuse_a_models_vocabulary(path: Path, what: str) -> None:
    """Refuse to replace the vocabulary (or counts) file of a trained model's folder: its
    softmax has a row per word of that file, so another corpus's words there made the model
    predict the wrong words (the file was replaced without a word)."""
    from .export import COUNTS_FILE, SOFTMAX_FILE, VOCAB_FILE

    if path.name in (VOCAB_FILE, COUNTS_FILE) and (path.parent / SOFTMAX_FILE).exists():
        raise ValueError(f"{path}: is the vocabulary of the trained model in {path.parent} (its "
                         f"{SOFTMAX_FILE} has a row per word of it); write the {what} to another file")


def _write_pair(vocab: Vocabulary, output: Path, counts_path: Path) -> None:
    """Write the vocabulary and its counts as one pair, as far as two files can be.

    Both are written in full under temporary names first, then renamed one right after the
    other, the counts first: the vocabulary (what ``elmo train`` reads, and what a resumed run
    checks) changes last. They were written one after the other, so a kill while the counts
    were written (a large vocabulary's take a while) left the new vocabulary beside the old
    build's counts. Only a kill between the two renames can now leave the new counts beside
    the old vocabulary; ``elmo train`` compares their words and says so
    (:func:`elmo.training.training_vocab.load_training_vocabulary`)."""
    from ..io import atomic_commit, atomic_target, os_errors_naming

    staged = []
    try:
        for path, with_counts in ((output, False), (counts_path, True)):
            tmp = atomic_target(path)
            staged.append((tmp, path))
            with os_errors_naming(path):   # (an error names the file, not its temporary)
                tmp.write_text(vocab.text(with_counts), encoding="utf-8")
        for tmp, path in reversed(staged):
            with os_errors_naming(path):
                atomic_commit(tmp, path)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def default_counts_path(vocab: Path) -> Path:
    """Where ``elmo vocab build`` writes the counts of the vocabulary ``vocab``, and where
    ``elmo train --vocab`` reads them (see :func:`elmo.training.training_vocab.load_training_vocabulary`)."""
    from ..io import fitting_name

    return vocab.with_name(fitting_name(vocab.with_name(vocab.stem), ".counts.tsv"))
