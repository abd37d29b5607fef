"""The files each section of ``elmo analyze`` reads, the digests its results record of them, and
the check that a section kept in a report folder was computed on the files there are now.

    recorded = input_digests("neighbors", config)   # {"--neighbors-corpus brown:dev": "3f2a..."}
    check_inputs_kept(path, earlier, "neighbors", config)

A kept section's settings are compared by value (:data:`~elmo.analysis.report.SETTING_SECTIONS`),
and a setting names a file (``--neighbors-corpus``, ``--similarity-sets``) or nothing at all
(the Brown POS and WordNet data of the data cache): a file edited under the same name, or a
corpus written again, kept numbers of other text in silence. The contrast section records its
parsed pairs instead (:func:`~elmo.analysis.contrast.pairs_record`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional

if TYPE_CHECKING:
    from .report import AnalysisConfig

#: The files of the data cache that a section reads whatever its settings: corpus -> files.
DATA_FILES = {"pos": ("brown-pos", ("train.txt", "test.txt")),
              "wsd": ("wordnet", ("examples.tsv", "senses.tsv", "synsets.tsv"))}


def section_input_files(section: str, config: AnalysisConfig, fetch: bool = True) -> Optional[Dict[str, Path]]:
    """The files ``section`` reads under ``config``: a label that does not depend on where the
    data cache is (``--neighbors-corpus brown:dev``, ``brown-pos/train.txt``) -> the file.
    None for the contrast section, which records its pairs itself. ``fetch``: fetch a corpus
    of the data cache that is not there yet (a check only reads: not)."""
    from .datasets import corpus_dir
    from .report import resolve_corpus, similarity_set_files

    if section in DATA_FILES:
        name, files = DATA_FILES[section]
        folder = corpus_dir(name, fetch)
        return {f"{name}/{file}": folder / file for file in files}
    if section == "neighbors":
        return {f"--neighbors-corpus {config.neighbors_corpus}": resolve_corpus(config.neighbors_corpus, fetch)}
    if section == "similarity":
        named = {f"--similarity-sets {name}": path
                 for name, path in similarity_set_files(config.similarity_sets, fetch).items()}
        if config.similarity_corpus:
            named[f"--similarity-corpus {config.similarity_corpus}"] = resolve_corpus(config.similarity_corpus, fetch)
        return named
    return None


def input_digests(section: str, config: AnalysisConfig, fetch: bool = True) -> Optional[Dict[str, str]]:
    """The SHA-256 of each file ``section`` reads (:func:`section_input_files`: label -> hex
    digest of its bytes), what its results record; None for the contrast section. Taken
    before the section reads them: a file edited meanwhile then fails the check of the kept
    section, rather than passing it with numbers of its old text."""
    from ..data.corpus import file_fingerprint

    files = section_input_files(section, config, fetch)
    return None if files is None else {label: file_fingerprint(path) for label, path in files.items()}


def check_inputs_kept(path: Path, earlier: dict, section: str, config: AnalysisConfig) -> None:
    """Refuse to keep ``earlier``'s ``section`` (of ``path``) unless it records the digests of
    the files it reads under ``config`` now (:func:`input_digests`). Results that record none
    (written before they were recorded) cannot be told apart, and are refused too, as a kept
    contrast section without its pairs is (:func:`~elmo.analysis.report.check_contrast_pairs_kept`)."""
    from ..data.fetch import DataError

    results = earlier.get(section)
    recorded = results.get("inputs") if isinstance(results, dict) else None
    way_out = f"rerun it too (--only {section}) or give another --out"
    try:
        now = input_digests(section, config, fetch=False)
    except (OSError, ValueError, DataError) as e:
        raise ValueError(f"{path}: its {section} section would be kept, but its input files cannot be read now to "
                         f"check that they are the same ({e}); {way_out}") from None
    if now is None:
        return
    if not isinstance(recorded, dict):
        raise ValueError(f"{path}: its {section} section records no digest of its input files (written before "
                         f"they were recorded), so it cannot be told to be of {', '.join(now)} now; {way_out}")
    changed = sorted(label for label in set(now) | set(recorded) if recorded.get(label) != now.get(label))
    if changed:
        raise ValueError(f"{path}: its {section} section would be kept, but it was computed on other input files "
                         f"({'; '.join(f'{label}: other content than when it was computed' for label in changed)}); "
                         f"{way_out}")
