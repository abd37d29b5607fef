"""The configuration of ``elmo experiment``: its file format, and the typed, checked form
it is read into.

An experiment config (JSON, or TOML for files ending in ``.toml``) names the tasks and the
variants to compare (how they are run: :mod:`elmo.tasks.runner`)::

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
settings: both are refused, :func:`check_variants_differ`). ``elmo experiment
--print-config`` shows a config with the defaults filled in.

An experiment config is read into an :class:`ExperimentConfig`: the task model settings
(:class:`ModelSettings`, the ``model`` block), the training settings
(:class:`~elmo.tasks.train_loop.FitConfig`, the ``train`` block), the variants
(:class:`Variant`, each with optional :class:`ElmoSettings`) and the rest. Every block is
checked with :func:`elmo.jobconfig.build`: an unknown key or a value of the wrong type is a
one-line :class:`~elmo.config.ConfigError` that names it, with where it is (e.g.
``variants[1] (elmo): unknown elmo settings: lamda``).

The file format is unchanged by the types: a JSON key that is not a Python name (``lambda``)
is mapped to its field (``lam``) by the field's ``key`` metadata (read by
:func:`elmo.jobconfig.build`), and :meth:`ExperimentConfig.to_dict` writes the file format
back (what ``elmo experiment --print-config`` prints).

:attr:`ExperimentConfig.record` is the config as ``results.json`` records it and as run
fingerprints hash it: the values of the file as written over the defaults. It is the form
the runner recorded before these types existed, so the runs of earlier ``results.json``
files keep matching on ``--resume``.

:func:`load_config` reads a JSON or TOML file into the typed config (:func:`read_config`: the
settings as written, relative paths taken from the file's folder; :func:`normalise_config`:
checked and typed).
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple, Type, TypeVar, Union

from ..config import ConfigError
from ..jobconfig import build, check_numbers, coerce, distinct_keys, to_dict
from ..text_files import read_json, read_toml
from ..user_paths import expand_home
from .kinds import TASK_KINDS
from .train_loop import FitConfig

if TYPE_CHECKING:  # the type checker's protocol of "a dataclass"; no run-time counterpart
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")

__all__ = ["ConfigError", "ElmoSettings", "ExperimentConfig", "FitConfig", "ModelSettings",
           "RepeatedVariantError", "Variant", "baseline_name", "check_variants_differ", "from_block",
           "expand_homes", "load_config", "normalise_config", "read_config", "resolve_paths", "to_block"]


class RepeatedVariantError(ConfigError):
    """A variant that is the same model as an earlier one (:func:`check_variants_differ`);
    its own type, so that ``elmo experiment`` can name its config file in the message of the
    check that ``plan`` and ``run_experiment`` make (and make it only once)."""


def from_block(cls: Type[C], values: Any, block: str, where: str = "") -> C:
    """``cls`` from one JSON block of a config (keys in the file's spelling), every key and
    value checked by :func:`~elmo.jobconfig.build`; ``block`` (e.g. ``"model"``) and ``where``
    (e.g. ``"task pos: "``) name it in errors."""
    return build(cls, values, source=where.removesuffix(": "), block=block)


def to_block(obj: Any) -> Dict[str, Any]:
    """One block in the file's spelling: the inverse of :func:`from_block`."""
    return to_dict(obj)


@dataclass
class ModelSettings:
    """The task model (the ``model`` block; a task entry's own ``model`` overrides it)."""

    hidden: int = 100                     # BiLSTM size per direction
    dropout: float = 0.5
    char_features: int = 0                # a character CNN of this many filters (0 = none)
    crf: bool = False                     # tagging: a CRF over the tag scores
    pooling: str = "max"                  # classification, regression: "max" or "attention"
    classifier_hidden: int = 100          # classification, pair and regression: the hidden layer
    trainable_embeddings: bool = True
    lstm_layers: int = 1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> "ModelSettings":
        m = from_block(cls, d, "model", where)
        if m.pooling not in ("max", "attention"):   # checked before any run, not at the first
            raise ConfigError(f"{where}model: pooling must be 'max' or 'attention', got {m.pooling!r}")
        check_numbers(where, "model", hidden=(m.hidden, "count"), dropout=(m.dropout, "probability"),
                      char_features=(m.char_features, "count0"), classifier_hidden=(m.classifier_hidden, "count"),
                      lstm_layers=(m.lstm_layers, "count"))
        return m

    def to_dict(self) -> Dict[str, Any]:
        return to_block(self)


@dataclass
class ElmoSettings:
    """How a variant adds ELMo (a variant's ``elmo`` block)."""

    positions: List[str] = field(default_factory=lambda: ["input"])   # "input" and/or "output"
    layers: str = "all"                   # "all" (learned mix) or "last"
    lam: float = field(default=0.001, metadata={"key": "lambda"})     # L2 of the mix weights
    finetune: bool = False                # train the biLM too (a fresh copy per run)
    dropout: float = 0.5
    do_layer_norm: bool = False           # normalise each layer per sentence before mixing
    bilm: Optional[str] = None            # this variant's biLM (default: the config's)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> "ElmoSettings":
        e = from_block(cls, d, "elmo", where)
        positions = ("input", "output")       # what ElmoFeatures accepts, checked before any run
        if not e.positions or any(p not in positions for p in e.positions) \
                or len(set(e.positions)) != len(e.positions):
            raise ConfigError(f"{where}elmo: positions must be distinct items of {list(positions)}, "
                              f"got {e.positions}")
        if e.layers not in ("all", "last"):
            raise ConfigError(f"{where}elmo: layers must be 'all' or 'last', got {e.layers!r}")
        check_numbers(where, "elmo", **{"lambda": (e.lam, "rate"), "dropout": (e.dropout, "probability")})
        return e

    def to_dict(self) -> Dict[str, Any]:
        return to_block(self)


@dataclass
class Variant:
    """One way of building the task model; without ``elmo`` it is a baseline."""

    name: str
    elmo: Optional[ElmoSettings] = None

    @classmethod
    def from_dict(cls, d: Any, where: str = "") -> "Variant":
        if not isinstance(d, Mapping) or "name" not in d:
            raise ConfigError(f"{where}a variant is an object with a 'name' (and 'elmo' for "
                              f"ELMo), got {d!r}")
        unknown = sorted(set(d) - {"name", "elmo"})
        if unknown:
            raise ConfigError(f"{where}unknown variant settings: {', '.join(map(str, unknown))} "
                              f"(known: name, elmo)")
        name = coerce("name", str, d["name"])
        e = d.get("elmo")
        inner = f"{where[:-2]} ({name}): " if where else f"variant {name}: "
        return cls(name, None if e is None else ElmoSettings.from_dict(e, inner))

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "elmo": None if self.elmo is None else self.elmo.to_dict()}


def _check_folder_name(what: str, name: Any) -> None:
    """A task's or variant's name is one folder name of ``--save-models``' OUT/models/TASK/
    VARIANT/seed-N: with a separator or '..' it placed (and replaced) folders outside OUT."""
    if not isinstance(name, str) or not name.strip() or name in (".", "..") \
            or any(c in name for c in "/\\\0"):
        raise ConfigError(f"{what} name {name!r}: a name is also a folder name, so it must be "
                          f"non-empty, not '.' or '..', and without '/', '\\' or NUL")


def _default_variants() -> List[Variant]:
    return [Variant("baseline"), Variant("elmo", ElmoSettings())]


#: Top-level keys whose value is a block with its own type.
_BLOCKS: Dict[str, Union[Type[FitConfig], Type[ModelSettings]]] = {"train": FitConfig, "model": ModelSettings}


@dataclass
class ExperimentConfig:
    """A whole experiment: the tasks and the variants compared on them over seeds.

    ``tasks`` are the task entries as written (see :func:`elmo.tasks.datasets.load_task`);
    each may carry its own ``model`` and ``train`` overrides (:meth:`model_for`,
    :meth:`train_for`)."""

    name: str = "experiment"
    description: Optional[str] = None
    seeds: List[int] = field(default_factory=lambda: [1, 2, 3])
    bilm: str = "default"                 # a bundled name, a model folder, "default", "random:..."
    embeddings: Dict[str, Any] = field(default_factory=lambda: {"glove": None})
    train: FitConfig = field(default_factory=FitConfig)
    model: ModelSettings = field(default_factory=ModelSettings)
    tasks: List[Any] = field(default_factory=list)
    variants: List[Variant] = field(default_factory=_default_variants)
    cache_layers: bool = True             # frozen biLM: compute each sentence's layers once
    out: Optional[str] = None             # results folder
    notes: Any = None
    threads: Optional[int] = None         # torch CPU threads (None or 0: torch's default)
    device: Optional[str] = None          # "cpu" (the default) or "cuda"
    #: the config as results.json records it (see the module docstring); not a setting
    record: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False,
                                   metadata={"internal": True})

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_dict(cls, d: Any) -> "ExperimentConfig":
        """The config of a JSON object (relative paths already resolved), checked whole."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"an experiment config is an object of settings, got {d!r}")
        settings = [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]
        unknown = sorted(set(d) - {f.name for f in settings})
        if unknown:
            raise ConfigError(f"unknown config keys: {', '.join(map(str, unknown))} "
                              f"(known: {', '.join(f.name for f in settings)})")
        if not d.get("tasks"):
            raise ConfigError("the config names no tasks")
        values = {k: v for k, v in d.items() if k not in _BLOCKS and k not in ("variants", "seeds")}
        values["seeds"] = _seeds(d.get("seeds", 3))
        cfg = build(cls, values, source="")      # the reader names the file
        for key, block in _BLOCKS.items():
            if key in d:
                setattr(cfg, key, block.from_dict(d[key] if d[key] is not None else {}))
        if d.get("variants") is not None:   # (null: the default pair, baseline and elmo)
            if not isinstance(d["variants"], list) or not d["variants"]:
                # ([] or {} ran the default pair, without a word)
                raise ConfigError(f"variants must be a list of variants (leave it out for a baseline and "
                                  f"ELMo at the input), got {d['variants']!r}")
            cfg.variants = [Variant.from_dict(v, f"variants[{i}]: ") for i, v in enumerate(d["variants"])]
        cfg.check()
        cfg.record = _record(d, cfg)
        return cfg

    def check(self) -> None:
        """The checks across settings: a baseline, distinct names, valid task overrides, the
        embeddings block."""
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ConfigError(f"variant names must be distinct: {names}")
        if not any(v.elmo is None for v in self.variants):
            raise ConfigError("the variants need a baseline (a variant without 'elmo')")
        for t in self.tasks:
            if not isinstance(t, dict) or "task" not in t:
                raise ConfigError(f"a task entry needs 'task' (a built-in task, or a kind with "
                                  f"your own files: {', '.join(TASK_KINDS)}): {t}")
        reported = [t.get("name", t["task"]) for t in self.tasks]
        for what, name in [("variant", n) for n in names] + [("task", n) for n in reported]:
            _check_folder_name(what, name)
        if len(set(reported)) != len(reported):
            raise ConfigError(f"task entries must report under distinct names (give each a "
                              f"'name'): {reported}")
        for t in self.tasks:                  # a task's own overrides fail now, not mid-run
            _check_task_entry(t)
            self.model_for(t)
            self.train_for(t)
        _check_embeddings(self.embeddings)
        if self.threads is not None and self.threads < 0:
            # (accepted by --plan and --print-config; the run stopped on it, naming no file)
            raise ConfigError(f"threads must be a whole number of 0 or more (0: torch's default), "
                              f"got {self.threads}")
        if self.device is not None:           # not a RuntimeError from torch once the first model is built
            from ..runtime import resolve_device
            try:
                resolve_device(self.device, what="device")
            except ValueError as e:
                raise ConfigError(str(e)) from None

    # ------------------------------------------------------------------ using
    def model_for(self, spec: Mapping[str, Any]) -> ModelSettings:
        """The model settings of one task entry: the ``model`` block and the entry's own."""
        return ModelSettings.from_dict({**self.model.to_dict(), **(spec.get("model") or {})},
                                       f"task {spec.get('name', spec.get('task'))}: ")

    def train_for(self, spec: Mapping[str, Any]) -> FitConfig:
        """The training settings of one task entry: the ``train`` block and the entry's own."""
        return FitConfig.from_dict({**dataclasses.asdict(self.train), **(spec.get("train") or {})},
                                   f"task {spec.get('name', spec.get('task'))}: ")

    @property
    def baseline(self) -> Variant:
        """The first variant without ELMo (every other variant is compared with it)."""
        return next(v for v in self.variants if v.elmo is None)

    def bilm_of(self, variant: Variant) -> str:
        """The biLM spec a variant with ELMo uses."""
        return (variant.elmo.bilm if variant.elmo is not None else None) or self.bilm

    # ------------------------------------------------------------------ writing
    def to_dict(self) -> Dict[str, Any]:
        """Every setting, defaults filled, in the file format (``--print-config``)."""
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.metadata.get("internal"):
                continue
            value = getattr(self, f.name)
            if f.name == "variants":
                value = [v.to_dict() for v in value]
            elif f.name in _BLOCKS:
                value = dataclasses.asdict(value)
            out[f.name] = copy.deepcopy(value)
        return out

    def recorded(self) -> Dict[str, Any]:
        """The config as results.json records it: :attr:`record` when read from a file, else
        every setting (:meth:`to_dict`)."""
        return self.record or self.to_dict()

    def __getitem__(self, key: str) -> Any:
        """Read access by key (``cfg["tasks"]``), for code written against the dict form."""
        if key not in {f.name for f in dataclasses.fields(self)}:
            raise KeyError(key)
        return getattr(self, key)


def _check_task_entry(t: Mapping[str, Any]) -> None:
    """A task entry's blocks, paths, sizes, seed, dev fraction and tokenize flag: a ``model``
    or ``train`` that is not an object, or a path that is not a string (in ``files`` or
    ``data_dir``), was a TypeError traceback; max_train -1 failed in random.sample, unnamed;
    max_tokens -2 cut every text's last two tokens and "x" was a TypeError traceback;
    subset_seed 1.7 was read as 1; "tokenize": "no" tokenized."""
    from .datasets import task_entry_problem
    problem = task_entry_problem(t)
    if problem:                # else found only when the task's data is read, not by --print-config
        raise ConfigError(problem)
    name = t.get("name", t["task"])
    for key in ("model", "train"):
        if t.get(key) is not None and not isinstance(t[key], Mapping):
            raise ConfigError(f"task {name}: {key} must be an object of settings, got {t[key]!r}")
    files = t.get("files")
    paths = {f"files.{k}": v for k, v in files.items()} if isinstance(files, Mapping) else {}
    for key, value in {**paths, "data_dir": t.get("data_dir")}.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"task {name}: {key} must be a path, got {value!r}")
    # max_test 0 scored no example: a run without a test score, which results.md showed as n/a
    # and experiment-report, experiment-table and --resume refuse; max_train 0 failed later;
    # max_dev 0 left no dev to stop early on, and the first run failed (after a dev_fraction
    # had taken its examples out of training)
    for key, least in (("max_train", 1), ("max_test", 1), ("max_dev", 1), ("max_tokens", 0),
                       ("max_tokens_b", 0), ("subset_seed", 0)):
        value = t.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            hint = ("; to train without dev (no early stopping), leave out the dev file "
                    "and set dev_fraction 0 (a task from your files)") if key == "max_dev" and value == 0 else ""
            raise ConfigError(f"task {name}: {key} must be a whole number of {least} or more (or "
                              f"absent), got {value!r}{hint}")
    fraction = t.get("dev_fraction", 0.0)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
        raise ConfigError(f"task {name}: dev_fraction must be a number in [0, 1), got {fraction!r}")
    if not isinstance(t.get("tokenize", False), bool):
        raise ConfigError(f"task {name}: tokenize must be true or false, got {t['tokenize']!r}")


def check_bilm_logins(cfg: "ExperimentConfig") -> None:
    """Refuse a biLM URL with a login in it (``user:password@``, ``token@``) before a run: the
    spec is written whole into results.json and each saved task model, since ``--resume`` and
    ``elmo predict`` load the biLM again from it, so hiding it there is no answer. The
    download reads a host's login from ~/.netrc ($NETRC) instead. (Not part of :meth:`check`:
    reading an older results.json that recorded such a URL still works.)"""
    from ..redact import holds_login, redact_url
    keys = [("bilm", cfg.bilm)] + [(f"variant {v.name!r}: elmo.bilm", v.elmo.bilm)
                                   for v in cfg.variants if v.elmo is not None]
    for key, spec in keys:
        if isinstance(spec, str) and holds_login(spec):
            raise ConfigError(f"{key} {redact_url(spec)!r}: the URL holds a password, which would be "
                              f"written into results.json and the saved models; put the login in "
                              f"~/.netrc (or $NETRC) and give the URL without it")


def bilm_identity(spec: str) -> Tuple[str, ...]:
    """The biLM a spec names, one value for each of its names (see
    :func:`elmo.hub.resolve.model_identity`; nothing is fetched). ``random:SPEC`` is a biLM of
    its own, ``default`` the package's default model."""
    import elmo
    from ..hub.resolve import model_identity
    from .bilms import RANDOM_PREFIX
    if spec.startswith(RANDOM_PREFIX):
        return (RANDOM_PREFIX,) + bilm_identity(spec[len(RANDOM_PREFIX):])
    return model_identity(elmo.DEFAULT_MODEL if spec == "default" else spec)


def check_variants_differ(cfg: "ExperimentConfig") -> None:
    """Refuse a variant that is the same model as an earlier one, before a run: a second
    variant without ELMo (``"elmo": null`` or none; a variant's only setting is its ELMo, so
    it is the baseline again), or one whose ELMo settings (defaults filled in, with the biLM
    each one uses) are an earlier variant's. Each was trained and reported under its own name,
    its every run a repeat of the other's, read as a second result. biLMs are compared by what
    they name (:func:`bilm_identity`): ``fixture`` and its folder's absolute path, ``./m`` and
    ``m``, are one biLM. (Not part of :meth:`ExperimentConfig.check`: results written before
    this still read.)"""
    seen: List[Tuple[Optional[ElmoSettings], str]] = []
    for i, v in enumerate(cfg.variants):
        settings = None if v.elmo is None else dataclasses.replace(
            v.elmo, bilm=repr(bilm_identity(cfg.bilm_of(v))))
        first = next((name for earlier, name in seen if earlier == settings), None)
        if first is not None:
            what = ("without 'elmo' it is a second baseline, the same model as" if v.elmo is None
                    else "its elmo settings (and biLM) are those of")
            raise RepeatedVariantError(f"variants[{i}] ({v.name}): {what} {first!r}, so each of its runs would "
                              f"repeat the run of {first!r} with the same seed; "
                              f"{'give it an elmo block' if v.elmo is None else 'change a setting'} "
                              f"or remove it")
        seen.append((settings, v.name))


def _check_embeddings(spec: Mapping[str, Any]) -> None:
    """``{"glove": null or PATH}`` or ``{"random_dim": D}``, checked before any run: a misspelt
    key or ``random_dim`` 0 fetched GloVe without a word, ``random_dim`` true gave 1-d vectors,
    both keys ignored ``glove``, and other values failed at the first task, naming nothing."""
    unknown = sorted(set(map(str, spec)) - {"glove", "random_dim"})
    if unknown:
        raise ConfigError(f"unknown embeddings settings: {', '.join(unknown)} (known: glove, random_dim)")
    if len(spec) > 1:
        raise ConfigError("embeddings: give glove or random_dim, not both")
    glove, dim = spec.get("glove"), spec.get("random_dim")
    if glove is not None and (not isinstance(glove, str) or not glove):
        raise ConfigError(f"embeddings: glove must be null (glove-50d) or a GloVe file's path, got {glove!r}")
    if "random_dim" in spec and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
        raise ConfigError(f"embeddings: random_dim must be an integer of 1 or more, got {dim!r}")


#: The most seeds a count may ask for: each is a training run per task and variant, so more is a
#: typo (a count of 10**9 built a list of a billion seeds, 10**23 overflowed).
MAX_SEEDS = 10_000


def _seeds(seeds: Any) -> List[int]:
    """3 -> [1, 2, 3]; a list is kept."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if not 1 <= seeds <= MAX_SEEDS:
            raise ConfigError(f"seeds must be a count from 1 to {MAX_SEEDS}, or a list of seeds; got {seeds}")
        return list(range(1, seeds + 1))
    listed = coerce("seeds", List[int], seeds)
    if not listed or len(set(listed)) != len(listed):  # a repeated seed would count one run twice
        raise ConfigError(f"seeds must be a non-empty list of distinct seeds, got {listed}")
    # Python's random.Random(-s) is Random(s), so a negative seed repeated a positive one's
    # shuffles; torch takes no seed of 2**64 or more (an unnamed OverflowError mid-run)
    bad = [s for s in listed if not 0 <= s < 2**64]
    if bad:
        raise ConfigError(f"seeds must be whole numbers from 0 to 2**64 - 1, got {bad[0]}")
    return listed


def _record(d: Mapping[str, Any], cfg: ExperimentConfig) -> Dict[str, Any]:
    """The file's values as written over the defaults (see the module docstring): the model
    and each variant's elmo block filled in, the train block and the rest as written."""
    rec = copy.deepcopy(dict(d))
    rec["seeds"] = list(cfg.seeds)
    for key in ("name", "bilm", "embeddings", "cache_layers"):
        rec.setdefault(key, copy.deepcopy(getattr(cfg, key)))
    rec["model"] = {**ModelSettings().to_dict(), **(d.get("model") or {})}
    defaults = {k: v for k, v in ElmoSettings().to_dict().items() if k != "bilm"}
    variants = d.get("variants") or [{"name": "baseline"}, {"name": "elmo", "elmo": {}}]
    rec["variants"] = []
    for v in copy.deepcopy(variants):
        e = v.get("elmo")
        if e is not None:
            e = {**defaults, **e}
            e["positions"] = list(e["positions"])
        rec["variants"].append({**v, "elmo": e})
    return rec


# ----------------------------------------------------------------------------- reading a file
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
    try:
        return resolve_paths(cfg, path.parent)
    except ConfigError as e:   # (a path refused: named in the file, as every other error of it)
        raise ConfigError(f"{path}: {e}") from None


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
    folder; a biLM folder too, where the config's folder holds it (see :func:`_bilm_from`).
    Every path's leading ``~`` is the home folder (:func:`expand_homes`)."""
    def fix(p):
        return str(base / p) if isinstance(p, str) and p and not Path(p).is_absolute() else p

    cfg = _each_path(expand_homes(cfg), fix, lambda spec, key: _bilm_from(spec, base, key))
    return cfg


def expand_homes(cfg: dict) -> dict:
    """A copy of ``cfg`` with a leading ``~`` of each of its paths (data, GloVe, biLMs, ``out``)
    made the home folder, as :func:`elmo.user_paths.expand_home` does: a config's (or a
    ``--set``'s) ``"~/data"`` was a folder named ``~`` (beside the config, or in the working
    folder for ``out``, which made one); a ``random:`` biLM's folder too. A path refused there
    (``$HOME/x``, ``~nosuchuser/x``) is a ConfigError, which the caller names the config in."""
    try:
        cfg = _each_path(copy.deepcopy(cfg), expand_home, lambda spec, key: _bilm_home(spec))
        if "out" in cfg:
            cfg["out"] = expand_home(cfg["out"])
    except ValueError as e:   # (expand_home's, about the value alone)
        raise ConfigError(str(e)) from None
    return cfg


def _bilm_home(spec: Any) -> Any:
    """A biLM spec with its folder's leading ``~`` expanded, after a ``random:`` prefix too
    (``random:~/runs/m`` was a folder named ``~``)."""
    from .bilms import RANDOM_PREFIX
    if isinstance(spec, str) and spec.startswith(RANDOM_PREFIX):
        return RANDOM_PREFIX + expand_home(spec[len(RANDOM_PREFIX):])
    return expand_home(spec)


def _each_path(cfg: dict, data: Callable[[Any], Any], bilm: Callable[[Any, str], Any]) -> dict:
    """``cfg`` (changed in place) with ``data`` applied to its data paths (a task's ``data_dir``
    and ``files``, the GloVe file) and ``bilm(spec, key)`` to its biLMs (the default and each
    variant's)."""
    if "bilm" in cfg:
        cfg["bilm"] = bilm(cfg["bilm"], "bilm")
    for i, v in enumerate(cfg.get("variants") or []):
        if isinstance(v, dict) and isinstance(v.get("elmo"), dict) and "bilm" in v["elmo"]:
            v["elmo"]["bilm"] = bilm(v["elmo"]["bilm"], f"variants[{i}].elmo.bilm")
    for t in cfg.get("tasks") or []:
        if not isinstance(t, dict):
            continue
        if "data_dir" in t:
            t["data_dir"] = data(t["data_dir"])
        if isinstance(t.get("files"), dict):
            t["files"] = {k: data(v) for k, v in t["files"].items()}
    emb = cfg.get("embeddings")
    if isinstance(emb, dict) and emb.get("glove"):
        emb["glove"] = data(emb["glove"])
    return cfg


def _bilm_from(spec, base: Path, key: str):
    """A config's biLM spec with a relative folder found beside the config file, like its data.

    A relative folder was found from the working folder only: a config beside its own model
    read another one of that name where the command ran, or stopped as not found. The working
    folder's copy still counts where the config's folder has none (the repo's configs name
    ``runs/...`` from the repo's root), and a name that could mean two different folders is
    refused rather than guessed. Names, URLs and absolute paths are kept as they are."""
    from .. import which_model
    from ..output_checks import same_file
    from .bilms import RANDOM_PREFIX
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


def baseline_name(cfg: ExperimentConfig) -> str:
    return cfg.baseline.name
