"""Build the demo's bundled data (``elmo/resources/demo``) from the LM corpus and GloVe.

    python -m elmo.demo.build_data --corpus ~/.cache/elmo/corpus \\
        --glove ~/.cache/elmo/glove-50d --vocab elmo/resources/default/vocab.txt

Rules (deterministic for the same inputs):

* **sentences**: every line of ``train.txt`` and ``heldout/*.txt`` (in that order, held-out
  files by name) with 5 to 40 tokens of which one is "play" in any case, each distinct
  sentence once; then a seeded sample of ``--sentences`` of them, kept in corpus order. The
  corpus holds no task text at all (``elmo data build-corpus`` drops every split of every
  labelled task), so no test sentence of any task can be among them.
* **static words**: the most frequent entries of the model vocabulary (its file is ordered
  by frequency) that are lower-case letters only and have a GloVe vector, ``--static-words``
  of them; "play" is added if it is not among them. Layer 0 and GloVe are searched over this
  same list, so their neighbours are comparable.
* **GloVe**: the rows of those words, float32, unchanged.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np

from ..data.fetch import sha256_file
from ..io import atomic_commit, atomic_target, atomic_write_text
from ..user_paths import expand_args
from . import data as D

MIN_TOKENS, MAX_TOKENS = 5, 40


def corpus_files(corpus: Path) -> List[Path]:
    return [corpus / "train.txt", *sorted((corpus / "heldout").glob("*.txt"))]


def sentences_with(paths: Sequence[Path], word: str) -> Iterator[Tuple[str, str]]:
    """(file name, line) of every qualifying sentence, each distinct line once."""
    seen = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                tokens = line.split()
                if not MIN_TOKENS <= len(tokens) <= MAX_TOKENS or word not in (t.lower() for t in tokens):
                    continue
                text = " ".join(tokens)
                if text not in seen:
                    seen.add(text)
                    yield path.name, text


def static_words(vocab_words: Sequence[str], glove: set, n: int, word: str) -> List[str]:
    out = [w for w in vocab_words if w.isalpha() and w.islower() and w in glove][:n]
    return out if word in out else out + [word]


def _save_npy(path: Path, array: np.ndarray) -> None:
    tmp = atomic_target(path)
    try:
        with open(tmp, "wb") as f:
            np.save(f, array)
        atomic_commit(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def build(corpus: Path, glove: Path, vocab: Path, out: Path, n_sentences: int = 1000,
          n_static: int = 10_000, seed: int = 0) -> dict:
    from ..data.readers import read_glove

    corpus, out = Path(corpus), Path(out)
    found = list(sentences_with(corpus_files(corpus), D.WORD))
    chosen = sorted(random.Random(seed).sample(range(len(found)), min(n_sentences, len(found))))
    lines = [found[i][1] for i in chosen]
    by_file: Dict[str, int] = {}
    for i in chosen:
        by_file[found[i][0]] = by_file.get(found[i][0], 0) + 1

    glove_words, glove_vectors = read_glove(Path(glove))
    row = {w: i for i, w in enumerate(glove_words)}
    vocab_words = [w for w in D.read_lines(Path(vocab)) if w not in ("<S>", "</S>", "<UNK>")]
    words = static_words(vocab_words, set(row), n_static, D.WORD)
    vectors = np.ascontiguousarray(glove_vectors[[row[w] for w in words]], dtype=np.float32)

    (out / "glove").mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / D.SENTENCES_FILE, "".join(s + "\n" for s in lines))
    atomic_write_text(out / D.GLOVE_VOCAB_FILE, "".join(w + "\n" for w in words))
    _save_npy(out / D.GLOVE_VECTORS_FILE, vectors)
    manifest = {
        "word": D.WORD,
        "sentences": len(lines),
        "occurrences": sum(t.lower() == D.WORD for s in lines for t in s.split()),
        "candidates": len(found),
        "sampled_from": "train.txt and heldout/*.txt of `elmo data build-corpus`",
        "sentences_per_file": dict(sorted(by_file.items())),
        "rules": {"min_tokens": MIN_TOKENS, "max_tokens": MAX_TOKENS, "seed": seed,
                  "n_sentences": n_sentences, "n_static_words": n_static},
        "static_words": len(words),
        "glove_dim": int(vectors.shape[1]),
        "glove_source": "GloVe 6B 50d (`elmo data get glove-50d`), Public Domain Dedication and License",
        "vocab_sha256": sha256_file(Path(vocab)),
        "sha256": {name: sha256_file(out / name) for name in D.DATA_FILES},
    }
    atomic_write_text(out / D.MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m elmo.demo.build_data`` (its path arguments'
    destinations are among :data:`elmo.user_paths.PATH_SETTINGS`)."""
    p = argparse.ArgumentParser(prog="python -m elmo.demo.build_data", description=__doc__.split("\n")[0],
                                allow_abbrev=False)
    p.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: the cache's corpus/)")
    p.add_argument("--glove", type=Path, default=None, help="GloVe vectors (default: the cache's glove-50d/)")
    p.add_argument("--vocab", type=Path, required=True, help="the model's vocab.txt (ordered by frequency)")
    p.add_argument("--out", type=Path, default=D.data_folder())
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--static-words", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv=None) -> int:
    from ..data.fetch import data_home

    p = build_parser()
    args = p.parse_args(argv)
    try:   # (a quoted "~/x" made a folder named "~", as in the elmo command: see elmo.user_paths)
        expand_args(args)
        root = data_home()
        manifest = build(args.corpus or root / "corpus", args.glove or root / "glove-50d", args.vocab, args.out,
                         args.sentences, args.static_words, args.seed)
    except (ValueError, OSError) as e:   # (a missing file was a traceback)
        from ..cli import one_line
        print(f"{p.prog}: error: {one_line(e)}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {manifest['sentences']:,} sentences ({manifest['occurrences']:,} occurrences of "
          f"{manifest['word']!r}, from {manifest['candidates']:,} candidates), {manifest['static_words']:,} "
          f"static words with GloVe vectors")
    problems = D.check(args.out)
    for msg in problems:
        print(f"inconsistent: {msg}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
