"""``elmo analyze``: run every analysis on one model and write a markdown report.

    results = run_analysis("path/to/model", "experiments/analysis/NAME", AnalysisConfig())

writes ``results.json`` (every number), the PNG pictures and ``report.md``. Every table in the
report is followed by the command that recomputes it (``--only SECTION`` with the same
settings), and the paper's two layer findings are stated from the computed numbers and a
paired bootstrap, never assumed.

This module holds the run's settings (:class:`AnalysisConfig`), where its data comes from,
and the run itself (checks before any section runs, kept results, the staged pictures);
:mod:`elmo.analysis.sections` computes each section and :mod:`elmo.analysis.markdown` writes
the report. Those import this one: it imports them inside its functions.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
import time
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..config import ConfigError
from ..text_files import read_json
from ..redact import redact_record, redact_url
from ..jobconfig import check_numbers, setting

if TYPE_CHECKING:
    import numpy as np

SECTIONS = ("pos", "wsd", "neighbors", "contrast", "similarity")

#: Query sentences for the neighbour section (one word each, two senses per word).
NEIGHBOR_QUERIES = [
    ("the children ran outside to play in the snow .", "play"),
    ("we bought tickets for the new play at the theatre .", "play"),
    ("they walked along the bank of the river .", "bank"),
    ("she asked the bank for a larger loan .", "bank"),
]

#: ``elmo neighbors``'s default ``--batch-size`` (a report's neighbour command names another).
NEIGHBORS_BATCH_SIZE = 32


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
def resolve_corpus(spec: str, fetch: bool = True) -> Path:
    """A text file for ``--neighbors-corpus``: a path, or ``CORPUS:SPLIT`` of a standard-form
    corpus (``brown:dev`` -> ``brown/dev.txt``, fetched when missing unless not ``fetch``)."""
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
        folder = corpus_dir(name, fetch)
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
    pairs (:func:`elmo.analysis.similarity.read_pairs`) of each file of
    :func:`similarity_set_files`."""
    from .similarity import read_pairs

    return {name: read_pairs(path) for name, path in similarity_set_files(spec).items()}


def similarity_set_files(spec: str, fetch: bool = True) -> Dict[str, Path]:
    """The files of ``--similarity-sets`` (comma separated): name -> its pair file. Each is a
    pair file, or the name of a pair corpus of ``elmo data`` (``wordsim353`` ->
    ``wordsim353/pairs.tsv``, fetched when missing unless not ``fetch``)."""
    from ..data.sources import SOURCES
    from .datasets import corpus_dir

    pair_corpora = sorted(n for n, src in SOURCES.items() if src.kind == "pairs")
    names = [n.strip() for n in spec.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise ValueError(f"--similarity-sets {spec!r}: give distinct pair corpora or files, comma separated, "
                         f"e.g. wordsim353,simlex999")
    files = {}
    for name in names:
        if Path(name).exists():
            files[name] = Path(name)
        elif name in pair_corpora:
            files[name] = corpus_dir(name, fetch) / "pairs.tsv"
        else:   # (a corpus of another kind, brown say, was fetched before it failed)
            raise FileNotFoundError(f"--similarity-sets {name}: no such file, nor a corpus of word pairs "
                                    f"({', '.join(pair_corpora)})")
    return files


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
    import numpy as np   # (here: `elmo analyze --help` imports this module for its options)

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
        from ..zip_records import zip_damage
        damage = zip_damage(path)   # (torch.load checks no CRC: a flipped byte was another weight)
        if damage is not None:
            raise ValueError(f"{path}: {damage}; --mix-weights takes {what}")
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
    import numpy as np

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
    import numpy as np

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
                 only: Optional[Sequence[str]] = None, log=print, device=None, progress: bool = False,
                 overwrite: bool = False) -> dict:
    """Run the chosen sections (default: all), write results, pictures and the report.

    ``out`` may hold an earlier report. Its sections that this run leaves out are kept, and
    the report written with them and the new ones, where they are of the same weights
    (:func:`check_same_model`), settings and input files; otherwise, or for another tool's
    ``results.json``, the run is refused before any section runs (:func:`check_results_kept`),
    as is a second run into the folder while one runs. A report of another model that this
    run would replace whole is refused too, unless ``overwrite`` (two run folders of one name,
    ``a/lm/model`` and ``b/lm/model``, share the default folder ``experiments/analysis/lm``).

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
    from ..io import no_empty_folder_on_failure
    from ..output_checks import check_output_dir
    from .markdown import read_interpretation
    from .report_lock import report_lock
    from .sections import pca_groups, pca_key, similarity_corpus

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
            similarity_corpus(config)
    if "wsd" in sections:   # (a damaged file, or a --pca-word without examples, failed after the POS section)
        examples = datasets.wordnet_examples(datasets.corpus_dir("wordnet"))
        datasets.wordnet_senses(datasets.corpus_dir("wordnet"))
        if config.pca_word:   # (it failed after both WSD evaluations)
            pca_key(pca_groups(examples), config.pca_word)
    # one writer at a time: two runs into one folder mixed one's pictures into the other's report.
    # (The folder was made before the model loaded: a model name that is not one left it empty.)
    # The lock is OUT.lock beside the folder, held through the swap (see report_lock).
    with no_empty_folder_on_failure(out), report_lock(out):
        read_interpretation(out)   # (an unreadable one failed the report after every section had run)
        earlier = check_results_kept(out / "results.json", sections, config)
        check_swappable(out, log)
        remove_stale_staging(out)
        return _run_sections(model, out, config, sections, given_mix, log, learned_on, earlier, device, progress,
                             overwrite)


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
    and its "Everything below" command state one set of settings for every section; and kept
    sections computed on other input files or pairs than those of now, or that record none
    (:func:`~elmo.analysis.inputs.check_inputs_kept`, :func:`check_contrast_pairs_kept`).
    (``--only contrast`` into a full report's folder once replaced its other sections with it
    alone.)"""
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
    from .inputs import check_inputs_kept
    from .markdown import render

    try:   # (a hand-edited section failed the merged report after the new ones had run)
        render(earlier, str(earlier.get("model")), path.parent, config)
    except HAND_EDITED as e:
        raise ValueError(f"{path}: not as elmo analyze wrote it ({type(e).__name__}: {e}); its sections cannot "
                         f"be kept: run them all, or give another --out") from None
    # (a setting names a file, or none: the file edited under the same name kept other numbers)
    for name in kept:
        if name == "contrast":
            check_contrast_pairs_kept(path, earlier, config)
        elif name in SECTIONS:
            check_inputs_kept(path, earlier, name, config)
    return earlier


def check_contrast_pairs_kept(path: Path, earlier: dict, config: AnalysisConfig) -> None:
    """Refuse to keep ``earlier``'s contrast section unless it records the pairs that
    ``config`` names now (:func:`~elmo.analysis.contrast.pairs_record`): ``--contrast-file``
    compares the file's name only, and a file edited under the same name, or a new version of
    the built-in set, gave the kept numbers on other pairs without a word. Results that record
    no pairs (written before they were recorded) cannot be told apart, and are refused too."""
    from .contrast import pairs_record

    section = earlier.get("contrast")
    recorded = section.get("pairs") if isinstance(section, dict) else None
    way_out = "rerun it too (--only contrast) or give another --out"
    try:
        now = pairs_record(Path(config.contrast_file) if config.contrast_file else None)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: its contrast section would be kept, but its pairs cannot be read now to check "
                         f"that they are the same ({e}); {way_out}") from None
    if not isinstance(recorded, dict):
        raise ValueError(f"{path}: its contrast section records no digest of its pairs (written before they "
                         f"were recorded), so it cannot be told to be of the pairs of {now['source']} now; "
                         f"{way_out}")
    if recorded.get("sha256") != now["sha256"]:
        what = (f"the built-in set, version {recorded.get('version')} there, {now['version']} here"
                if now["version"] is not None and recorded.get("version") not in (None, now["version"])
                else f"{now['source']}: other pairs than when they were computed")
        raise ValueError(f"{path}: its contrast section would be kept, but it was computed on other contrast "
                         f"pairs ({what}); {way_out}")


#: What rendering a hand-edited ``results.json`` raises (a section replaced by a number, say).
HAND_EDITED = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def check_same_model(path: Path, earlier: dict, model: str, fingerprint: str, bilm=None,
                     way_out: str = "give another --out or run every section") -> None:
    """Refuse to keep ``earlier`` results (of ``path``) beside sections of a model with other
    weights: a report must be of one model, whatever the names say. ``bilm``, where given, is
    the model of ``fingerprint``: results written before the fingerprint took its present form
    (:func:`~elmo.model_digest.model_digest`) record the form of their time, which is this
    model's if it is ``bilm``'s (:func:`~elmo.model_digest.recorded_digest`). ``way_out`` ends
    the message."""
    from ..model_digest import recorded_digest

    recorded = earlier["model_fingerprint"]
    if recorded == fingerprint or (bilm is not None and isinstance(recorded, str)
                                   and recorded_digest(bilm, {recorded}, fingerprint) is not None):
        return
    raise ValueError(f"{path}: holds the results of model {earlier.get('model')} (weights fingerprint "
                     f"{recorded}), not of {redact_url(str(model))} ({fingerprint}); "
                     f"a report is of one model: {way_out}")


def check_replacing_same_model(path: Path, model: str, fingerprint: str, bilm) -> None:
    """Refuse to replace the report in ``path``'s folder with one of another model (a run that
    keeps none of its sections): the other model's results would be lost without a word.
    A report that records no fingerprint (written before they were recorded) is taken for
    this model's where it names the same model or none. Call it while holding the folder's
    lock."""
    if not path.is_file():
        return
    earlier = read_results(path)
    way_out = "give another --out, or --overwrite to replace it"
    if earlier.get("model_fingerprint"):
        check_same_model(path, earlier, model, fingerprint, bilm, way_out)
    elif earlier.get("model") not in (None, redact_url(str(model))):
        raise ValueError(f"{path}: holds the results of model {earlier.get('model')}, not of "
                         f"{redact_url(str(model))}; {way_out}")


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
                  earlier: Optional[dict] = None, device=None, progress: bool = False,
                  overwrite: bool = False) -> dict:
    import torch

    import elmo
    from ..embedding import Embedder
    from ..folder_swap import naming_as
    from ..output_checks import writing
    from . import plots
    from .inputs import input_digests
    from .markdown import paper_findings, render
    from ..model_digest import model_digest
    from .sections import SECTION_RUNNERS

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
                     "model_fingerprint": model_digest(bilm),
                     "torch": {"version": torch.__version__, "threads": torch.get_num_threads()},
                     "seconds": {}}
    if earlier is not None:   # (before any section runs: minutes, on another model's folder)
        check_same_model(out / "results.json", earlier, model, results["model_fingerprint"], bilm)
    elif not overwrite:
        check_replacing_same_model(out / "results.json", model, results["model_fingerprint"], bilm)
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
                # (which files, hashed before the section reads them: a report keeps this section
                # only while they are unchanged)
                inputs = input_digests(name, config)
                # (a section's embedding, probes or corpus index: minutes without a word, unless
                # a bar says how far)
                # (the digest hashed above, not again: ~0.5 s for the original-size model)
                results[name] = SECTION_RUNNERS[name](embedder, config, stage, progress=progress,
                                                      digest=results["model_fingerprint"])
                if inputs is not None:
                    results[name]["inputs"] = inputs
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
            # results.json and the report are written in the stage too, and the whole set then
            # takes the folder's place in one step: a full disk at results.json left the new
            # pictures beside the earlier run's results and report
            for name, text in (("results.json", json.dumps(results, indent=2) + "\n"),
                               ("report.md", render(results, model, out, config))):
                with writing(out / name, "report"):
                    (stage / name).write_text(text, encoding="utf-8")
        # an earlier run's pictures of something this run does not hold
        dropped = [picture for picture, section in PICTURES.items() if not (stage / picture).is_file()
                   and (section not in results["sections"] or section in sections)]
        with writing(out, "report"):
            swap_in(out, stage, dropped, log)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    log(f"analyze: wrote {out / 'report.md'}")
    return results


def swap_in(out: Path, stage: Path, dropped: Sequence[str], log=print) -> None:
    """Make the files of ``stage`` (a folder in ``out``: this run's pictures, results.json and
    report.md) ``out``'s, all in one step. A new folder beside ``out`` gets them, and links to
    every other entry of ``out`` (kept sections' pictures, the interpretation, a user's files)
    but the pictures ``dropped``, the stage and the folder's old lock file (``results.json.lock``:
    a copy, where there are no hard links, stayed behind unlocked); then the two folders swap
    (:func:`elmo.folder_swap.atomic_folder`), under the caller's
    :func:`elmo.analysis.report_lock.report_lock`. Moved into ``out`` one by one, a kill between
    two moves left new pictures beside the earlier run's results, or new results beside its
    report. Where this process works in ``out``, so (most likely) does the shell that started
    it, left in the old folder, deleted: ``log`` says so in one line (``ls`` there shows
    nothing, and ``cat report.md`` finds none)."""
    import os

    from ..folder_swap import atomic_folder, copy_owner, keep_other_entries
    from ..output_lock import lock_path
    folder = out.resolve()
    here = os.getcwd()
    with atomic_folder(folder) as new:
        copy_owner(folder, new)   # (the folder stays its owner's, as it was: not the runner's)
        for path in stage.iterdir():
            shutil.move(str(path), str(new / path.name))
        keep_other_entries(folder, new)
        shutil.rmtree(new / stage.name)   # (the stage's empty copy)
        lock_path(new / "results.json").unlink(missing_ok=True)   # (the old folder's, held: it goes with it)
        for picture in dropped:
            (new / picture).unlink(missing_ok=True)
    if here == str(folder) or here.startswith(str(folder) + os.sep):
        # (a process working in OUT stays in it, not in the old folder, now deleted; a folder
        # of it that was not carried over is gone, and the report, written, stands)
        with suppress(OSError):
            os.chdir(here)
        log(f"analyze: {out} is a new folder now: a shell working in it still sees the old one, deleted "
            f"(empty); cd into it again ({shlex.quote(here)})")


def check_swappable(out: Path, log=print) -> None:
    """Refuse, before any section runs, an ``out`` whose new files could not be swapped in: the
    new folder is made beside it (:func:`swap_in`), so the folder above it must take one (checked
    before the lock, whose file goes there too: :func:`elmo.analysis.report_lock.report_lock`), and
    the two must be on one mount; ``OUT.partial`` must be free for it. A folder there is what a
    killed run left: deleted now, with a line that says so (the swap deleted it in silence, after
    every section had run). Call it while holding ``out``'s lock."""
    import os

    from ..io import OutputError
    from ..folder_swap import partial_folder, refuse_mounts_below, remove_leftover, renames_stop_at, sticky_holds
    folder = out.resolve()
    parent = folder.parent
    # (each failed after every section had run: "Operation not permitted", "Device or resource
    # busy", "File exists")
    if sticky_holds(folder):
        raise OutputError(f"{out}: the report is written whole beside it and then swapped in, but in {parent} "
                          f"(sticky, as /tmp) only {out}'s owner may move it; give --out a folder of your own")
    if renames_stop_at(folder):
        raise OutputError(f"{out}: is a mount point; the report is written whole beside it and then swapped in, "
                          f"which cannot cross into another mount: give --out a folder inside it")
    refuse_mounts_below(folder, named=out)   # (its files were copied, and then deleted with the old folder)
    partial = partial_folder(folder)
    if os.path.lexists(partial) and (partial.is_symlink() or not partial.is_dir()):
        raise OutputError(f"{partial}: is not a folder, and the new report is made there before it is "
                          f"swapped in; move or remove it")
    if partial.is_dir():
        refuse_mounts_below(partial)
        what = "a report folder that a killed run left beside it"
        remove_leftover(partial, what)
        log(f"analyze: {partial}: removed, {what}")


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
    from ..io import atomic_write_text
    from .markdown import read_interpretation, render
    from .report_lock import report_lock

    out = Path(out)
    if not (out / "results.json").is_file():
        raise FileNotFoundError(f"{out / 'results.json'}: no such file; --report-only rewrites "
                                "the report of a folder elmo analyze wrote")
    # a run writing into the folder replaces results.json and then report.md: a report
    # rewritten meanwhile from the results it replaced came after its own, and stayed
    # (swaps=False: report.md is written in the folder, which the folder above need not allow)
    with report_lock(out, swaps=False):
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
