"""``elmo experiment``: baseline vs +ELMo on identical splits over several seeds.

An experiment config (JSON, or TOML for files ending in ``.toml``) names the tasks and the
variants to compare; every variant of a task is trained once per seed on the same examples,
and each variant is compared with the baseline run of the same seed::

    {
      "name": "pos",                         # results go to experiments/results/<name>/
      "seeds": 3,                            # 3 -> seeds 1, 2, 3; or a list of seeds
      "bilm": "default",                     # a bundled name, a model folder, "default",
                                             # or "random:<one of those>" (random weights)
      "embeddings": {"glove": null},         # GloVe 6B 50d (glove-50d), or {"random_dim": 8}
      "train": {"epochs": 20, "patience": 3, "lr": 0.001, "batch_size": 32},
      "model": {"hidden": 100, "dropout": 0.5, "char_features": 0, "crf": false,
                "pooling": "max", "classifier_hidden": 100, "lstm_layers": 1,
                "trainable_embeddings": true},
      "threads": 0,                          # torch CPU threads (0 = torch's default)
      "device": "cpu",                       # or "cuda"
      "cache_layers": true,                  # frozen biLM: compute each sentence's layers once
      "out": "optional results folder",
      "tasks": [{"task": "pos", "max_train": 5000, "model": {...}, "train": {...},
                 "name": "optional; what results are reported under (default the task)"}],
      "variants": [
        {"name": "baseline"},
        {"name": "elmo", "elmo": {"positions": ["input"], "layers": "all",
                                  "lambda": 0.001, "finetune": false, "dropout": 0.5,
                                  "do_layer_norm": false, "bilm": "optional other model"}}
      ]
    }

Everything but ``tasks`` has a default (variants: the baseline and ELMo at the input, all
layers, lambda 0.001, frozen). The one variant without ``elmo`` is the baseline (a second one
would repeat its runs under another name, as would a variant with an earlier one's ELMo
settings: both are refused, :func:`~elmo.tasks.experiment_config.check_variants_differ`). The config
is read into a typed :class:`~elmo.tasks.experiment_config.ExperimentConfig` (every key and
value checked; ``elmo experiment --print-config`` shows it with the defaults filled in).

Output: ``results.json`` (the config, every run's record, the per-variant summary, what
each biLM is), ``results.md`` (the table, the learned layer weights), ``layer_weights.png``
and, when one task runs at several training sizes (entries with their own ``name``),
``training_sizes.png``. ``results.json`` is rewritten (atomically) after every run, and
``resume`` keeps the runs it already holds whose settings match and, for runs with ELMo,
whose biLM files (weights, options, vocabulary) have the SHA-256 they were run with.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, cast

import torch

from .batching import make_batch
from .bilm_checksums import BiLMChecksums, what_counts
from .datasets import TaskData, load_task, text_limits
from .embeddings import build_embeddings, glove_record
from .features import ElmoFeatures, WordFeatures, dictionary_bilm_problem
from .kinds import task_kind
from .layer_cache import LayerCache
from .models import Encoder, TaskModel
from .paired import paired_difference, sample_std
from .report import write_reports
from .experiment_config import ExperimentConfig, ModelSettings, Variant, check_bilm_logins, check_variants_differ
from .files import FileDigest, file_digest
from .train_loop import FitConfig, fit, metric_value, predict, score
from .. import tokenize as tokenizer
from ..config import ConfigError
from ..io import atomic_write_text, check_output_dir, no_empty_folder_on_failure, output_lock
from ..text_files import read_json, read_toml
from ..jobconfig import distinct_keys
from ..strict_json import nonfinite_as_none
from ..runtime import cpu_model, machine_description, threads
from ..runtime import resolve_device

#: Characters per token when no biLM says otherwise (the char features of the baseline).
DEFAULT_MAX_CHARS = 50


# ----------------------------------------------------------------------------- config
def read_config(path: str | Path) -> dict:
    """The settings of a JSON or TOML experiment config as written, with ``name`` defaulting
    to the file's stem and relative data paths made relative to the file's folder (not yet
    checked: :func:`normalise_config` does that)."""
    path = Path(path)
    # (the package's readers: each way the file fails is one line naming it, and brackets
    # nested thousands deep are one too, not a RecursionError's traceback)
    expected = "an experiment config (a UTF-8 JSON or TOML file)"
    if path.suffix == ".toml":
        cfg = read_toml(path, ConfigError, what="a TOML config", expected=expected)
    else:
        cfg = read_json(path, ConfigError, what="a JSON config", expected=expected, object_pairs_hook=distinct_keys)
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: an experiment config is an object of settings, got {type(cfg).__name__}")
    cfg.setdefault("name", path.stem)
    return resolve_paths(cfg, path.parent)


def load_config(path: str | Path) -> ExperimentConfig:
    """Read a JSON or TOML experiment config, checked and with the defaults filled in (see
    module docstring); an error names the file."""
    try:
        return normalise_config(read_config(path))
    except ConfigError as e:
        raise ConfigError(e if str(e).startswith(f"{path}: ") else f"{path}: {e}") from None


def resolve_paths(cfg: dict, base: Path) -> dict:
    """A copy of ``cfg`` whose relative data paths (a task's ``data_dir`` and ``files``, the
    GloVe file) are taken relative to ``base``, the config file's folder, not the working
    folder; a biLM folder too, where the config's folder holds it (see :func:`_bilm_from`)."""
    cfg = copy.deepcopy(cfg)
    if "bilm" in cfg:
        cfg["bilm"] = _bilm_from(cfg["bilm"], base, "bilm")
    for i, v in enumerate(cfg.get("variants") or []):
        if isinstance(v, dict) and isinstance(v.get("elmo"), dict) and "bilm" in v["elmo"]:
            v["elmo"]["bilm"] = _bilm_from(v["elmo"]["bilm"], base, f"variants[{i}].elmo.bilm")

    def fix(p):
        return str(base / p) if isinstance(p, str) and p and not Path(p).is_absolute() else p

    for t in cfg.get("tasks") or []:
        if not isinstance(t, dict):
            continue
        if "data_dir" in t:
            t["data_dir"] = fix(t["data_dir"])
        if isinstance(t.get("files"), dict):
            t["files"] = {k: fix(v) for k, v in t["files"].items()}
    emb = cfg.get("embeddings")
    if isinstance(emb, dict) and emb.get("glove"):
        emb["glove"] = fix(emb["glove"])
    return cfg


def _bilm_from(spec, base: Path, key: str):
    """A config's biLM spec with a relative folder found beside the config file, like its data.

    A relative folder was found from the working folder only: a config beside its own model
    read another one of that name where the command ran, or stopped as not found. The working
    folder's copy still counts where the config's folder has none (the repo's configs name
    ``runs/...`` from the repo's root), and a name that could mean two different folders is
    refused rather than guessed. Names, URLs and absolute paths are kept as they are."""
    from .. import which_model
    from ..io import same_file
    if not isinstance(spec, str):
        return spec                                    # (the typed config says what is wrong)
    prefix = RANDOM_PREFIX if spec.startswith(RANDOM_PREFIX) else ""
    name = spec[len(prefix):]
    here, beside = Path(name), base / name
    # in loading's order, the bare name's local path beside the config (warned below, once
    # the two-folders error is ruled out)
    named = which_model(name, local=beside, warn=False)
    if named.kind == "local" and beside.exists() and not same_file(here, beside):
        if here.exists():
            raise ConfigError(f"{key} {spec!r} names two different folders: {beside} (beside the config) and "
                              f"{here.resolve()} (from the working folder); give an absolute path")
        named.warn()                # a published model's name (loading it by its path would not say so)
        return prefix + str(beside)
    if named.kind == "bundled":
        named.warn()                # the bundled model wins over a folder beside the config
    return spec


def normalise_config(cfg: dict | ExperimentConfig) -> ExperimentConfig:
    """The typed config of a dict of settings (defaults filled in, every key and value
    checked; see :class:`~elmo.tasks.experiment_config.ExperimentConfig`)."""
    if isinstance(cfg, ExperimentConfig):
        return cfg
    return ExperimentConfig.from_dict(cfg)


#: Config keys that do not change what a run computes (so a run can be reused across them).
_NOT_RESULT_KEYS = {"name", "description", "variants", "tasks", "seeds", "out", "notes", "threads",
                    "device"}


def run_fingerprint(cfg: ExperimentConfig, spec: dict, variant: Variant,
                    bilms: Optional[BiLMChecksums] = None,
                    data: Optional[Dict[str, Optional[str]]] = None) -> Optional[str]:
    """What decides one run's result besides its seed: the task entry, the variant and the
    shared settings. ``resume`` reuses an earlier run when this matches, so variants can be
    added to an experiment (or its description edited) without training the others again.
    A task read from your files (``files``, or a built-in task's ``data_dir``) also counts
    their contents, and a GloVe file of your own (``embeddings.glove``) its words and vectors,
    so an edited file is trained on again. A variant with ELMo also counts
    its biLM's SHA-256 (:mod:`.bilm_checksums`: weights, options and vocabulary; a
    ``random:`` control's options only), so a retrained biLM is trained with again; its
    fingerprint is None when that biLM's folder is not there. ``bilms`` shares the checksums
    between calls (each biLM is hashed once per experiment); ``data`` is the task's
    :func:`_data_checksums` when taken already (the files are hashed now without it)."""
    content = _run_content(cfg, spec, variant, data)
    if variant.elmo is None:
        return _digest(content)     # unchanged since biLMs are counted: old baselines still match
    sha = (bilms or BiLMChecksums())(cfg.bilm_of(variant))
    return None if sha is None else _digest(content, sha)


def _run_content(cfg: ExperimentConfig, spec: dict, variant: Variant,
                 data: Optional[Dict[str, Optional[str]]] = None) -> dict:
    """The settings and data checksums (``data``, else hashed now) a run's fingerprint hashes
    (all but the biLM)."""
    recorded = cfg.recorded()             # the settings as written: earlier runs keep matching
    common = {k: v for k, v in recorded.items() if k not in _NOT_RESULT_KEYS}
    written = next(v for v in recorded["variants"] if v["name"] == variant.name)
    content = {"task": spec, "variant": written, "common": common}
    if variant.elmo is not None and variant.elmo.do_layer_norm:
        # its layer norm's statistics became each sentence's own (they were the batch's):
        # runs computed the old way are not reused (see _batch_layer_norm_run)
        content["layer_norm_over"] = "sentence"
    if spec.get("tokenize"):
        # texts split by elmo.tokenize: runs on the tokens of an older revision are trained
        # again (a spec without tokenize, its texts split on spaces, keeps its fingerprint)
        content["tokenizer_revision"] = tokenizer.TOKENIZER_REVISION
    data = _data_checksums(spec) if data is None else data
    if data:
        content["data"] = data
        if _whole_number_labels(spec, data):
            # a label such as "1.0" became the class "1" (it was a class of its own): runs
            # recorded before are trained again; those of files without one keep matching
            content["whole_number_labels"] = "as whole numbers"
    fmt = spec.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "tsv" and "quoting" not in fmt \
            and fmt.get("delimiter", "\t") != "\t":
        # such a file's double quotes became csv quoting (they were read as text): runs
        # recorded before are trained again, not reused
        content["tsv_quoting"] = "csv"
    if cfg.embeddings.get("glove"):
        # a GloVe file of your own, by its words and vectors as read: another file under its
        # name kept the runs trained with the old vectors (glove-50d is pinned by `elmo data`)
        from .embeddings import glove_record
        record = glove_record(cfg.embeddings)
        content["glove"] = record["digest"]
        if "lookup" in record:
            # a cased file's words are looked up as written first: runs whose vocabulary
            # lower-cased every word (the old lookup) are trained again, not reused
            content["glove_lookup"] = record["lookup"]
    return content


def _digest(content: dict, bilm_sha256: Optional[str] = None) -> str:
    """The fingerprint of a run's content, with its biLM's SHA-256 when given (without it:
    the fingerprint of records written before biLMs were counted)."""
    if bilm_sha256 is not None:
        content = {**content, "bilm_sha256": bilm_sha256}
    text = json.dumps(content, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _data_paths(spec: dict) -> Dict[str, Path]:
    """split -> the user-supplied files a task spec reads; empty for a built-in task read from
    the cache, whose files are pinned by `elmo data`."""
    from .datasets import TASKS
    if isinstance(spec.get("files"), dict):
        return {k: Path(v) for k, v in spec["files"].items() if v}
    if spec.get("data_dir") and spec.get("task") in TASKS:
        return {k: Path(spec["data_dir"]) / f for k, f in TASKS[spec["task"]].files.items()}
    return {}


def _data_checksums(spec: dict) -> Dict[str, Optional[str]]:
    """split -> SHA-256 of the user-supplied files a task spec reads (None when missing;
    :func:`_data_paths`)."""
    return _checksums_of(_data_digests(spec))


def _data_digests(spec: dict) -> Dict[str, Optional[FileDigest]]:
    """split -> SHA-256 and size (one reading) of the user-supplied files a task spec reads
    (None when missing; :func:`_data_paths`)."""
    return {k: file_digest(p) if p.is_file() else None for k, p in sorted(_data_paths(spec).items())}


def _checksums_of(digests: Dict[str, Optional[FileDigest]]) -> Dict[str, Optional[str]]:
    """split -> SHA-256 of :func:`_data_digests`: what a run's fingerprint counts."""
    return {k: d.sha256 if d else None for k, d in digests.items()}


def _whole_number_labels(spec: dict, checksums: Dict[str, Optional[str]]) -> bool:
    """Whether a file of the task holds a class label that is a whole number with a decimal
    point (``1.0``), which task files read as the whole number since they canonicalise labels.
    (No built-in task's pinned files do: sentiment's ratings go through its rule, topic's and
    vitaminc's labels are names, pos and ner have tags, kept as written.) A file that cannot be
    read counts none here: reading the task names its error."""
    from .datasets import TASKS
    from .files import TaskDataError, check_format
    name = spec.get("task")
    preset = TASKS.get(name) if isinstance(name, str) else None
    kind, fmt = (preset.kind, preset.format) if preset else (str(name), spec.get("format"))
    try:
        if (preset and preset.label_map) or task_kind(kind).token_labels:   # (tags: kept as written)
            return False
        fmt = check_format(fmt, kind, f"task {name}")
    except (TaskDataError, ValueError):
        return False
    fmt_json = json.dumps(fmt, sort_keys=True)
    return any(checksums.get(split) and _file_whole_number_labels(str(path), checksums[split], kind, fmt_json)
               for split, path in _data_paths(spec).items())


@functools.lru_cache(maxsize=64)
def _file_whole_number_labels(path: str, sha256: str, kind: str, fmt: str) -> bool:
    """:func:`_whole_number_labels` of one file, read once per content (``sha256``): the
    fingerprint is taken for every run of every variant."""
    from .files import TaskDataError, whole_number_labels
    try:
        return bool(whole_number_labels(Path(path), kind, json.loads(fmt)))
    except (TaskDataError, OSError):
        return False


def baseline_name(cfg: ExperimentConfig) -> str:
    return cfg.baseline.name


# ----------------------------------------------------------------------------- biLMs
#: Prefix of a biLM spec that asks for the same architecture with random weights (a control:
#: what the task model gains from the biLM's shape and character CNN alone, without training).
RANDOM_PREFIX = "random:"
#: Seed of the random weights of a ``random:`` biLM (fixed, so every run sees the same biLM).
RANDOM_BILM_SEED = 12345


def resolve_bilm(spec: str) -> Path:
    """The folder of a biLM spec: ``default`` (the package's default model), a bundled name
    or a path; ``random:SPEC`` is the folder whose architecture is copied."""
    import elmo
    if spec.startswith(RANDOM_PREFIX):
        return resolve_bilm(spec[len(RANDOM_PREFIX):])
    name = elmo.DEFAULT_MODEL if spec == "default" else spec
    return elmo.model_path(name)


def load_bilm(spec: str):
    """A biLM for a spec (see :func:`resolve_bilm`); ``random:SPEC`` gets SPEC's options and
    fresh random weights (PyTorch's default initialisation, seed :data:`RANDOM_BILM_SEED`)."""
    import elmo
    from ..modules.bilm import BiLM
    path = resolve_bilm(spec)
    if not spec.startswith(RANDOM_PREFIX):
        return elmo.from_pretrained(path)
    options = elmo.from_pretrained(path).options
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_BILM_SEED)
        bilm = BiLM(options)
    with torch.no_grad():
        bilm.token_encoder.char_embedding.weight[0].zero_()      # the padding character
    return bilm


def describe_bilm(spec: str) -> dict:
    """What an experiment record says about a biLM: its folder, size, and its
    ``metadata.json`` (how it was trained; ``adapted_on``, the extra text it was fine-tuned
    on, which makes it a domain-adapted model)."""
    import elmo
    from ..training.export import METADATA_FILE, read_metadata
    path = resolve_bilm(spec)
    random_weights = spec.startswith(RANDOM_PREFIX)
    base = spec[len(RANDOM_PREFIX):] if random_weights else spec
    name = elmo.DEFAULT_MODEL if base == "default" else base
    shown = path.resolve()
    try:                                      # relative to the working folder when inside it
        shown = shown.relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    info: dict = {"spec": spec, "path": str(shown), "random_weights": random_weights,
                  "bundled": elmo.which_model(name, warn=False).kind == "bundled"}
    if random_weights:
        info["warning"] = (f"random weights (seed {RANDOM_BILM_SEED}) in the architecture of "
                           f"{shown}: a control, not a trained biLM")
        info["metadata"], info["adapted_on"], info["domain_adapted"] = None, [], False
        return info
    # read with its checks: a damaged or hand-edited file was a traceback, JSON's error without
    # the file's name, or a wrong "adapted" flag
    meta = read_metadata(path) if (path / METADATA_FILE).exists() else None
    # copied into a new record: a URL with a login that the biLM's metadata holds is not
    from ..redact import redact_record
    meta = redact_record(meta)[0]
    info["metadata"] = meta
    adapted = (meta or {}).get("adapted_on") or []
    info["adapted_on"] = adapted
    info["domain_adapted"] = bool(adapted) or bool((meta or {}).get("extra_data"))
    if info["bundled"] and name == "fixture":
        info["warning"] = ("the bundled 'fixture' biLM has untrained test weights: results with "
                           "it only show that the code runs")
    return info


def _bilm_brief(spec: str) -> dict:
    """The part of :func:`describe_bilm` that every run record repeats."""
    info = describe_bilm(spec)
    return {"bilm_path": info["path"], "domain_adapted": info["domain_adapted"],
            "adapted_on": info["adapted_on"]}


def _bilm_entry(spec: str, bilms: BiLMChecksums) -> dict:
    """What ``results.json``'s ``bilms`` block says of a biLM: :func:`describe_bilm` and the
    SHA-256 that identifies its files (:mod:`.bilm_checksums`), with each file's."""
    return {**describe_bilm(spec), "sha256": bilms(spec), "sha256_of": what_counts(spec),
            "files_sha256": bilms.files(spec)}


class BiLMPool:
    """Loaded biLMs and their layer caches, shared by all runs of an experiment."""

    def __init__(self, cache_layers: bool, log: Callable[[str], None]):
        self.cache_layers = cache_layers
        self.log = log
        self._models: Dict[str, object] = {}
        self._caches: Dict[str, LayerCache] = {}
        self.cache_seconds: Dict[str, float] = {}        # biLM spec -> seconds

    def frozen(self, spec: str):
        """The shared frozen biLM of a spec (loaded once)."""
        if spec not in self._models:
            bilm = load_bilm(spec).eval()
            for p in bilm.parameters():
                p.requires_grad_(False)
            self._models[spec] = bilm
        return self._models[spec]

    def fresh(self, spec: str):
        """A new copy to fine-tune (the shared frozen one is never changed), in float32.

        A biLM saved in bfloat16 (or float16) loads in that dtype, and fine-tuned so its weights
        and the optimizer's steps were rounded to 8 bits of mantissa (an update below 1/256 of
        a weight was lost): it is fine-tuned in float32, as it was before dtypes were restored,
        and its saved task model keeps the float32 weights (see :mod:`.saved`)."""
        bilm = load_bilm(spec)
        low = any(p.dtype in (torch.bfloat16, torch.float16) for p in bilm.parameters())
        return bilm.float() if low else bilm

    def check(self, variants: Sequence[Variant], cfg: ExperimentConfig) -> None:
        """Refuse, before any run, a variant whose biLM cannot run as it asks (a dictionary
        biLM fine-tuned, or without the layer cache): it failed at the variant's first run,
        after the runs before it had trained. Loads only biLMs such a variant names."""
        for v in variants:
            e = v.elmo
            if e is None or not (e.finetune or not self.cache_layers):
                continue
            spec = cfg.bilm_of(v)
            # (a fine-tuned variant's biLM is read, not kept: its runs load their own copies)
            bilm = self.frozen(spec) if not e.finetune or spec in self._models else load_bilm(spec)
            problem = dictionary_bilm_problem(bilm.options, e.finetune, self.cache_layers)
            if problem:
                raise ConfigError(f"variant {v.name}: biLM {spec!r}: {problem}")

    def cache(self, spec: str, sentences: Sequence[Sequence[str]]) -> Optional[LayerCache]:
        if not self.cache_layers:
            return None
        if spec not in self._caches:
            self._caches[spec] = LayerCache(self.frozen(spec))
        cache = self._caches[spec]
        # one task's sentences at a time: the finished tasks' layers are not read again
        cache.retain(sentences)
        adding = cache.estimate_nbytes(sentences)
        if adding:   # said before the memory is taken, where a machine short of it would swap
            self.log(f"caching biLM layers: about {adding / 2**20:.0f} MiB more "
                     f"(cache_layers false computes them in every batch instead)")
        start = time.time()
        before = len(cache)
        cache.fill(sentences)
        spent = time.time() - start
        self.cache_seconds[spec] = self.cache_seconds.get(spec, 0.0) + spent
        if len(cache) > before:
            self.log(f"biLM layers cached for {len(cache) - before} sentences in {spent:.1f} s "
                     f"({cache.nbytes() / 2**20:.0f} MiB in all)")
        return cache


# ----------------------------------------------------------------------------- one run
class TaskShape(Protocol):
    """What :func:`build_model` reads of a task: a :class:`TaskData`, or a saved model's
    kind and labels (:func:`.saved.load`)."""

    kind: str
    labels: List[str]


def build_model(task: TaskShape, embeddings: torch.Tensor, settings: ModelSettings,
                elmo_features: Optional[ElmoFeatures], lam: float) -> TaskModel:
    """The task model of ``task.kind`` with the given settings (``model`` block)."""
    words = WordFeatures(embeddings, trainable=settings.trainable_embeddings,
                         char_features=settings.char_features)
    encoder = Encoder(words, settings.hidden, settings.dropout, elmo_features, settings.lstm_layers)
    return task_kind(task.kind).build_model(encoder, len(task.labels), settings, lam)


def all_sentences(task: TaskData) -> List[List[str]]:
    out = []
    for examples in task.splits.values():
        for ex in examples:
            out.append(ex.tokens)
            if ex.tokens_b is not None:
                out.append(ex.tokens_b)
    return out


@dataclass
class PreparedTask:
    spec: dict
    data: TaskData
    vocab: object
    embeddings: torch.Tensor
    embedding_info: dict
    settings: ModelSettings
    train: FitConfig


def prepare_task(spec: dict, cfg: ExperimentConfig,
                 digests: Optional[Dict[str, Optional[FileDigest]]] = None) -> PreparedTask:
    """A task's data, vocabulary, embeddings and settings; ``digests`` (its files' SHA-256
    and sizes, taken before they are read) are what results.json's data block records of its
    files."""
    data = load_task(spec, digests)
    train_tokens = [s for ex in data.splits["train"] for s in (ex.tokens, ex.tokens_b) if s]
    other_tokens = [s for k in data.splits if k != "train" for ex in data.splits[k]
                    for s in (ex.tokens, ex.tokens_b) if s]
    vocab, emb, info = build_embeddings(train_tokens, other_tokens, cfg.embeddings, seed=0)
    return PreparedTask(spec, data, vocab, emb, info, cfg.model_for(spec), cfg.train_for(spec))


def run_one(prep: PreparedTask, variant: Variant, seed: int, cfg: ExperimentConfig, pool: BiLMPool,
            log: Callable[[str], None], save_to: Optional[Path] = None) -> dict:
    """Train and test one (task, variant, seed); returns its record. With ``save_to`` the
    trained model (its best epoch) is saved there (:mod:`.saved`)."""
    data, e = prep.data, variant.elmo
    torch.manual_seed(seed)
    elmo_features, cache, max_chars = None, None, DEFAULT_MAX_CHARS
    lam = 0.0
    if e is not None:
        spec = cfg.bilm_of(variant)
        bilm = pool.fresh(spec) if e.finetune else pool.frozen(spec)
        max_chars = bilm.options.char_cnn.max_characters_per_token
        torch.manual_seed(seed)
        elmo_features = ElmoFeatures(bilm, e.positions, e.layers, e.dropout, e.finetune,
                                     e.do_layer_norm)
        if not e.finetune:
            cache = pool.cache(spec, all_sentences(data))
        lam = e.lam
    torch.manual_seed(seed)
    model = build_model(data, prep.embeddings, prep.settings, elmo_features, lam)
    task_kind(data.kind).fit_targets(model, data.splits["train"])   # (a graded task's scale)
    device = resolve_device(cfg.device or "cpu", what="device")   # "auto" too, as the check allows
    model.to(device)
    label_index = {label: i for i, label in enumerate(data.labels)}

    def make(examples):
        return make_batch(examples, data.kind, prep.vocab, label_index, max_chars, cache).to(device)

    start = time.time()
    # only a task from files with dev_fraction 0 trains without dev (and early stopping)
    result = fit(model, data.splits["train"], data.splits["dev"], make, data.metric, data.labels,
                 prep.train, seed, log, early_stopping=bool(data.splits["dev"])
                 or not str(data.source.get("dev", "")).startswith("none"),
                 length=task_kind(data.kind).batch_length)
    test_metrics = _test_metrics(model, data, make, log)
    test = test_metrics.pop(data.metric)
    # further test sets named in the task's files, scored by the same model (a graded task's
    # with its other correlation and why one is undefined, as test)
    extras = {k: _test_metrics(model, data, make, log, split=k)
              for k in data.splits if k not in ("train", "dev", "test")}
    extra = {k: m.pop(data.metric) for k, m in extras.items()}
    record = {
        "task": data.name, "metric": data.metric, "variant": variant.name, "seed": seed,
        "test": test, "dev": result["best_dev"], "best_epoch": result["best_epoch"],
        "epochs": result["epochs"], "seconds": time.time() - start,
        "cpu": cpu_model(),  # each run's own: a resumed experiment's runs may come from other machines
        "history": result["history"],
        "elmo": None if e is None else {
            "bilm": cfg.bilm_of(variant), **_bilm_brief(cfg.bilm_of(variant)),
            "positions": list(e.positions),
            "layers": e.layers, "lambda": lam, "finetune": e.finetune,
            "dropout": e.dropout, "do_layer_norm": e.do_layer_norm,
            "mix_weights": model.mix_weights()},
    }
    if extra:
        record["extra_tests"] = extra
    for key in ("other_metrics", "undefined"):   # (a graded task's, per further test set)
        per_set = {k: m[key] for k, m in extras.items() if key in m}
        if per_set:
            record[f"extra_tests_{key}"] = per_set
    record.update(test_metrics)
    if prep.spec.get("tokenize"):   # which elmo.tokenize split its texts (see _run_content)
        record["tokenizer_revision"] = tokenizer.TOKENIZER_REVISION
    if save_to is not None:
        from .saved import save
        save(save_to, model, kind=data.kind, metric=data.metric, labels=data.labels,
             vocab=prep.vocab, settings=prep.settings.to_dict(),
             elmo=None if e is None else {**e.to_dict(), "bilm": cfg.bilm_of(variant)},
             max_chars=max_chars, layer_cache=cache is not None,
             tokenize=bool(prep.spec.get("tokenize", False)), **text_limits(prep.spec),
             embeddings=glove_record(cfg.embeddings),
             record={"task": data.name, "variant": variant.name, "seed": seed,
                     "test": test, "dev": result["best_dev"], "extra_tests": extra,
                     "best_epoch": result["best_epoch"], "data": data.source})
        record["saved_model"] = str(save_to)
    return record


def _test_metrics(model: TaskModel, data: TaskData, make, log: Callable[[str], None],
                  split: str = "test") -> dict:
    """The task metric on ``split`` (``{data.metric: value}``); a graded task's also gets
    ``other_metrics`` (its kind's other correlation there) and, where the correlation is
    undefined (NaN), ``undefined``: why, which is logged too. A span_qa task's gets its other
    metric too (F1 and exact match), from the same predictions."""
    kind = task_kind(data.kind)
    examples = data.splits[split]
    if not (kind.graded or kind.span_answers):
        return {data.metric: score(model, examples, make, data.metric, data.labels)}
    from .metrics import correlation_undefined
    if not examples:
        return {data.metric: float("nan")}
    pred = predict(model, examples, make)
    out: Dict[str, Any] = {data.metric: metric_value(data.metric, examples, pred, data.labels),
                           "other_metrics": {m: metric_value(m, examples, pred, data.labels)
                                             for m in kind.metrics if m != data.metric}}
    why = correlation_undefined([cast(float, ex.label) for ex in examples], pred) if kind.graded else None
    if why:
        out["undefined"] = why
        log(f"{data.name}: the {split} correlation is undefined (NaN): {why}")
    return out


# ----------------------------------------------------------------------------- summary
def _stats(values: List[Optional[float]]) -> Dict[str, float]:
    """Count, mean and sample standard deviation; NaN where undefined (no value; for the
    spread, one value; or a NaN among them: the dev score of a task without a dev set, which
    a record read back from results.json holds as None, strict JSON's NaN)."""
    numbers = [float("nan") if v is None else v for v in values]
    mean = statistics.fmean(numbers) if numbers else float("nan")
    return {"n": len(numbers), "mean": mean, "std": sample_std(numbers)}


def _means(values: Sequence[Dict[str, float]]) -> Dict[str, float]:
    """name -> the mean over runs of each name's value in ``values`` (one dict per run; a
    run without the name does not count)."""
    names = sorted({k for v in values for k in v})
    return {k: _stats([v[k] for v in values if k in v])["mean"] for k in names}


def _gain_over(runs: List[dict], task: str, variant: str, base: str) -> Dict[str, float]:
    """``variant``'s gain over ``base`` on ``task``, paired by seed
    (:func:`~elmo.tasks.paired.paired_difference`): ``gain_mean``, ``gain_std``, ``gain_seeds``,
    the paired t ``gain_t`` and the 95% interval ``gain_low`` to ``gain_high``; NaN where
    undefined (one seed, zero spread, or no baseline run to pair with: 0 seeds)."""
    nan = float("nan")
    try:
        d = paired_difference({"runs": runs}, task, variant, base)
    except ValueError:  # the baseline has not run (yet) on this task, or shares no seed
        return {"gain_mean": nan, "gain_std": nan, "gain_seeds": 0, "gain_t": nan,
                "gain_low": nan, "gain_high": nan}
    mean, seeds = d["mean"], d["seeds"]
    assert mean is not None and seeds is not None     # (paired_difference always sets both)
    out: Dict[str, float] = {"gain_mean": mean, "gain_seeds": seeds}
    for k in ("std", "t", "low", "high"):
        v = d[k]
        out[f"gain_{k}"] = nan if v is None else v
    return out


def summarise(runs: List[dict], cfg: ExperimentConfig) -> List[dict]:
    """One row per (task, variant): test mean and std over seeds, dev mean, and the gain over
    the baseline paired by seed (mean and std of the per-seed differences, paired t and 95%
    interval). No row ever averages different tasks."""
    base = baseline_name(cfg)
    rows = []
    tasks = []
    for r in runs:
        if r["task"] not in tasks:
            tasks.append(r["task"])
    for task in tasks:
        for v in cfg.variants:
            rs = [r for r in runs if r["task"] == task and r["variant"] == v.name]
            if not rs:
                continue
            test = _stats([r["test"] for r in rs])
            row = {"task": task, "metric": rs[0]["metric"], "variant": v.name,
                   "elmo": rs[0]["elmo"] and {k: val for k, val in rs[0]["elmo"].items()
                                              if k != "mix_weights"},
                   "seeds": sorted(r["seed"] for r in rs),
                   "test_mean": test["mean"], "test_std": test["std"],
                   "dev_mean": _stats([r["dev"] for r in rs])["mean"],
                   "seconds": sum(r["seconds"] for r in rs)}
            # a graded task's other correlation, never mixed with its metric; further test
            # sets' metric, and a graded task's other correlation there ("set: metric")
            flat = [{f"{k}: {m}": v for k, ms in r.get("extra_tests_other_metrics", {}).items()
                     for m, v in ms.items()} for r in rs]
            for key, values in (("other_metrics", [r.get("other_metrics", {}) for r in rs]),
                                ("extra_tests", [r.get("extra_tests", {}) for r in rs]),
                                ("extra_tests_other_metrics", flat)):
                means = _means(values)
                if means:
                    row[f"{key}_mean"] = means
            if v.name != base:
                row.update(_gain_over(runs, task, v.name, base))
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------- driver
def selected_variants(cfg: ExperimentConfig, only_variants: Optional[Sequence[str]] = None) -> List[Variant]:
    """The variants run now: all, or those named in ``only_variants`` (in the config's order);
    a name the config lacks is an error naming the config's."""
    names = [v.name for v in cfg.variants]
    if only_variants is not None:
        unknown = sorted(set(only_variants) - set(names))
        if unknown:
            raise ValueError(f"unknown variant(s) {', '.join(unknown)}; the config has {', '.join(names)}")
    return [v for v in cfg.variants if only_variants is None or v.name in only_variants]


def plan(cfg: ExperimentConfig, only_variants: Optional[Sequence[str]] = None) -> List[str]:
    """What :func:`run_experiment` would do, as lines: each task's split sizes, the variants
    run now (``only_variants``, as ``run_experiment`` takes it) and the number of training
    runs. Loads the data (fetching it if needed), trains nothing. A biLM URL's password is
    shown as ``***``."""
    from ..redact import redact_url
    check_variants_differ(cfg)      # (as run_experiment and the command do: a plan they refuse)
    # (--plan --variants listed and counted every variant, and took a name the config lacks)
    selected = selected_variants(cfg, only_variants)
    lines = []
    for spec in cfg.tasks:
        data = load_task(spec)
        lines.append(f"{data.name} ({data.metric}): {data.sizes()} examples, {data.describe_labels()}")
        for line in (data.describe_unseen(), data.describe_in_train(), data.describe_answers_past_cut(),
                     data.describe_answers_off_span()):
            if line:
                lines.append(line)
    for v in selected:
        e = v.elmo
        what = "baseline" if e is None else (
            f"ELMo at {'+'.join(e.positions)}, layers {e.layers}, lambda {e.lam:g}, "
            f"dropout {e.dropout:g}{', layer norm' if e.do_layer_norm else ''}, "
            f"{'fine-tuned' if e.finetune else 'frozen'} biLM {redact_url(cfg.bilm_of(v))}")
        lines.append(f"variant {v.name}: {what}")
    runs = len(cfg.tasks) * len(selected) * len(cfg.seeds)
    others = "" if len(selected) == len(cfg.variants) else \
        f"; {len(cfg.variants) - len(selected)} other variant(s) of the config not now"
    lines.append(f"{runs} training runs (seeds {', '.join(map(str, cfg.seeds))}{others})")
    return lines


def reusable_runs(cfg: ExperimentConfig, old: dict, bilms: BiLMChecksums) -> Tuple[List[dict], List[str]]:
    """The runs of an earlier ``results.json`` (``old``) that ``resume`` keeps, and log lines
    on runs whose settings match but whose biLM changed (dropped) or is not there (kept).

    A run is kept when its seed is still planned and its fingerprint is one this config gives
    (:func:`run_fingerprint`; a record from before fingerprints: when the config is the
    same). A run with ELMo also needs the biLM's SHA-256 it recorded (``bilm_sha256``) to be
    the biLM's now: one computed with other weights, or whose weights were not recorded, is
    dropped (trained again) even when its settings match, and the log says so. When a biLM's
    folder is not there now (a variant not run this time), its runs whose settings match are
    kept unchecked: they are checked when their variant runs."""
    runs = old.get("runs", [])
    planned = {run_fingerprint(cfg, spec, v, bilms) for spec in cfg.tasks for v in cfg.variants}
    planned.discard(None)
    same = old.get("config") == cfg.recorded()
    kept: List[dict] = []
    stale: Dict[str, List[Optional[str]]] = {}           # biLM spec -> the SHA-256 each run recorded
    current: Dict[str, str] = {}                         # biLM spec -> its SHA-256 now
    unchecked: Dict[str, int] = {}
    batch_norm = 0
    other_seeds: List[int] = []                          # seeds of matching runs not run now
    for r in runs:
        if r["seed"] not in cfg.seeds:
            if r.get("fingerprint") in planned:
                other_seeds.append(r["seed"])
            continue
        if r.get("fingerprint") in planned or (same and "fingerprint" not in r and not r.get("elmo")):
            kept.append(r)
            continue
        if _batch_layer_norm_run(cfg, r):
            batch_norm += 1
            continue
        spec = _bilm_of_matching_run(cfg, r, same)
        if spec is None:                                 # its settings changed: trained again
            continue
        now = bilms(spec)
        if now is None:
            unchecked[spec] = unchecked.get(spec, 0) + 1
            kept.append(r)
        elif r.get("bilm_sha256") == now:                # a record from before fingerprints
            kept.append(r)
        else:
            stale.setdefault(spec, []).append(r.get("bilm_sha256"))
            current[spec] = now
    lines = [_changed_bilm_line(spec, then, current[spec]) for spec, then in stale.items()]
    lines += [f"resuming: {n} run(s) with the biLM {spec!r} kept unchecked: it is not there now to "
              f"compare its SHA-256 (checked when their variant runs)" for spec, n in unchecked.items()]
    if other_seeds:
        # (they went without a word: "4 of 8 runs ... are kept", and results.json lost them)
        seeds = ", ".join(map(str, sorted(set(other_seeds))))
        lines.append(f"resuming: {len(other_seeds)} finished run(s) of seed(s) {seeds}, which this config "
                     f"does not run (seeds {', '.join(map(str, cfg.seeds))}), are dropped from results.json; "
                     f"give those seeds too to keep them")
    if batch_norm:
        lines.append(f"resuming: {batch_norm} run(s) with do_layer_norm dropped and trained again: "
                     f"their layer norm took its statistics over each batch (a sentence's scores "
                     f"depended on the sentences batched with it); it now takes each sentence's own")
    return kept, lines


def _batch_layer_norm_run(cfg: ExperimentConfig, run: dict) -> bool:
    """Whether an earlier run is one of a ``do_layer_norm`` variant of this config, matching
    its settings as fingerprinted before the layer norm's statistics became each sentence's
    own (with or without the biLM's SHA-256 it recorded)."""
    if not (run.get("elmo") or {}).get("do_layer_norm") or "fingerprint" not in run:
        return False
    for spec in cfg.tasks:
        if spec.get("name", spec["task"]) != run["task"]:
            continue
        for v in cfg.variants:
            if v.name != run["variant"] or v.elmo is None or not v.elmo.do_layer_norm:
                continue
            content = _run_content(cfg, spec, v)
            del content["layer_norm_over"]
            if run["fingerprint"] in {_digest(content), _digest(content, run.get("bilm_sha256"))}:
                return True
    return False


def _bilm_of_matching_run(cfg: ExperimentConfig, run: dict, same: bool) -> Optional[str]:
    """The biLM spec of an earlier ELMo run whose settings match a (task, variant) of this
    config, whatever biLM weights it was computed with: its fingerprint is the one without
    the biLM's SHA-256 (written before biLMs were counted) or the one with the SHA-256 it
    recorded, or it predates fingerprints and the config is the same. None otherwise."""
    if not run.get("elmo"):
        return None
    for spec in cfg.tasks:
        if spec.get("name", spec["task"]) != run["task"]:
            continue
        for v in cfg.variants:
            if v.name != run["variant"] or v.elmo is None:
                continue
            content = _run_content(cfg, spec, v)
            settings_match = (same and "fingerprint" not in run) or run.get("fingerprint") in {
                _digest(content), _digest(content, run.get("bilm_sha256"))}
            if settings_match:
                return cfg.bilm_of(v)
    return None


def _changed_bilm_line(spec: str, then: List[Optional[str]], now: str) -> str:
    """The log line of runs dropped because their biLM's files changed, or were not recorded
    (so cannot be shown to be the same)."""
    recorded = sorted({sha[:12] + "…" if sha else "not recorded" for sha in then})
    runs = f"{len(then)} run{'' if len(then) == 1 else 's'}"
    why = (f"these runs did not record which files of the biLM {spec!r} they used" if not any(then)
           else f"the biLM {spec!r} changed since these runs")
    return (f"resuming: {runs} dropped and trained again: {why} (SHA-256 of its "
            f"{what_counts(spec)} files {now[:12]}… now, {', '.join(recorded)} then)")


class ResultsExistError(ValueError):
    """The results folder already holds results and neither resume nor overwrite was asked."""


def run_experiment(cfg: ExperimentConfig | dict, out: Optional[str | Path] = None, resume: bool = False,
                   command: Optional[str] = None,
                   log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
                   only_variants: Optional[Sequence[str]] = None, overwrite: bool = False,
                   save_models: bool = False) -> dict:
    """Run every (task, variant, seed) of a config (a dict is read by
    :func:`normalise_config`); write and return the results.

    ``only_variants`` runs just those variants now (the config, and so ``resume``, is unchanged):
    baselines can run while the biLM is still training, and a later ``resume`` adds the rest.
    An existing ``results.json`` is kept unless ``resume`` (keep its matching runs) or
    ``overwrite`` (start again) is given. ``save_models`` keeps every trained model in
    ``OUT/models/<task>/<variant>/seed-<seed>/`` (see :mod:`.saved`)."""
    cfg = normalise_config(cfg)
    check_bilm_logins(cfg)      # (before the results folder is made)
    check_variants_differ(cfg)
    selected = selected_variants(cfg, only_variants)
    out = Path(out or cfg.out or Path("experiments") / "results" / cfg.name)
    results_path = out / "results.json"
    check_output_dir(out, "results folder")
    # a second experiment into this folder would write its own runs over the first's
    # results.json (and the same saved-model folders): refused at once, naming the holder.
    # (One that failed before its first run, a biLM or task file missing, left the folder empty.)
    with no_empty_folder_on_failure(out), output_lock(results_path, name=out):
        if results_path.exists() and not resume and not overwrite:
            raise ResultsExistError(f"{results_path} exists: --resume keeps its finished runs, "
                                    f"--overwrite starts again")
        return _run_locked(cfg, out, results_path, resume, command, log, selected, save_models)


def _run_locked(cfg: ExperimentConfig, out: Path, results_path: Path, resume: bool,
                command: Optional[str], log: Callable[[str], None], selected: List[Variant],
                save_models: bool) -> dict:
    """:func:`run_experiment` once it holds the results folder's lock."""
    bilms = BiLMChecksums()
    done: List[dict] = []
    described: Dict[str, dict] = {}
    if resume and results_path.exists():
        # checked as experiment-table reads it: a truncated or hand-broken file was a bare
        # JSON message, a list or a run without its seed an AttributeError or KeyError traceback
        from .compare import read_results
        old = read_results(results_path)
        done, notes = reusable_runs(cfg, old, bilms)
        then = (old.get("config") or {}).get("name")
        if old["runs"] and not done and then != cfg.name:
            # another experiment's folder (a mistyped --out): its runs were all dropped and its
            # results.json replaced at this experiment's first run
            raise ResultsExistError(f"{results_path} holds the results of the experiment {then!r}, "
                                    f"none of whose {len(old['runs'])} runs this config ({cfg.name!r}) "
                                    f"keeps: give another --out, or --overwrite to replace them")
        log(f"resuming: {len(done)} of {len(old.get('runs', []))} runs in {results_path} "
            f"match this config and are kept")
        for line in notes:
            log(line)
        used = {r["elmo"]["bilm"] for r in done if r.get("elmo")}
        described = {s: d for s, d in old.get("bilms", {}).items() if s in used}
    specs = {cfg.bilm_of(v) for v in selected if v.elmo is not None}
    for spec in sorted(specs):
        if not resolve_bilm(spec).is_dir():
            raise FileNotFoundError(f"biLM {spec!r}: no model folder at {resolve_bilm(spec)}")
    results: Dict[str, Any] = {
        "config": cfg.recorded(),
        "command": command or "run_experiment(config)",
        "machine": machine_description(),  # this invocation's; each run records its own "cpu"
        "bilms": {**described, **{s: _bilm_entry(s, bilms) for s in sorted(specs)}},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data": {}, "runs": list(done), "summary": [],
    }
    with threads(cfg.threads or None) as n_threads:
        results["machine"]["threads"] = n_threads
        _run_all(cfg, results, results_path, done, log, selected, bilms,
                 out / "models" if save_models else None)
    write_reports(results, out)
    _note_other_models(out / "models", results["runs"], log)
    return results


def _note_other_models(models: Path, runs: Sequence[dict], log: Callable[[str], None]) -> None:
    """Name the saved models under ``models`` that are no run of these results (an earlier
    run's, from a seed or variant since dropped, or kept from before ``--overwrite``). They are
    kept, since each is a whole trained model that records its own run, but results.json does
    not describe them. A run's folder counts as its model only when the run records it
    (``saved_model``): a run trained again without ``--save-models`` left the earlier model in
    its folder without a word, and predict on it disagreed with results.json."""
    listed = {Path(r["saved_model"]).parts[-3:] for r in runs if r.get("saved_model")}
    others = sorted("/".join(folder.parts[-3:]) for folder in models.glob("*/*/seed-*")
                    if folder.is_dir() and tuple(folder.parts[-3:]) not in listed)
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        log(f"{models}: {len(others)} saved model(s) from an earlier run, not in results.json, "
            f"are kept: {shown}")


def rewrite_reports(out: str | Path,
                    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> dict:
    """Write ``results.md`` and the plots of a results folder again from its ``results.json``,
    with the summary recomputed from the stored runs by this version's code (e.g. the gains'
    95% intervals, which older folders lack). Nothing is trained; the runs, the machine block
    and the times stay as they were recorded. Returns the results.

    It holds the folder's lock as :func:`run_experiment` does: run beside an experiment into
    the folder, it wrote back the runs it had read over the experiment's newer results.json,
    losing the runs finished meanwhile when the experiment ended before its next write.

    A URL with a login (``user:password@``, ``token@``) that results written before logins were
    refused still hold is written again with ``***`` for its password (:mod:`elmo.redact`),
    and ``log`` says so in one line."""
    from .compare import CompareError, read_results, recomputed
    from ..redact import REDACTED_NOTE, redact_record

    out = Path(out)
    results_path = out / "results.json" if out.is_dir() else out
    out = results_path.parent
    if not out.is_dir():
        raise CompareError(f"{results_path}: cannot read it (No such file or directory)")
    with output_lock(results_path, name=out):
        results = read_results(results_path, need=("config", "runs"))
        if not results["runs"]:  # (the summary was recomputed as empty and the stored one lost)
            raise CompareError(f"{results_path}: holds no runs to report on; it is kept as it is")
        results = recomputed(results, results_path)   # (a config it cannot read names the file)
        results, redacted = redact_record(results)
        if redacted:
            log(f"warning: {results_path}: {REDACTED_NOTE}")
        atomic_write_text(results_path, json.dumps(nonfinite_as_none(results), indent=1, allow_nan=False) + "\n")
        write_reports(results, out)
    return results


def _out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is torch running out of memory: a GPU's OutOfMemoryError, or the CPU
    allocator's RuntimeError."""
    # (torch.OutOfMemoryError is 2.5's name; 2.4, which the package allows, has only CUDA's)
    gpu_oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(err, gpu_oom) or "can't allocate memory" in str(err)


def _memory_error(data: TaskData, variant: str, seed: int, batch_size: int) -> ConfigError:
    """One line for a run that ran out of memory: a batch is padded to its longest text, so
    it names the task's longest texts (a span_qa context of thousands of tokens: its model's
    tensors grow with the context times the question) and the settings that bound them."""
    def longest(attr: str) -> int:
        return max((len(getattr(ex, attr) or ()) for examples in data.splits.values() for ex in examples),
                   default=0)
    texts = f"its longest text has {longest('tokens')} tokens"
    if task_kind(data.kind).pair:
        texts += f", its longest second text ({'context' if task_kind(data.kind).span_answers else 'text_b'}) " \
                 f"{longest('tokens_b')}"
    return ConfigError(f"{data.name} / {variant} / seed {seed}: out of memory ({texts}, and a batch of "
                       f"{batch_size} is padded to its longest); lower train.batch_size, or cut the texts "
                       f"(max_tokens, max_tokens_b); the runs that finished are kept for --resume")


def _diverged_error(run: str, err: FloatingPointError, finished: int) -> FloatingPointError:
    """The one line of a ``run`` whose model diverged (``err``), with ``finished`` runs in
    results.json: what --resume keeps of them, or that there is none to keep."""
    if not finished:
        # ("the runs that finished are kept for --resume" where none had)
        return FloatingPointError(f"{run}: {err}; no run has finished, so there is nothing to resume: "
                                  f"run the experiment again")
    # (a lower train.lr is in every run's fingerprint: --resume would keep none of them)
    return FloatingPointError(f"{run}: {err}; the {finished} run(s) that finished are kept for --resume, "
                              f"where their settings are unchanged (train.lr lowered for this task alone, in "
                              f"its entry's \"train\", keeps the other tasks' runs; in the train block, none)")


def _run_all(cfg: ExperimentConfig, results: dict, results_path: Path, done: List[dict],
             log: Callable[[str], None], variants: Sequence[Variant], bilms: BiLMChecksums,
             models: Optional[Path] = None) -> None:
    pool = BiLMPool(cfg.cache_layers, log)
    have = {(r["task"], r["variant"], r["seed"]) for r in done}
    # Each run's fingerprint hashes the task's files (and GloVe's) before they are read: taken
    # after its run, a file edited meanwhile gave runs trained on the old contents the new one's
    # fingerprint, and --resume kept them as runs of the edited file. Hashed first, an edit at
    # any point gives a fingerprint the files no longer match, and the run is trained again.
    # Each file is hashed once: results.json's data block records that same SHA-256 (hashed
    # again after the read, a file edited meanwhile was recorded with one its runs'
    # fingerprints disagreed with; and each variant's fingerprint hashed the files anew).
    # (and its size, of that same reading: a size taken after the read described no version of
    # a file edited meanwhile).
    digests = [_data_digests(spec) for spec in cfg.tasks]
    fingerprints = [{v.name: run_fingerprint(cfg, spec, v, bilms, _checksums_of(data)) for v in variants}
                    for spec, data in zip(cfg.tasks, digests)]
    # every task's files are read (and checked) before the first model trains
    preps = [prepare_task(spec, cfg, data) for spec, data in zip(cfg.tasks, digests)]
    pool.check(variants, cfg)
    for spec, prep, fingerprint in zip(cfg.tasks, preps, fingerprints):
        name = prep.data.name
        targets = prep.data.targets()      # (a graded task's, instead of its 0 labels)
        results["data"][name] = {"sizes": prep.data.sizes(), "labels": len(prep.data.labels),
                                 **({"targets": targets} if targets else {}),
                                 "source": prep.data.source, "embeddings": prep.embedding_info,
                                 "model": prep.settings.to_dict(), "train": asdict(prep.train),
                                 "unseen_labels": prep.data.unseen_labels(),
                                 "answers_past_cut": prep.data.answers_past_cut(),
                                 "in_train": prep.data.in_train()}
        log(f"{name}: {prep.data.sizes()} examples, {prep.data.describe_labels()}")
        # (a test label no training example has was not said; nor a dev or test file that is
        # the training file)
        for line in (prep.data.describe_unseen(), prep.data.describe_in_train(),
                     prep.data.describe_answers_past_cut(), prep.data.describe_answers_off_span()):
            if line:
                log(line)
        for seed in cfg.seeds:
            for variant in variants:
                if (name, variant.name, seed) in have:
                    continue
                log(f"{name} / {variant.name} / seed {seed}")
                save_to = None if models is None else models / name / variant.name / f"seed-{seed}"
                try:
                    record = run_one(prep, variant, seed, cfg, pool, log, save_to)
                except RuntimeError as err:   # (a torch traceback from deep in a batch)
                    if not _out_of_memory(err):
                        raise
                    raise _memory_error(prep.data, variant.name, seed, prep.train.batch_size) from err
                except FloatingPointError as err:
                    # a diverged model: the one line named neither the task, the variant nor the
                    # seed (the log said it lines before, and --quiet not at all)
                    raise _diverged_error(f"{name} / {variant.name} / seed {seed}", err,
                                          len(results["runs"])) from err
                record["fingerprint"] = fingerprint[variant.name]
                if variant.elmo is not None:
                    record["bilm_sha256"] = bilms(cfg.bilm_of(variant))
                log(f"{name} / {variant.name} / seed {seed}: test {record['test']:.2f} "
                    f"({record['seconds']:.0f} s)")
                results["runs"].append(record)
                results["summary"] = summarise(results["runs"], cfg)
                results["bilm_cache_seconds"] = pool.cache_seconds
                atomic_write_text(results_path, json.dumps(nonfinite_as_none(results), indent=1, allow_nan=False) + "\n")
    results["summary"] = summarise(results["runs"], cfg)
    results["bilm_cache_seconds"] = pool.cache_seconds
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    atomic_write_text(results_path, json.dumps(nonfinite_as_none(results), indent=1, allow_nan=False) + "\n")
