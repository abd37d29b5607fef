"""The vocabulary a run trains on: read with the counts that ``elmo vocab build`` wrote beside
it, and the digest a checkpoint keeps of its words."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from ..vocab import Vocabulary


def load_training_vocabulary(path: str | Path, notes: bool = True,
                             loaded: Optional[Tuple[str | Path, Vocabulary]] = None) -> Vocabulary:
    """The vocabulary file, with its counts when ``elmo vocab build`` wrote them beside it
    (``NAME.counts.tsv``) or it is a model folder's ``vocab.txt`` beside its
    ``vocab_counts.tsv`` (a warm start from the folder), so the exported model keeps them.
    ``notes``: print the note on counts of other words (False: a process other than rank 0,
    so that torchrun's processes do not each print it). ``loaded``: a model folder and the
    vocabulary :func:`~elmo.training.export.load_vocabulary` read there (the start model's),
    given back where ``path`` is that folder's ``vocab.txt`` instead of reading it again."""
    from ..folder_checksums import checked_reads
    from ..output_checks import same_file
    from .export import COUNTS_FILE, VOCAB_FILE
    from .vocab_build import default_counts_path
    # (the same words and counts: the model's load refused a vocab_counts.tsv of other words;
    # a NAME.counts.tsv beside it, which this reads first, is left to the reading below)
    if (loaded is not None and same_file(Path(path), Path(loaded[0]) / VOCAB_FILE)
            and not default_counts_path(Path(path)).exists()):
        return loaded[1]
    # (a warm start read only vocab.counts.tsv, and the model it wrote lost its start's counts)
    beside = [default_counts_path(Path(path))] + ([Path(path).with_name(COUNTS_FILE)]
                                                  if Path(path).name == VOCAB_FILE else [])
    # a model folder's vocabulary (--vocab MODEL/vocab.txt), against the SHA-256 its
    # metadata.json records: an edited or damaged one trained a model without a word (another
    # folder's metadata.json, a corpus's own, is none of this package's)
    model_folder = (Path(path).parent / "options.json").is_file()
    with checked_reads([Path(path), *beside] if model_folder else []):
        return _with_counts(Vocabulary.load(path), path, beside, notes)


def _with_counts(vocab: Vocabulary, path: str | Path, beside: List[Path], notes: bool) -> Vocabulary:
    """``vocab`` (read from ``path``) with the counts of the first of the files ``beside`` it
    that lists its words, where it has none of its own."""
    for counts_file in beside if vocab.counts is None else []:
        if counts_file.exists():
            with_counts = Vocabulary.load(counts_file)
            if with_counts.words == vocab.words:
                return with_counts
            # (they were dropped without a word: the trained model came out without its counts)
            if notes:
                print(f"note: {counts_file} holds the counts of other words than {path} (another "
                      f"build's, or a vocab build stopped half-way); they are not used: run elmo "
                      f"vocab build again to write the two together", file=sys.stderr, flush=True)
    return vocab


def vocabulary_digest(vocab: Vocabulary) -> str:
    """SHA-256 of the vocabulary's words in order (what the softmax rows mean; not the counts)."""
    return hashlib.sha256("\n".join(vocab.words).encode("utf-8")).hexdigest()
