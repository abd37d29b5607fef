"""``elmo analyze``: run every analysis on one model and write a markdown report.

    results = run_analysis("path/to/model", "experiments/analysis/NAME", AnalysisConfig())

writes ``results.json`` (every number), the PNG pictures and ``report.md``. Every table in the
report is followed by the command that recomputes it (``--only SECTION`` with the same
settings), and the paper's two layer findings are stated from the computed numbers and a
paired bootstrap, never assumed.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..config import ConfigError
from ..text_files import decode_text, read_json
from ..redact import redact_record, redact_url
from ..jobconfig import check_numbers, setting
from ..tasks.paired import signed

SECTIONS = ("pos", "wsd", "neighbors", "contrast", "similarity")

#: Query sentences for the neighbour section (one word each, two senses per word).
NEIGHBOR_QUERIES = [
    ("the children ran outside to play in the snow .", "play"),
    ("we bought tickets for the new play at the theatre .", "play"),
    ("they walked along the bank of the river .", "bank"),
    ("she asked the bank for a larger loan .", "bank"),
]


@dataclass
class AnalysisConfig:
    """Every setting that changes a number in the report (all echoed in its commands).
    A sample size of 0 means everything.

    The default sizes are chosen so that the whole report on a 2-layer biLM of LSTM 512 /
    projection 128 takes 5 to 10 minutes on one busy CPU core (``--threads 1``, untrained
    control included): the POS probe's training sample is the only part that costs much, so
    it is a sample, while everything that only has to be embedded (Brown POS test, every
    ambiguous WordNet lemma, Brown dev for the neighbours) is used whole."""

    seed: int = setting(0, help="seed of every sample and split")
    pos_train_sentences: int = setting(5000, help="Brown train sentences for the POS probe (sampled; 0: all; "
                                                  "the one size that sets the run time)")
    pos_test_sentences: int = setting(0, help="Brown test sentences for the POS probe (sampled; 0: all)")
    pos_l2: float = setting(1e-5, help="L2 weight of the POS probe")
    pos_iterations: int = setting(100, help="L-BFGS iterations of the POS probe")
    wsd_max_lemmas: int = setting(0, help="ambiguous WordNet lemmas to evaluate (sampled; 0: all)")
    wsd_test_fraction: float = setting(0.5, help="chance that an example goes to the WSD test side")
    contrast_file: Optional[str] = setting(None, help="your own contrast pairs (tab separated: category, "
                                                      "sentence_a, sentence_b, target, label_a, label_b); "
                                                      "default: the built-in set")
    contrast_l2: float = setting(1e-2, help="L2 weight of the contrast probe")
    neighbors_corpus: str = setting("brown:dev", help="a text file (a tokenized sentence a line) or CORPUS:SPLIT")
    neighbors_sentences: int = setting(0, help="index at most this many corpus sentences (0: all)")
    neighbors_k: int = setting(5, help="neighbours shown")
    pca_word: Optional[str] = setting(None, help="lemma for the sense PCA picture, e.g. bank, or bank/v for one "
                                                 "part of speech (n, v, a, r) (default: the WordNet lemma "
                                                 "with the most examples)")
    mix_weights: Optional[str] = setting(None, help="a task's learned mix to draw as well: the results.json of "
                                                    "`elmo experiment` (one ELMo variant: its mean over seeds), a "
                                                    "JSON {\"weights\": [...]} of softmax weights (a bare list, or "
                                                    "{\"scalar_parameters\": [...]}, is of raw scalars, which are "
                                                    "softmaxed), or a PyTorch state dict with scalar_parameters")
    similarity_sets: str = setting("wordsim353,simlex999",
                                   help="word similarity pair sets, comma separated: `elmo data` pair corpora "
                                        "(wordsim353, simlex999) or files of word1, word2, score (tab separated)")
    similarity_corpus: Optional[str] = setting(None, help="also score each word by the mean of its contextual "
                                                          "vectors over this corpus (a text file or CORPUS:SPLIT, "
                                                          "e.g. brown:dev; default: no type averages)")
    untrained_control: bool = setting(True, boolean="both",
                                      help="also run the POS probe, WSD, contrast pairs and word similarity on "
                                           "an untrained copy of the model (same architecture, fresh random "
                                           "weights), to tell what training added")
    batch_size: int = setting(32, help="sentences per biLM call")

    def __post_init__(self) -> None:
        # a sample size below 0 or a NaN weight would give numbers that look like results.
        # No "analyze:" before the option: the CLI's "elmo analyze: error:" says it already
        check_numbers("", "", **{
            "--pos-train-sentences": (self.pos_train_sentences, "count0"),
            "--pos-test-sentences": (self.pos_test_sentences, "count0"),
            "--wsd-max-lemmas": (self.wsd_max_lemmas, "count0"),
            "--neighbors-sentences": (self.neighbors_sentences, "count0"),
            "--pos-l2": (self.pos_l2, "rate"), "--contrast-l2": (self.contrast_l2, "rate"),
            "--pos-iterations": (self.pos_iterations, "count"), "--neighbors-k": (self.neighbors_k, "count"),
            "--batch-size": (self.batch_size, "count")})
        # numpy's generators take no negative seed (the bootstrap failed after every vector was
        # computed), torch no larger one, and random.Random(-1) draws as Random(1) does
        if not 0 <= self.seed < 2**64:
            raise ConfigError(f"--seed must be a whole number from 0 to 2**64 - 1, got {self.seed}")
        if not 0.0 < self.wsd_test_fraction < 1.0:  # both sides of the WSD split need examples
            raise ConfigError(f"--wsd-test-fraction must be between 0 and 1 (both excluded), "
                              f"got {self.wsd_test_fraction}")

    def options(self, explicit: bool = False) -> List[str]:
        """Command-line options that reproduce this configuration (``elmo analyze`` parses
        them back to it): those that differ from the defaults, or with ``explicit`` every set
        one (so that the command still reproduces the numbers after a default changes)."""
        from ..jobconfig import to_options

        return to_options(self, explicit=explicit)


def command(model: str, out: Path, config: AnalysisConfig, only: Optional[str] = None,
            threads: Optional[int] = None, sections: Optional[Sequence[str]] = None) -> str:
    """The ``elmo analyze`` command line for ``config``, every setting spelled out; for one
    section it writes into ``OUT/reproduce/SECTION`` so that rerunning it leaves the full
    report alone. ``threads``: the torch thread count to ask for (it can move a last digit).
    ``sections``: without ``only``, the sections the run computed (an ``--only`` each when
    they are not all of them)."""
    target = Path(out) / "reproduce" / only if only else Path(out)
    parts = ["elmo", "analyze", str(model), "--out", str(target), *config.options(explicit=True)]
    if only:
        parts += ["--only", only]
    elif sections is not None and set(sections) != set(SECTIONS):
        for name in sections:
            parts += ["--only", name]
    if threads:
        parts += ["--threads", str(threads)]
    return " ".join(shlex.quote(p) for p in parts)


# ----------------------------------------------------------------------------- data
def resolve_corpus(spec: str) -> Path:
    """A text file for ``--neighbors-corpus``: a path, or ``CORPUS:SPLIT`` of a standard-form
    corpus (``brown:dev`` -> ``brown/dev.txt``, fetched when missing)."""
    if Path(spec).is_file():
        return Path(spec)
    if Path(spec).is_dir():
        raise IsADirectoryError(f"{spec}: is a directory; the corpus is a text file (a tokenized sentence a "
                                f"line) or CORPUS:SPLIT, e.g. brown:dev")
    name, colon, split = spec.partition(":")
    from ..data.fetch import DataError
    from .datasets import corpus_dir
    if not re.fullmatch(r"[a-z0-9-]+", name):
        raise FileNotFoundError(f"no corpus file {spec}")
    try:
        folder = corpus_dir(name)
    except DataError as e:
        if colon:
            raise
        raise FileNotFoundError(f"{spec}: no such file, nor a corpus of that name ({e})") from None
    path = folder / f"{split or 'train'}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"{spec}: no file {path}")
    return path


def similarity_sets(spec: str) -> Dict[str, list]:
    """The word pair sets of ``--similarity-sets`` (comma separated), read: name -> scored
    pairs (:func:`elmo.analysis.similarity.read_pairs`). Each is a pair file, or the name of a
    pair corpus of ``elmo data`` (``wordsim353`` -> ``wordsim353/pairs.tsv``, fetched when
    missing)."""
    from ..data.sources import SOURCES
    from .datasets import corpus_dir
    from .similarity import read_pairs

    pair_corpora = sorted(n for n, src in SOURCES.items() if src.kind == "pairs")
    names = [n.strip() for n in spec.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise ValueError(f"--similarity-sets {spec!r}: give distinct pair corpora or files, comma separated, "
                         f"e.g. wordsim353,simlex999")
    sets = {}
    for name in names:
        if Path(name).exists():
            sets[name] = read_pairs(Path(name))
        elif name in pair_corpora:
            sets[name] = read_pairs(corpus_dir(name) / "pairs.tsv")
        else:   # (a corpus of another kind, brown say, was fetched before it failed)
            raise FileNotFoundError(f"--similarity-sets {name}: no such file, nor a corpus of word pairs "
                                    f"({', '.join(pair_corpora)})")
    return sets


def index_home() -> Path:
    """Where neighbour indexes are cached: ``indexes/`` in the data cache (``$ELMO_DATA``)."""
    from ..data.fetch import data_home
    return data_home() / "indexes"


def read_mix_weights(path: Path) -> List[float]:
    """Softmax weights of a task's learned mix, from a JSON file (``{"weights": [...]}`` of
    softmax weights, or ``{"scalar_parameters": [...]}`` / a plain list of raw s, or the
    ``results.json`` of ``elmo experiment``, see :func:`task_mix_weights`) or a PyTorch state
    dict holding ``...scalar_parameters`` (one tensor, or AllenNLP's ``.0``, ``.1``...).

    A file that is none of these (not JSON or UTF-8, not a state dict, no list of finite
    numbers) is a ValueError naming it: the report drew NaN weights, or a bare JSON message,
    or an IndexError from unpickling a text file."""
    path = Path(path)
    what = "a JSON of mix weights, an experiment's results.json or a PyTorch state dict"
    if path.suffix.lower() == ".json":   # (a .JSON file was read as a PyTorch file)
        data = read_json(path, what="JSON", expected=f"{what} for --mix-weights")
        if isinstance(data, dict) and "runs" in data:
            return task_mix_weights(data, str(path))
        if isinstance(data, dict) and "weights" in data:
            weights = _numbers(data["weights"], path)
            if (weights < 0).any():
                raise ValueError(f"{path}: softmax weights cannot be negative")
            # a softmax sums to 1; allow for weights rounded to two or three decimals
            if abs(weights.sum() - 1.0) > 0.01:
                raise ValueError(f"{path}: softmax weights sum to 1, these to {weights.sum():.4g}; "
                                 "give raw scalars as 'scalar_parameters' instead")
            return [float(w) for w in weights]
        if isinstance(data, dict) and "scalar_parameters" not in data:
            raise ValueError(f"{path}: no 'weights', 'scalar_parameters' or 'runs'; --mix-weights takes {what}")
        raw = data["scalar_parameters"] if isinstance(data, dict) else data
    else:
        import pickle

        import torch
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except OSError:
            raise                                   # a missing file says so itself
        except (pickle.UnpicklingError, RuntimeError, EOFError, IndexError, ValueError, KeyError,
                AttributeError, UnicodeDecodeError):  # what unpickling other bytes raises
            raise ValueError(f"{path}: not a PyTorch state dict; --mix-weights takes {what}") from None
        if not isinstance(state, dict):
            raise ValueError(f"{path}: not a PyTorch state dict; --mix-weights takes {what}")
        state = state.get("state_dict", state)
        keys = sorted(k for k in state if re.search(r"scalar_parameters(\.\d+)?$", str(k)))
        if not keys:
            raise ValueError(f"{path}: no scalar_parameters in the state dict")
        # one mix per prefix: a task model with an input and an output ELMo holds two
        # (``scalar_mixes.0.``, ``scalar_mixes.1.``), and the first was drawn without a word
        prefixes = sorted({k.rsplit("scalar_parameters", 1)[0] for k in keys})
        if len(prefixes) > 1:
            raise ValueError(f"{path}: {len(prefixes)} scalar mixes in the state dict "
                             f"({', '.join(p + 'scalar_parameters' for p in prefixes)}); give a file "
                             f"with exactly one (e.g. a JSON of its weights)")
        keys.sort(key=lambda k: int(k.rsplit(".", 1)[1]) if k[-1].isdigit() else 0)
        # (a value that is no tensor, a list saved as it is, was an AttributeError on .reshape)
        raw = [x for k in keys for x in (state[k].reshape(-1).tolist() if isinstance(state[k], torch.Tensor)
                                         else np.ravel(np.asarray(state[k], dtype=object)).tolist())]
    s = _numbers(raw, path)
    exps = np.exp(s - s.max())      # (the softmax, shifted so that no exp overflows)
    return [float(w) for w in exps / exps.sum()]


def _numbers(values, path: Path) -> np.ndarray:
    """``values`` as a non-empty 1-D array of finite numbers, else a ValueError naming ``path``."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        array = np.empty(0)
    if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all():
        raise ValueError(f"{path}: the mix needs a non-empty list of finite numbers, got {str(values)[:80]}")
    return array


def _learned_mix(results: dict, source: str) -> Tuple[List[List[float]], str]:
    """The one learned mix of a trained biLM in an experiment's ``results.json``: each seed's
    weights of one (task, variant, position), random-weight controls left out, and the spec of
    the biLM it was learned on. A file with several such groups is ambiguous and raises."""
    # (a file of another shape, or hand-edited, was a TypeError, AttributeError or KeyError)
    unlike = "not the results.json of elmo experiment, whose 'runs' are a list of runs"
    runs = results.get("runs")
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        raise ValueError(f"{source}: {unlike}")
    groups: Dict[tuple, List[List[float]]] = {}
    for number, run in enumerate(runs, 1):
        e = run.get("elmo") or {}
        mixes = e.get("mix_weights") if isinstance(e, dict) else None
        if not isinstance(e, dict) or not isinstance(mixes or {}, dict):
            raise ValueError(f"{source}: run {number}: its 'elmo' entry is not that of elmo experiment")
        if str(e.get("bilm", "")).startswith("random:"):
            continue
        for position, mix in (mixes or {}).items():
            if not isinstance(mix, dict) or "weights" not in mix:
                raise ValueError(f"{source}: run {number}: the mix at {position!r} has no 'weights'")
            key = (str(run.get("task")), str(run.get("variant")), str(position), str(e.get("bilm")))
            groups.setdefault(key, []).append([float(w) for w in _numbers(mix["weights"], Path(source))])
    if len(groups) != 1:
        raise ValueError(f"{source}: {len(groups)} learned mixes of a trained biLM "
                         f"({sorted(key[:3] for key in groups)}); give a file with exactly one")
    (key, weights), = groups.items()
    if len({len(w) for w in weights}) > 1:   # (numpy's "inhomogeneous shape" from the mean)
        raise ValueError(f"{source}: the runs of {key[:3]} learned mixes of {sorted({len(w) for w in weights})} "
                         f"layers; give a file with the mixes of one model")
    return weights, key[3]


def task_mix_weights(results: dict, source: str = "results.json") -> List[float]:
    """The mix weights a task learned, from the ``results.json`` of ``elmo experiment``: the
    mean over seeds of one (task, variant, position) of a trained biLM (random-weight
    controls left out). A file with several such groups is ambiguous and raises."""
    weights, _ = _learned_mix(results, source)
    return [float(w) for w in np.mean(weights, axis=0)]


def mix_learned_on(path: Path) -> Optional[dict]:
    """What an experiment's ``results.json`` recorded of the biLM its mix was learned on (its
    ``bilms`` entry: the spec, and the SHA-256 of its options, weights and vocabulary); None
    for a file of weights alone, which says nothing of its model."""
    if Path(path).suffix.lower() != ".json":
        return None
    data = read_json(path, what="JSON")      # (read_mix_weights checked it)
    if not isinstance(data, dict) or "runs" not in data:
        return None
    _, spec = _learned_mix(data, str(path))
    bilms = data.get("bilms")
    entry = bilms.get(spec) if isinstance(bilms, dict) else None
    return {**entry, "spec": spec} if isinstance(entry, dict) else {"spec": spec}


def mix_model_note(learned_on: Optional[dict], model: str) -> Optional[str]:
    """A line saying that a given mix was learned on other biLM files than ``model``'s, or None
    (the same files, or nothing recorded to compare). A mix of another model's layers says
    nothing about this one's, and only the layer count was checked. It is a note, not a
    refusal: a converted copy of the same model has other files (``elmo convert``)."""
    from ..tasks.bilm_checksums import counted_files
    recorded = (learned_on or {}).get("files_sha256")
    if not recorded or not isinstance(recorded, dict):   # (another shape was an AttributeError)
        return None
    now = counted_files(str(model))           # (None: no folder of it here to compare)
    if now is None or now == recorded:
        return None
    assert learned_on is not None       # (it recorded files_sha256)
    return (f"the mix was learned on the biLM {learned_on['spec']!r}, whose options, weights or vocabulary "
            f"({', '.join(sorted(k for k in set(now) | set(recorded) if now.get(k) != recorded.get(k)))}) "
            f"differ from {model}'s: unless {model} is a converted copy of it, the mix belongs to another model")


# ----------------------------------------------------------------------------- run
def run_analysis(model: str, out: Path, config: Optional[AnalysisConfig] = None,
                 only: Optional[Sequence[str]] = None, log=print, device=None, progress: bool = False) -> dict:
    """Run the chosen sections (default: all), write results, pictures and the report.

    ``out`` may hold an earlier report. Its sections that this run leaves out are kept, and
    the report written with them and the new ones, where they are of the same weights
    (:func:`check_same_model`) and settings; otherwise, or for another tool's
    ``results.json``, the run is refused before any section runs (:func:`check_results_kept`),
    as is a second run into the folder while one runs.

    ``model`` is a model name or folder, since the report's commands name it; a BiLM or an
    :class:`~elmo.embedding.Embedder` is refused in one line (the error printed the whole
    module), and each section's function takes those.

    ``device``: where the biLM and its untrained control run (default: the CPU; see
    :func:`elmo.from_pretrained`); the probes and the results are on the CPU either way.
    ``progress``: bars on stderr while a section embeds, trains its probes or builds the
    neighbours' corpus index."""
    import os

    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"run_analysis takes a model name or folder (the report's commands name it), not a "
                        f"{type(model).__name__}; for a model object call the sections' functions "
                        f"(probes.pos_probe, wsd.wsd_eval, contrast.contrast_eval, neighbors.cached_index)")
    config = config or AnalysisConfig()
    from ..io import check_output_dir, no_empty_folder_on_failure, output_lock

    out = Path(out)
    check_output_dir(out, "output folder")
    sections = list(dict.fromkeys(only or SECTIONS))   # (--only pos twice ran it twice)
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    # read before the sections run (an hour, perhaps): a bad file failed after them, losing them
    given_mix = read_mix_weights(Path(config.mix_weights)) if config.mix_weights else None
    learned_on = mix_learned_on(Path(config.mix_weights)) if config.mix_weights else None
    if "contrast" in sections:   # a category the probe cannot split failed after every other section
        from .contrast import check_categories, load_pairs
        check_categories(load_pairs(Path(config.contrast_file) if config.contrast_file else None))
    # the labelled data first (fetched when missing): offline, the WSD section failed after the
    # POS section had run
    from . import datasets
    for section, name in (("pos", "brown-pos"), ("wsd", "wordnet")):
        if section in sections:
            datasets.corpus_dir(name)
    if "neighbors" in sections:   # a missing, empty or undecodable corpus failed after the POS and WSD sections
        from .neighbors import read_corpus
        corpus = resolve_corpus(config.neighbors_corpus)
        if not read_corpus(corpus, config.neighbors_sentences or None):
            raise ValueError(f"--neighbors-corpus {config.neighbors_corpus}: {corpus} holds no sentences")
    if "similarity" in sections:   # (pair files fetched and read before any section runs)
        similarity_sets(config.similarity_sets)
        if config.similarity_corpus:
            _similarity_corpus(config)
    if "wsd" in sections:   # (a damaged file, or a --pca-word without examples, failed after the POS section)
        examples = datasets.wordnet_examples(datasets.corpus_dir("wordnet"))
        datasets.wordnet_senses(datasets.corpus_dir("wordnet"))
        if config.pca_word:   # (it failed after both WSD evaluations)
            _pca_key(_pca_groups(examples), config.pca_word)
    # one writer at a time: two runs into one folder mixed one's pictures into the other's report.
    # (The folder was made before the model loaded: a model name that is not one left it empty.)
    with no_empty_folder_on_failure(out), output_lock(out / "results.json", name=out):
        read_interpretation(out)   # (an unreadable one failed the report after every section had run)
        earlier = check_results_kept(out / "results.json", sections, config)
        remove_stale_staging(out)
        return _run_sections(model, out, config, sections, given_mix, log, learned_on, earlier, device, progress)


#: The prefix of the folder a run draws its pictures into (see :func:`_run_sections`).
STAGING_PREFIX = ".pictures-"


def remove_stale_staging(out: Path) -> None:
    """Delete the picture folders that killed runs left in ``out`` (a SIGKILL skips the run's
    own clean-up, and nothing else ever removed them). Call it only while holding ``out``'s
    lock: the run that owns a staging folder holds it, so none found then belongs to a live run."""
    for stale in out.glob(STAGING_PREFIX + "*"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


#: The sections whose numbers each setting of :class:`AnalysisConfig` changes: ``--only`` into
#: a report keeps its other sections only where those sections' settings are the recorded
#: ones. ``mix_weights`` is read by no section but drawn in the report beside them all.
SETTING_SECTIONS: Dict[str, Tuple[str, ...]] = {
    "seed": ("pos", "wsd", "contrast", "similarity"),
    "pos_train_sentences": ("pos",), "pos_test_sentences": ("pos",), "pos_l2": ("pos",),
    "pos_iterations": ("pos",),
    "wsd_max_lemmas": ("wsd",), "wsd_test_fraction": ("wsd",), "pca_word": ("wsd",),
    "contrast_file": ("contrast",), "contrast_l2": ("contrast",),
    "neighbors_corpus": ("neighbors",), "neighbors_sentences": ("neighbors",), "neighbors_k": ("neighbors",),
    "similarity_sets": ("similarity",), "similarity_corpus": ("similarity",),
    "untrained_control": ("pos", "wsd", "contrast", "similarity"),
    "batch_size": SECTIONS, "mix_weights": SECTIONS,
}


def check_results_kept(path: Path, sections: Sequence[str], config: AnalysisConfig) -> Optional[dict]:
    """The earlier results in ``path`` whose sections this run leaves out, to be kept beside
    the ones it computes (None when there are none to keep). Refused before any work: another
    tool's ``results.json`` (an experiment's runs), results that record no weights fingerprint
    (:func:`check_same_model` could not tell their model), and results whose kept sections
    were computed with other settings than ``config`` (:data:`SETTING_SECTIONS`): the report
    and its "Everything below" command state one set of settings for every section. (``--only
    contrast`` into a full report's folder once replaced its other sections with it alone.)"""
    if not path.is_file():
        return None
    earlier = read_results(path)
    kept = [s for s in earlier["sections"] if s not in sections]
    if not kept:
        return None
    where = f"{path}: holds the sections {', '.join(map(str, kept))}, which this run (--only {' --only '.join(sections)})"
    if not earlier.get("model_fingerprint"):
        raise ValueError(f"{where} would keep, but it records no weights fingerprint to tell that they are "
                         f"of the same model; give another --out or run them all")
    recorded = {**asdict(AnalysisConfig()), **earlier["config"]}   # (a setting added since: its default)
    given = asdict(config)
    changed = [f"--{name.replace('_', '-')} ({', '.join(s for s in SETTING_SECTIONS[name] if s in kept)}: "
               f"{recorded.get(name)!r} there, {value!r} here)"
               for name, value in given.items()
               if recorded.get(name) != value and set(SETTING_SECTIONS[name]) & set(kept)]
    if changed:
        raise ValueError(f"{where} would keep, but they were computed with other settings: {'; '.join(changed)}; "
                         f"give their settings, rerun them too (--only) or give another --out")
    try:   # (a hand-edited section failed the merged report after the new ones had run)
        render(earlier, str(earlier.get("model")), path.parent, config)
    except HAND_EDITED as e:
        raise ValueError(f"{path}: not as elmo analyze wrote it ({type(e).__name__}: {e}); its sections cannot "
                         f"be kept: run them all, or give another --out") from None
    return earlier


#: What rendering a hand-edited ``results.json`` raises (a section replaced by a number, say).
HAND_EDITED = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def check_same_model(path: Path, earlier: dict, model: str, fingerprint: str) -> None:
    """Refuse to keep ``earlier`` results (of ``path``) beside sections of a model with other
    weights: a report must be of one model, whatever the names say."""
    if earlier["model_fingerprint"] != fingerprint:
        raise ValueError(f"{path}: holds the results of model {earlier.get('model')} (weights fingerprint "
                         f"{earlier['model_fingerprint']}), not of {redact_url(str(model))} ({fingerprint}); "
                         f"a report is of one model: give another --out or run every section")


def read_results(path: Path) -> dict:
    """An analysis ``results.json``; a file that is not one (another tool's) or cannot be read
    (a folder, not UTF-8, not JSON) is a ValueError naming it and saying which: every read
    failure was "holds no results of elmo analyze", which blamed a damaged file of its own on
    another tool."""
    results = read_json(path, what="JSON", expected="the results.json of elmo analyze",
                        hint="correct it, or give --out a folder of its own")
    if (not isinstance(results, dict) or not isinstance(results.get("sections"), list)
            or not isinstance(results.get("config"), dict)):
        raise ValueError(f"{path}: holds no results of elmo analyze (another tool's?); "
                         f"give --out a folder of its own")
    return results


def _run_sections(model: str, out: Path, config: AnalysisConfig, sections: List[str],
                  given_mix: Optional[List[float]], log, learned_on: Optional[dict] = None,
                  earlier: Optional[dict] = None, device=None, progress: bool = False) -> dict:
    import torch

    import elmo
    from ..embedding import Embedder
    from ..io import atomic_commit, naming_as, writing
    from . import plots
    from .neighbors import model_fingerprint

    bilm = elmo.from_pretrained(model, device=device)
    if given_mix is not None and len(given_mix) != bilm.num_layers:
        raise ValueError(f"{config.mix_weights}: a mix of {len(given_mix)} layers, but {model} has "
                         f"{bilm.num_layers} (layer 0 and its LSTM layers); was it learned on another model?")
    # (a model URL given, or a biLM spec an experiment recorded, may hold a login: what this
    # run says and writes shows its password as ***)
    note = mix_model_note(learned_on, model) if given_mix is not None else None
    note = None if note is None else redact_url(note)
    if note:
        log(f"analyze: note: {config.mix_weights}: {note}")
    embedder = Embedder(bilm, batch_size=config.batch_size)
    results: dict = {"model": redact_url(str(model)), "num_layers": bilm.num_layers,
                     "width": bilm.output_dim, "config": asdict(config), "sections": sections,
                     "model_metadata": redact_record(_metadata(elmo.model_path(model)))[0],
                     "model_fingerprint": model_fingerprint(bilm),
                     "torch": {"version": torch.__version__, "threads": torch.get_num_threads()},
                     "seconds": {}}
    if earlier is not None:   # (before any section runs: minutes, on another model's folder)
        check_same_model(out / "results.json", earlier, model, results["model_fingerprint"])
    # The sections draw into a folder of their own, whose pictures replace the folder's only
    # once every section has run: a run that failed (or was stopped) midway left its new
    # pictures beside the earlier run's results.json and report, and one without --mix-weights
    # left an earlier run's picture of a given mix beside results that hold none.
    stage = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out))
    try:
        # (an error names the picture's place in OUT, not the stage; each picture names the model)
        with naming_as(stage, out), plots.signed(picture_footer(results)):
            for name in sections:
                t = time.time()
                log(f"analyze: {name} ...")
                # (a section's embedding, probes or corpus index: minutes without a word, unless
                # a bar says how far)
                results[name] = _SECTION_RUNNERS[name](embedder, config, stage, progress=progress)
                results["seconds"][name] = round(time.time() - t, 1)
            if earlier is not None:
                results = merge_kept(results, earlier)
            if config.mix_weights:
                results["given_mix_weights"] = given_mix
                results["given_mix_learned_on"] = redact_record(learned_on)[0]
                if note:
                    results["given_mix_note"] = note
                plots.mix_weights(results["given_mix_weights"], stage / "mix_weights_given.png",
                                  f"mix weights of {Path(config.mix_weights).name}")
            results["findings"] = paper_findings(results)
            # results.json and the report are written in the stage too, and everything then
            # moves in by renames (which take no space): a full disk at results.json left the
            # new pictures beside the earlier run's results and report
            for name, text in (("results.json", json.dumps(results, indent=2) + "\n"),
                               ("report.md", render(results, model, out, config))):
                with writing(out / name, "report"):
                    (stage / name).write_text(text, encoding="utf-8")
        for picture, section in PICTURES.items():
            if (stage / picture).is_file():
                atomic_commit(stage / picture, out / picture)
            elif section not in results["sections"] or section in sections:
                (out / picture).unlink(missing_ok=True)   # an earlier run's, of something this run does not hold
        atomic_commit(stage / "results.json", out / "results.json")
        atomic_commit(stage / "report.md", out / "report.md")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    log(f"analyze: wrote {out / 'report.md'}")
    return results


def picture_footer(results: dict) -> str:
    """What each picture of ``results``' run says of the model that made it: its name (a URL
    without its password) and its weights fingerprint, as the report names them."""
    return f"model {results['model']}, weights fingerprint {results['model_fingerprint']}"


#: Every picture :func:`run_analysis` draws (into the output folder), and the section it is of
#: (None: of the given mix, which every run draws anew or removes).
PICTURES: Dict[str, Optional[str]] = {
    "pos.png": "pos", "mix_weights_pos.png": "pos", "wsd.png": "wsd", "sense_pca.png": "wsd",
    "mix_weights_given.png": None, "similarity.png": "similarity"}


def merge_kept(results: dict, earlier: dict) -> dict:
    """``results`` of this run's sections with ``earlier``'s other sections as they were
    (their numbers, seconds, and the torch that computed them, which
    ``torch_sections`` records per section where it differs from ``torch``). The sections
    follow :data:`SECTIONS`' order."""
    computed = results["sections"]
    names = [s for s in SECTIONS if s in computed or s in earlier["sections"]]
    merged = {**{k: v for k, v in results.items() if k not in SECTIONS}, "sections": names, "torch": earlier["torch"],
              "seconds": {s: (results if s in computed else earlier)["seconds"].get(s) for s in names}}
    torch_sections = {s: t for s, t in (earlier.get("torch_sections") or {}).items() if s not in computed}
    if results["torch"] != earlier["torch"]:
        torch_sections.update({s: results["torch"] for s in computed})
    if torch_sections:
        merged["torch_sections"] = torch_sections
    for name in names:
        merged[name] = (results if name in computed else earlier)[name]
    return merged


def rewrite_report(out: Path, model: Optional[str] = None) -> Path:
    """Write ``report.md`` again from the folder's ``results.json`` (after editing its
    interpretation, say), computing nothing. ``model``: the model the caller named, which
    must be the one the results are of (another spelling of it is let be)."""
    from ..io import atomic_write_text, output_lock

    out = Path(out)
    if not (out / "results.json").is_file():
        raise FileNotFoundError(f"{out / 'results.json'}: no such file; --report-only rewrites "
                                "the report of a folder elmo analyze wrote")
    # a run writing into the folder replaces results.json and then report.md: a report
    # rewritten meanwhile from the results it replaced came after its own, and stayed
    with output_lock(out / "results.json", name=out):
        results = read_results(out / "results.json")
        read_interpretation(out)   # its own error, before the one below that blames results.json
        recorded = results.get("model")
        # (a URL's password is not recorded since: the one given is compared without it too)
        if model is not None and isinstance(recorded, str) \
                and _model_key(redact_url(model)) != _model_key(redact_url(recorded)):
            # (the report was rewritten under the recorded model's name without a word)
            raise ValueError(f"{out / 'results.json'} holds the results of model {recorded}, not of {model}; "
                             f"--report-only rewrites the report of the model that was run")
        try:
            config = AnalysisConfig(**results["config"])
            text = render(results, results["model"], out, config)
        except HAND_EDITED as e:
            # a hand-edited file (a section replaced by a number, "findings" removed) was a traceback
            raise ValueError(f"{out / 'results.json'}: not as elmo analyze wrote it ({type(e).__name__}: {e}); "
                             f"run the analysis again without --report-only") from None
        path = out / "report.md"
        atomic_write_text(path, text)
    return path


def _model_key(model: str) -> str:
    """What ``model`` names, without loading or fetching anything: a bundled name's folder or
    an existing path, resolved (so ``./m`` and ``/abs/m`` agree); otherwise the name itself (a
    published model's name, a URL)."""
    import elmo

    named = elmo.which_model(model, warn=False)         # (loading it warns where a name is both)
    if named.kind == "bundled" and named.path is not None:
        return str(named.path.resolve())
    path = Path(model).expanduser() if named.kind in ("local", "unknown") else None
    return str(path.resolve()) if path is not None and path.exists() else model


def _metadata(folder: Path) -> Optional[dict]:
    """The model folder's ``metadata.json`` (written by the trainer's export), if any, read
    with its checks: a damaged one was left out of the report in silence, as if the model had
    none (so its report did not say the model was adapted to a domain)."""
    from ..training.export import METADATA_FILE, read_metadata

    return read_metadata(folder) if (Path(folder) / METADATA_FILE).exists() else None


def _run_pos(embedder, config: AnalysisConfig, out: Path, progress: bool = False) -> dict:
    from . import datasets, plots
    from .probes import pos_probe

    folder = datasets.corpus_dir("brown-pos")
    train = datasets.brown_pos(folder, "train", config.pos_train_sentences or None, config.seed)
    test = datasets.brown_pos(folder, "test", config.pos_test_sentences or None, config.seed)
    res = pos_probe(embedder, train, test, config.pos_l2, config.pos_iterations, config.seed,
                    config.batch_size, progress)
    if config.untrained_control:
        from .vectors import untrained_copy
        control = pos_probe(untrained_copy(embedder.bilm, config.seed), train, test, config.pos_l2,
                            config.pos_iterations, config.seed, config.batch_size, progress)
        res["control_untrained"] = {k: control[k] for k in ("layers", "mix", "finding") if k in control}
    scores = {f"layer {j}": a for j, a in enumerate(res["layers"])}
    scores["mix"] = res["mix"]
    intervals = {f"layer {j}": iv for j, iv in enumerate(res["layers_interval"])}
    intervals["mix"] = res["mix_interval"]
    plots.layer_bars(scores, {"majority tag": res["majority_tag"],
                              "word's majority tag": res["word_majority_tag"]},
                     "POS: linear probe accuracy (Brown test), 95% intervals", "accuracy (%)",
                     out / "pos.png", intervals)
    plots.mix_weights(res["mix_weights"], out / "mix_weights_pos.png",
                      "mix weights learned by the POS probe")
    return res


def _run_wsd(embedder, config: AnalysisConfig, out: Path, progress: bool = False) -> dict:
    from . import datasets, plots, wsd

    folder = datasets.corpus_dir("wordnet")
    examples = datasets.wordnet_examples(folder)
    senses = datasets.wordnet_senses(folder)
    res = wsd.wsd_eval(embedder, examples, senses, config.wsd_test_fraction, config.seed,
                       config.wsd_max_lemmas or None, config.batch_size, progress)
    if config.untrained_control:
        from .vectors import untrained_copy
        control = wsd.wsd_eval(untrained_copy(embedder.bilm, config.seed), examples, senses,
                               config.wsd_test_fraction, config.seed,
                               config.wsd_max_lemmas or None, config.batch_size, progress)
        res["control_untrained"] = {k: control[k] for k in
                                    ("layers", "layers_seen_senses", "finding") if k in control}
    plots.layer_bars({f"layer {j}": f for j, f in enumerate(res["layers"])},
                     {"most frequent sense": res["mfs"]},
                     "WSD: nearest sense centroid F1 (WordNet examples), 95% intervals", "F1 (%)",
                     out / "wsd.png",
                     {f"layer {j}": iv for j, iv in enumerate(res["layers_interval"])})
    groups = _pca_groups(examples)
    key = _pca_key(groups, config.pca_word)
    items = groups[key]
    from .vectors import gathered_layers
    vecs = gathered_layers(embedder, [list(it.tokens) for it in items], [it.index for it in items],
                           config.batch_size)
    defs = datasets.wordnet_definitions(folder, {it.synset for it in items})
    names = [f"{it.synset}: {defs.get(it.synset, '')[:40]}" for it in items]
    plots.sense_pca(vecs, names, key[0], out / "sense_pca.png")
    res["pca_word"] = {"lemma": key[0], "pos": key[1], "n": len(items),
                       "senses": len({it.synset for it in items})}
    return res


#: Senses of the PCA picture's word: at most this many, those with the most examples.
PCA_SENSES = 5


def _pca_groups(examples) -> dict:
    """The candidates of the sense PCA picture: (lemma, pos) -> its instances of the
    :data:`PCA_SENSES` senses with the most examples, for every ambiguous lemma."""
    from . import wsd

    return {k: _top_senses(v, PCA_SENSES) for k, v in wsd.ambiguous(wsd.instances(examples)).items()}


def _pca_key(groups: dict, pca_word: Optional[str]) -> tuple:
    """The (lemma, pos) the sense PCA picture draws: ``pca_word``'s (``bank``: its part of
    speech with the most examples; ``bank/v``: that one, as the WSD results name lemmas), else
    the lemma with the most examples in its best-covered senses (ties: alphabetical)."""
    from . import wsd

    if not groups:   # (min() of nothing: "min() arg is an empty sequence")
        raise ValueError("no WordNet lemma has examples in 2 or more senses: there is no word for the "
                         "sense PCA picture")
    if not pca_word:
        return min(groups, key=lambda k: (-len(groups[k]), k))
    lemma, _, pos = pca_word.partition("/")   # ('bank/n' was looked up as the lemma 'bank/n')
    keys = [k for k in groups if k[0] == wsd.clean_lemma(lemma) and (not pos or k[1] == pos.lower())]
    if not keys:                              # ('Bank' found none: lemmas are lower case)
        speech = f" as part of speech {pos!r}" if pos else ""
        raise ValueError(f"--pca-word {pca_word!r}: no WordNet examples in 2+ senses{speech}")
    return max(keys, key=lambda k: len(groups[k]))


def _top_senses(items: list, n: int) -> list:
    """The instances of the ``n`` synsets with the most examples (ties: synset id)."""
    from collections import Counter

    counts = Counter(it.synset for it in items)
    keep = {s for s, _ in sorted(counts.items(), key=lambda sc: (-sc[1], sc[0]))[:n]}
    return [it for it in items if it.synset in keep]


def _run_neighbors(embedder, config: AnalysisConfig, out: Path, progress: bool = False) -> dict:
    from . import datasets
    from .neighbors import cached_index, context, query_vectors, static_neighbors

    corpus = resolve_corpus(config.neighbors_corpus)
    from ..data.fetch import DATA_CACHE_HINT
    index = cached_index(embedder, corpus, index_home(), config.neighbors_sentences or None,
                         config.batch_size, writable_hint=DATA_CACHE_HINT, progress=progress)
    words, layer0 = index.word_types()
    glove_error = None
    try:
        glove_words, glove_vecs = datasets.glove(datasets.corpus_dir("glove-50d"))
    except Exception as e:                               # optional: report why it is missing
        glove_words, glove_vecs, glove_error = None, None, str(e)
    queries = []
    k = config.neighbors_k
    for sentence, word in NEIGHBOR_QUERIES:
        tokens = sentence.split()
        pos, vecs = query_vectors(embedder, tokens, word)
        own = index.copies(tokens, pos)      # the query itself is no neighbour of its own
        row: Dict[str, Any] = {"sentence": sentence, "word": word, "layers": [], "same_word": [],
                               "occurrences": len(index.occurrences(word)) - len(own), "query_copies": len(own)}
        hit = lambda h: {"word": h.word, "score": h.score,
                         "context": context(index.sentences[h.sentence], h.token, 5)}
        for j in range(1, index.num_layers):
            row["layers"].append([hit(h) for h in index.search(vecs[j], j, k, exclude=own)])
            row["same_word"].append([hit(h) for h in index.search(vecs[j], j, k, word=word, exclude=own)])
        row["layer0_static"] = [{"word": h.word, "score": h.score}
                                for h in static_neighbors(words, layer0, word, k, query=vecs[0])]
        row["glove"] = ([{"word": h.word, "score": h.score}
                         for h in static_neighbors(glove_words, glove_vecs, word.lower(), k)]
                        if glove_words is not None else None)
        row["glove_missing"] = glove_error
        queries.append(row)
    return {"corpus": str(corpus), "corpus_spec": config.neighbors_corpus,
            "max_sentences": config.neighbors_sentences, "n_sentences": len(index.sentences),
            "n_tokens": int(index.positions.shape[0]), "queries": queries}


def _run_contrast(embedder, config: AnalysisConfig, out: Path, progress: bool = False) -> dict:
    from .contrast import contrast_eval, load_pairs

    from .vectors import untrained_copy

    items = load_pairs(Path(config.contrast_file) if config.contrast_file else None)
    res = contrast_eval(embedder, items, config.seed, config.contrast_l2, config.batch_size, progress)
    if config.untrained_control:
        control = contrast_eval(untrained_copy(embedder.bilm, config.seed), items, config.seed,
                                config.contrast_l2, config.batch_size, progress)
        res["control_untrained"] = {name: c["probe"] for name, c in control["categories"].items()}
    return res


def _similarity_corpus(config: AnalysisConfig) -> List[List[str]]:
    """The sentences of ``--similarity-corpus``; none is a ValueError naming it."""
    from .neighbors import read_corpus

    path = resolve_corpus(str(config.similarity_corpus))
    sentences = read_corpus(path)
    if not sentences:
        raise ValueError(f"--similarity-corpus {config.similarity_corpus}: {path} holds no sentences")
    return sentences


def _run_similarity(embedder, config: AnalysisConfig, out: Path, progress: bool = False) -> dict:
    from . import datasets, plots
    from .similarity import similarity_eval
    from ..tasks.embeddings import glove_cased, load_glove

    sets = similarity_sets(config.similarity_sets)
    glove, glove_error = None, None
    try:
        where = str(datasets.corpus_dir("glove-50d"))
        glove = (*load_glove(where), glove_cased(where))
    except Exception as e:                               # optional, as in the neighbours: say why
        glove_error = str(e)
    corpus = _similarity_corpus(config) if config.similarity_corpus else None
    res = similarity_eval(embedder, sets, glove, config.seed, config.batch_size, corpus=corpus,
                          progress=progress)
    res["glove_missing"] = glove_error
    if config.untrained_control:
        from .vectors import untrained_copy
        control = similarity_eval(untrained_copy(embedder.bilm, config.seed), sets, None, config.seed,
                                  config.batch_size, n_resamples=0, progress=progress)
        res["control_untrained"] = {name: c["layers"] for name, c in control["sets"].items()}
    plots.similarity_layers(res, out / "similarity.png")
    return res


_SECTION_RUNNERS = {"pos": _run_pos, "wsd": _run_wsd, "neighbors": _run_neighbors,
                    "contrast": _run_contrast, "similarity": _run_similarity}


# ----------------------------------------------------------------------------- findings
def paper_findings(results: dict) -> Dict[str, str]:
    """The paper's two layer findings, judged from the computed numbers.

    Each entry starts with ``holds``, ``does not hold``, ``not shown`` (difference within
    the bootstrap's 95% interval) or ``not tested``; where the untrained-copy control ran,
    its verdict follows, because a layer ordering that an untrained model shows as well
    comes from the architecture, not from what the biLM learned.
    """
    out = {}
    for name, section, claim in (("pos", "pos", "layer 1 is better than layer 2 for POS"),
                                 ("wsd", "wsd", "layer 2 is better than layer 1 for word senses")):
        res = results.get(section)
        if res is None:
            out[name] = f"not tested: the {section} section was not run ({claim})"
        elif "finding" not in res:
            out[name] = (f"not tested: the model has {_count(results['num_layers'] - 1, 'LSTM layer')}, "
                         f"the finding needs two ({claim})")
        else:
            out[name] = f"{res['finding']} [{claim}]"
            control = res.get("control_untrained", {}).get("finding")
            if control:
                out[name] += (f". The same comparison on an untrained copy of the model (random "
                              f"weights): {control}")
    return out


# ----------------------------------------------------------------------------- markdown
def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _count(n: int, noun: str) -> str:
    """``n noun``, the noun in the plural unless ``n`` is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _fixed(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, a value that rounds to zero without a sign (1 - cos of
    equal vectors comes out as -1e-8, printed ``-0.000``)."""
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


#: A hand-written reading of the numbers, kept in the output folder: the report shows it.
INTERPRETATION = "interpretation.md"


def read_interpretation(out: Path) -> Optional[str]:
    """The text of ``out``'s :data:`INTERPRETATION` file, stripped; None when there is none.

    A file that is not UTF-8 (one saved as Latin-1, say) is a ValueError naming it and the
    first bad byte: the codec's bare message named no file, a full run failed at its very
    end without a report, and ``--report-only`` blamed ``results.json`` for it."""
    path = Path(out) / INTERPRETATION
    if not path.is_file():
        return None
    return decode_text(path.read_bytes(), path, ValueError, expected="the report shows this hand-written "
                       "file, so save it as UTF-8 (or move it away)").strip()


def render(results: dict, model: str, out: Path, config: AnalysisConfig) -> str:
    """The markdown report for ``results`` (as :func:`run_analysis` returns them), with the
    folder's :data:`INTERPRETATION` file, when there is one, after the findings. A URL's
    password in it (the model's, in its name and commands) is shown as ``***``."""
    n_lstm = results["num_layers"] - 1
    threads = results["torch"]["threads"]
    lstm = ("layer 1 is the biLSTM" if n_lstm == 1 else f"layers 1..{n_lstm} are the biLSTM")
    lines = [f"# What the layers of `{model}` hold", "",
             f"Model: `{model}`, {_count(n_lstm, 'LSTM layer')}, vectors of width {results['width']}. "
             f"Layer 0 is the character CNN (context-free); {lstm}.",
             ""]
    if str(model) == "fixture":
        lines += ["**A smoke run**: the bundled `fixture` holds the tiny weights of the "
                  "AllenNLP test fixture, so these numbers say nothing about ELMo.", ""]
    if results.get("model_fingerprint"):
        lines += [f"Weights fingerprint `{results['model_fingerprint']}` "
                  "(`elmo.analysis.neighbors.model_fingerprint`: a hash of the options and "
                  "weights; a rerun on other weights under the same name gets another).", ""]
    if results.get("model_metadata"):
        lines += ["Model metadata: `" + json.dumps(results["model_metadata"], sort_keys=True)[:600]
                  + "`", ""]
    lines += [f"Everything below: `{command(model, out, config, threads=threads, sections=results['sections'])}`",
              "",
             "Numbers are from `results.json`; each table is followed by the command that "
             f"recomputes it.{_resampled_units(results)} Computed with torch "
             f"{results['torch']['version']} on {results['torch']['threads']} CPU thread(s)"
             f"{_torch_sections(results)}; another thread count can change the last digit.", "",
             "## The paper's two layer findings", ""]
    for key, text in results["findings"].items():
        lines.append(f"* **{'POS' if key == 'pos' else 'Word senses'}**: {text}")
    lines.append("")
    notes = read_interpretation(out)
    if notes is not None:
        lines += ["## Interpretation", "",
                  f"*Written by hand after reading the numbers below (`{INTERPRETATION}` in this "
                  "folder; a rerun keeps it and shows it here again, so check it still fits).*",
                  "", notes, ""]
    # (a section added to the report later may have run on another thread count)
    cmd = {name: command(model, out, config, name, (results.get("torch_sections") or {}).get(name, {})
                         .get("threads", threads)) for name in SECTIONS}
    if "pos" in results:
        lines += _render_pos(results["pos"], cmd["pos"])
    if "wsd" in results:
        lines += _render_wsd(results["wsd"], cmd["wsd"])
    if "neighbors" in results:
        lines += _render_neighbors(results["neighbors"], cmd["neighbors"], model, config)
    if "contrast" in results:
        lines += _render_contrast(results["contrast"], cmd["contrast"])
    if "similarity" in results:
        lines += _render_similarity(results["similarity"], cmd["similarity"], config.similarity_corpus)
    if "given_mix_weights" in results:
        w = results["given_mix_weights"]
        lines += ["## Mix weights given", "",
                  f"`{config.mix_weights}`: " + ", ".join(f"layer {j} {x:.3f}" for j, x in enumerate(w)),
                  ""]
        if results.get("given_mix_note"):
            lines += [f"**Note:** {results['given_mix_note']}.", ""]
        lines += ["![given mix weights](mix_weights_given.png)", ""]
    lines += ["## Time", "", ", ".join(f"{k} {v} s" for k, v in results["seconds"].items()), ""]
    # (a model URL, in its name and the commands, may hold a login: its password is not shown)
    return redact_url("\n".join(lines))


def _torch_sections(results: dict) -> str:
    """The sections that a later ``--only`` run computed with another torch or thread count,
    e.g. `` (similarity: torch 2.13.0+cpu on 1)`` ("" when there are none)."""
    other = results.get("torch_sections") or {}
    if not other:
        return ""
    return " (" + "; ".join(f"{name}: torch {t['version']} on {t['threads']}" for name, t in other.items()) + ")"


#: What each section's bootstrap intervals resample.
_RESAMPLED = {"pos": "test sentences (POS)", "wsd": "lemmas (WSD)",
              "similarity": "word pairs (word similarity)"}


def _resampled_units(results: dict) -> str:
    """The sentence saying what the bootstrap intervals of the sections present resample
    ("" when none of them has intervals)."""
    units = [unit for key, unit in _RESAMPLED.items() if key in results]
    if not units:
        return ""
    return f" Bootstrap intervals resample {', '.join(units[:-1])}{' or ' if len(units) > 1 else ''}{units[-1]}, 1000 times."


def _render_pos(r: dict, cmd: str) -> List[str]:
    lines = ["## POS: a linear probe per layer (paper Table 6)", "",
             f"Brown POS, reduced tags ({r['n_tags']} in training); probe trained on "
             f"{r['n_train_sentences']} train sentences ({r['n_train_tokens']} tokens), tested on "
             f"{r['n_test_sentences']} test sentences ({r['n_test_tokens']} tokens). Intervals: "
             "95%, resampling test sentences (they say how far the test sample could move a "
             "number, not how much another probe training run would).", "",
             "| representation | accuracy (%) | 95% interval |", "|---|---|---|", *_layer_rows(r),
             f"| mix of all layers | {_pct(r['mix'])} | {_span(r.get('mix_interval'))} |",
             *_control_rows(r, with_mix=True),
             f"| baseline: majority tag | {_pct(r['majority_tag'])} | |",
             f"| baseline: each word's majority tag | {_pct(r['word_majority_tag'])} | |",
             f"| baseline: layer 0 (context-free) | {_pct(r['layer0'])} | |", "",
             "Mix weights learned by the probe (softmax): "
             + ", ".join(f"layer {j} {w:.3f}" for j, w in enumerate(r["mix_weights"])), ""]
    if "layer1_minus_layer2" in r:
        b = r["layer1_minus_layer2"]
        lines += [f"Layer 1 minus layer 2: {signed(100 * b['diff'])} points "
                  f"(95% interval {100 * b['low']:+.2f} to {100 * b['high']:+.2f}).", ""]
    lines += [f"Reproduce: `{cmd}`", "", "![POS probe](pos.png) ![mix weights](mix_weights_pos.png)", ""]
    return lines


def _layer_rows(r: dict) -> List[str]:
    """Table rows of the score per layer, with its 95% interval when one was computed."""
    iv = r.get("layers_interval") or [None] * len(r["layers"])
    return [f"| layer {j} | {_pct(a)} | {_span(iv[j])} |" for j, a in enumerate(r["layers"])]


def _control_rows(r: dict, with_mix: bool = False) -> List[str]:
    """Table rows of the untrained-copy control, when it was run."""
    c = r.get("control_untrained")
    if not c:
        return []
    rows = [f"| control: layer {j} of an untrained copy | {_pct(a)} | |"
            for j, a in enumerate(c["layers"])]
    if with_mix:
        rows.append(f"| control: mix of an untrained copy | {_pct(c['mix'])} | |")
    return rows


def _span(interval: Optional[Sequence[float]]) -> str:
    """``[low, high]`` fractions as a percentage range (blank when not computed)."""
    return "" if not interval else f"{100 * interval[0]:.1f} to {100 * interval[1]:.1f}"


def _render_wsd(r: dict, cmd: str) -> List[str]:
    # results written before the sense centroids (no "method") are of 1-NN over train examples
    centroid = r.get("method") == "sense_centroid"
    method, short = (("the nearest sense centroid", "the centroids") if centroid
                     else ("1-nearest-neighbour", "1-NN"))
    lines = [f"## Word senses: {method} per layer (paper Table 5)", "",
             f"WordNet example sentences of {r['n_lemmas']} lemmas with examples in 2+ senses; "
             f"{r['n_train']} train and {r['n_test']} test occurrences"
             + ("; each sense is the mean of its train occurrences' vectors, and a test occurrence "
                "gets the sense of the nearest mean (cosine), as in the paper" if centroid else "")
             + f". {r['n_backoff']} test "
             f"occurrences had no train example of their lemma and backed off to the most frequent "
             f"SemCor sense; {r['n_test_sense_unseen']} test occurrences are of a sense with no "
             f"train example ({short} cannot get these right). Intervals: 95%, resampling lemmas.", "",
             "| representation | F1 (%) | 95% interval |", "|---|---|---|", *_layer_rows(r),
             *_control_rows(r),
             f"| baseline: most frequent sense | {_pct(r['mfs'])} | {_span(r.get('mfs_interval'))} |", "",
             f"Only the {r['n_test'] - r['n_test_sense_unseen']} test occurrences whose sense has a "
             "train example (accuracy %): "
             + ", ".join(f"layer {j} {_pct(a)}" for j, a in enumerate(r["layers_seen_senses"]))
             + f"; most frequent sense {_pct(r['mfs_seen_senses'])}"
             + ("; untrained copy: " + ", ".join(
                 f"layer {j} {_pct(a)}" for j, a in
                 enumerate(r["control_untrained"]["layers_seen_senses"]))
                if r.get("control_untrained", {}).get("layers_seen_senses") else "")
             + ".", ""]
    if "layer2_minus_layer1" in r:
        b = r["layer2_minus_layer1"]
        # a results.json written before the difference was of F1 holds one of accuracy
        # (``--report-only`` of it printed that as F1 points)
        unit = "F1 points" if b.get("metric") == "f1" else "points of accuracy"
        lines += [f"Layer 2 minus layer 1: {signed(100 * b['diff'])} {unit} "
                  f"(95% interval {100 * b['low']:+.2f} to {100 * b['high']:+.2f})"]
        s = r.get("layer2_minus_layer1_seen_senses")
        if s:
            lines[-1] += (f"; on the occurrences whose sense has a train example "
                          f"{signed(100 * s['diff'])} points ({100 * s['low']:+.2f} to "
                          f"{100 * s['high']:+.2f}). Only those can differ between layers")
        lines += [lines.pop() + ".", ""]
    p = r.get("pca_word")
    # (the command computes sense centroids now: it would not give a 1-NN report's numbers)
    later = "" if centroid else (" (this version computes the sense centroids with it, not the 1-NN "
                                 "of the numbers above)")
    lines += [f"Reproduce: `{cmd}`{later}", "", "![WSD](wsd.png)", ""]
    if p:
        lines += [f"The {p['n']} WordNet examples of `{p['lemma']}` ({p['pos']}, {p['senses']} "
                  "senses with the most examples), PCA per layer, coloured by synset:", "", "![sense PCA](sense_pca.png)", ""]
    return lines


def _render_neighbors(r: dict, cmd: str, model: str, config: AnalysisConfig) -> List[str]:
    lines = ["## Contextual neighbours (paper Table 4)", "",
             f"Corpus `{r['corpus']}`: {r['n_sentences']} sentences, {r['n_tokens']} tokens, "
             "exact cosine search. Static neighbours: layer 0 over the corpus words, GloVe 50d "
             "over its 400k words.", ""]
    for q in r["queries"]:
        lines += [f"**{q['word']}** in *{q['sentence']}*"
                  + (f" (a corpus sentence, {q['query_copies']} time(s): the query's own "
                     "occurrences are left out)" if q.get("query_copies") else ""), ""]
        for j, hits in enumerate(q["layers"], 1):
            lines.append(f"* layer {j}, any word: " + "; ".join(
                f"{h['context']} ({h['score']:.2f})" for h in hits))
        for j, hits in enumerate(q["same_word"], 1):
            lines.append(f"* layer {j}, other uses of *{q['word']}* ({q['occurrences']} in the "
                         "corpus): " + ("; ".join(f"{h['context']} ({h['score']:.2f})" for h in hits)
                                        or "none"))
        lines.append("* layer 0 (static): " + ", ".join(h["word"] for h in q["layer0_static"]))
        if q["glove"] is not None:
            lines.append("* GloVe (static): " + ", ".join(h["word"] for h in q["glove"]))
        elif q.get("glove_missing"):   # (the line was left out, though the header promises GloVe)
            lines.append(f"* GloVe (static): not available ({q['glove_missing']})")
        lines += [f"* reproduce one: `{_neighbors_command(q, r, model, config)} [--same-word]`", ""]
    lines += [f"Reproduce all: `{cmd}`", ""]
    return lines


def _neighbors_command(q: dict, r: dict, model: str, config: AnalysisConfig) -> str:
    """The ``elmo neighbors`` command line that gives query ``q`` of neighbour results ``r``
    again (shell-quoted, pasteable), with every setting that changes a number."""
    parts = ["elmo", "neighbors", q["sentence"], "--word", q["word"], "--model", str(model),
             "--corpus", r["corpus_spec"]]
    if r["max_sentences"]:
        parts += ["--max-sentences", str(r["max_sentences"])]
    parts += ["-k", str(config.neighbors_k)]     # (not the hits found: fewer on a small corpus)
    if q.get("glove") is None:   # GloVe was not there: the command would fail to fetch it, at its end
        parts.append("--no-glove")
    if config.batch_size != NEIGHBORS_BATCH_SIZE:
        parts += ["--batch-size", str(config.batch_size)]
    return " ".join(shlex.quote(p) for p in parts)


#: ``elmo neighbors``'s default ``--batch-size``.
NEIGHBORS_BATCH_SIZE = 32


def _render_contrast(r: dict, cmd: str) -> List[str]:
    cats = r["categories"]
    n_layers = len(r["movement"]["words"])
    head = "| | " + " | ".join(f"layer {j}" for j in range(n_layers)) + " |"
    sep = "|---" * (n_layers + 1) + "|"
    lines = ["## Contrast pairs: same words, swapped relation", "",
             f"{r['n_items']} targets in {sum(c['n_pairs'] for c in cats.values())} pairs "
             "(" + ", ".join(f"{k} {v['n_pairs']}" for k, v in cats.items()) + "); "
             f"{_count(r['different_words'], 'pair')} whose sentences differ in their words. The built-in "
             "set was written before any model was run on it and is not tuned.", "",
             "How far vectors move between the two sentences of a pair (mean 1 - cosine), with "
             "the spread of random token pairs for scale:", "", head, sep]
    m = r["movement"]
    for key, name in (("words", "all words"), ("targets", "target words"),
                      ("sentence", "mean-pooled sentence"), ("spread", "spread (random tokens)")):
        lines.append(f"| {name} | " + " | ".join(_fixed(x) for x in m[key]) + " |")
    for name, c in cats.items():
        lines.append(f"| target words, {name} | "
                     + " | ".join(_fixed(x) for x in c["movement"]["targets"]) + " |")
    lines += ["", "A probe trained on half of the pairs, tested on the other half (and back), "
              "accuracy % on held-out targets / held-out pairs ranked the right way round; "
              "chance is 50 / 50 with two labels:", "", head, sep]
    control = r.get("control_untrained", {})
    for name, c in cats.items():
        chance = (f"; chance {_span(c['chance_range'])}" if c.get("chance_range") else "")
        if c.get("chance") and abs(c["chance"] - 0.5) > 1e-9:   # more than two labels
            chance = f"; {round(1 / c['chance'])} labels: chance {_pct(c['chance'])} on targets" + chance
        lines.append(f"| {name} ({c['n_pairs']} pairs{chance}) | " + " | ".join(
            f"{_pct(p['accuracy'])} / {_pct(p['pair_accuracy'])}" for p in c["probe"]) + " |")
        if name in control:
            lines.append(f"| {name}, untrained copy | " + " | ".join(
                f"{_pct(p['accuracy'])} / {_pct(p['pair_accuracy'])}" for p in control[name]) + " |")
    lines += ["", "Layer 0 gives a word the same vector in both sentences, so it must score "
              "exactly chance: a check of the set, not a finding. "
              + ("The *untrained copy* rows are the same architecture with fresh random "
                 "weights: word order alone lets a probe read cues such as `by the X` or "
                 "`X was`, so only the margin over that control is learned. " if control else "")
              + "With this few pairs one held-out target is several points. *chance* is the "
              "range (95%) that a coin flip scores on as many distinct rankings (a pair written "
              "in both orders counts once), from the binomial; the "
              "targets of one pair are not independent, so the true range is somewhat wider, "
              "and a score inside it is no evidence at all.", "", f"Reproduce: `{cmd}`", ""]
    return lines


def _rho(x: Optional[float]) -> str:
    """A correlation with three decimals; ``-`` where it is undefined."""
    return "-" if x is None else _fixed(x)


def _rho_span(interval: Optional[Sequence[float]]) -> str:
    return "" if not interval else f"{_fixed(interval[0])} to {_fixed(interval[1])}"


def _render_similarity(r: dict, cmd: str, config_corpus: Optional[str] = None) -> List[str]:
    sets, control = r["sets"], r.get("control_untrained") or {}
    names = list(sets)
    head = "| representation | " + " | ".join(f"{n} ({s['n_pairs']} pairs)" for n, s in sets.items()) + " |"
    n_layers = len(next(iter(sets.values()))["layers"])
    lines = ["## Word similarity: Spearman's rho per layer", "",
             "Each word embedded alone (a one-token sentence), cosine of the two words' vectors "
             "against the human scores. Layer 0 is the character CNN's context-free vector; layers "
             "1 and up are the LSTM's vectors of the word read with nothing around it, a function "
             "of the word type too, but of a context that no use of it in text has. Intervals: 95%, "
             "resampling pairs.", "", head, "|---" * (len(names) + 1) + "|"]
    for j in range(n_layers):
        lines.append(f"| layer {j} | " + " | ".join(
            f"{_rho(s['layers'][j])}{_in_parentheses(_rho_span(s['layers_interval'][j]))}" for s in sets.values()) + " |")
    for j in range(n_layers if control else 0):
        lines.append(f"| control: layer {j} of an untrained copy | "
                     + " | ".join(_rho(control[n][j]) for n in names) + " |")
    lines.append("")
    if r.get("glove_missing"):
        lines += [f"GloVe baseline: not available ({r['glove_missing']}).", ""]
    for name, s in sets.items():
        g = s.get("glove")
        if g is None:
            continue
        missing = ": " + _word_list(g["missing_words"], g["n_missing_words"]) if g["missing_words"] else ""
        lines += [f"**{name}**: GloVe 50d covers {g['n_pairs']} of {s['n_pairs']} pairs "
                  f"({_count(g['n_missing_words'], 'word')} missing{missing}). On those pairs: GloVe "
                  f"{_rho(g['rho'])}{_in_parentheses(_rho_span(g['interval']))}; "
                  + ", ".join(f"layer {j} {_rho(x)}" for j, x in enumerate(g["layers"])) + ".", ""]
    if _undefined_reasons(r):
        lines += ["A `-` is undefined: " + "; ".join(_undefined_reasons(r)) + ".", ""]
    lines += _sample_lines(r)
    if control:
        lines += ["The untrained copy's character CNN already reads spelling: words that share "
                  "letters get close vectors without any training, so only the margin over it is "
                  "learned.", ""]
    lines += _render_type_average(r.get("type_average"), config_corpus)
    lines += [f"Reproduce: `{cmd}`", "", "![word similarity](similarity.png)", ""]
    return lines


def _in_parentheses(text: str) -> str:
    """`` (text)``, or nothing for no text (an undefined rho has no interval: it read ``- ()``)."""
    return f" ({text})" if text else ""


def _undefined_reasons(r: dict) -> List[str]:
    """Why the rhos shown as ``-`` are undefined, sorted: those of each set's layers, and those
    of GloVe, of the layers on GloVe's pairs and of the type averages (whose dashes were
    explained by nothing, and GloVe's rho on 1 pair was printed ``- ()``)."""
    reasons = {u for s in r["sets"].values() for u in s["layers_undefined"] if u}
    for s in r["sets"].values():
        g = s.get("glove") or {}
        reasons |= {g.get("undefined"), *(g.get("layers_undefined") or [])}
    for s in (r.get("type_average") or {}).values():
        reasons |= {*s["layers_undefined"], *(s.get("alone_layers_undefined") or [])}
    return sorted(u for u in reasons if u)


#: Characters of a word that a report's list of words shows (a pair file's word may be long).
SHOWN_WORD = 40


def _word_list(words: Sequence[str], total: int) -> str:
    """``words`` (the first of ``total``) comma separated, ``...`` for the rest; a word past
    :data:`SHOWN_WORD` characters is cut, with its length (a 300-letter word filled the line)."""
    shown = [w if len(w) <= SHOWN_WORD else f"{w[:SHOWN_WORD]}… ({len(w)} characters)" for w in words]
    return ", ".join(shown) + (", ..." if total > len(words) else "")


def _sample_lines(r: dict) -> List[str]:
    """What to know of the pairs behind the rhos: a warning for each interval on fewer than
    :data:`~elmo.analysis.similarity.MIN_PAIRS` pairs (a set, GloVe's share of it, the pairs
    the corpus covers), a set's repeated pairs, and the count of bootstrap draws left out as
    undefined where any was (results written before these counts have none)."""
    from .similarity import MIN_PAIRS
    few = []
    for name, s in r["sets"].items():
        few.append((f"{name}", s["n_pairs"]))
        if s.get("glove") and s["glove"]["interval"]:
            few.append((f"{name}, GloVe's pairs", s["glove"]["n_pairs"]))
    few += [(f"{name}, type averages", s["n_pairs"]) for name, s in (r.get("type_average") or {}).items()]
    lines = [f"**Warning: {name} has only {_count(n, 'pair')}**: below {MIN_PAIRS} pairs its intervals say "
             f"little, since resampling so few pairs draws the same few again and again (an interval can "
             f"collapse to one value, e.g. 1.000 to 1.000)." for name, n in few if 0 < n < MIN_PAIRS]
    for name, s in r["sets"].items():
        again = s.get("repeated_pairs") or []
        if again:
            shown = ", ".join(f"{a}/{b}" for a, b in again[:10]) + (", ..." if len(again) > 10 else "")
            lines.append(f"**{name}**: {_count(len(again), 'pair')} {'repeats' if len(again) == 1 else 'repeat'} an earlier pair (the same two words, "
                         f"in either order), each counted in rho as often as listed: {shown}.")
    skipped = [f"{name}{how} layer {j}: {n}" for how, sets in (("", r["sets"]),
                                                              (", type averages", r.get("type_average") or {}))
               for name, s in sets.items() for j, n in enumerate(s.get("layers_undefined_draws") or []) if n]
    skipped += [f"{name}, GloVe: {s['glove']['undefined_draws']}" for name, s in r["sets"].items()
                if (s.get("glove") or {}).get("undefined_draws")]
    if skipped:
        lines.append("Intervals are over the resamples where rho is defined; left out as undefined (a "
                     "constant side): " + "; ".join(skipped) + ".")
    return [x for line in lines for x in (line, "")]


def _render_type_average(sets: Optional[dict], corpus: Optional[str]) -> List[str]:
    """The table of the type averages over ``corpus``, when they were computed."""
    if not sets:
        return []
    names = list(sets)
    n_layers = len(next(iter(sets.values()))["layers"])
    lines = [f"Type averages over `{corpus}`: each word the mean of its contextual vectors over its "
             "occurrences there (exact tokens), on the pairs both of whose words occur; the lone "
             "word's rho on those same pairs beside it:", "",
             "| representation | " + " | ".join(f"{n} ({s['n_pairs']} pairs)" for n, s in sets.items()) + " |",
             "|---" * (len(names) + 1) + "|"]
    for j in range(n_layers):
        lines.append(f"| layer {j}, type average | " + " | ".join(
            f"{_rho(s['layers'][j])}{_in_parentheses(_rho_span(s['layers_interval'][j]))}" for s in sets.values()) + " |")
        lines.append(f"| layer {j}, alone | " + " | ".join(_rho(s["alone_layers"][j]) for s in sets.values()) + " |")
    lines.append("")
    for name, s in sets.items():
        if s["n_missing_words"]:
            lines += [f"**{name}**: {_count(s['n_missing_words'], 'word')} of its pairs do not occur in the "
                      "corpus: " + _word_list(s["missing_words"], s["n_missing_words"]) + ".", ""]
    return lines
