"""The model options, as stored in the original ``options.json``.

The original file looks like::

    {"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2,
              "cell_clip": 3, "proj_clip": 3, "use_skip_connections": true},
     "char_cnn": {"embedding": {"dim": 16},
                  "filters": [[1, 32], [2, 32], ...],
                  "n_highway": 2, "n_characters": 262,
                  "max_characters_per_token": 50, "activation": "relu"}}

Training options (``n_tokens_vocab``, ``dropout``, ``unroll_steps`` ...) may sit in the same
file; they are kept in :attr:`ElmoOptions.extra` and written back unchanged.

Every problem is reported as a :class:`ConfigError` that names the offending key, e.g.
``lstm.projection_dim: missing``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

from .checks import require_path
from .text_files import read_json, unique_keys


class ConfigError(ValueError):
    """An options.json that is missing a key or holds a wrong value; the message names the key."""


#: The largest count or width an options file may hold: a tensor dimension beyond it fails
#: inside torch (1e30 overflowed its sizes) or asks for more memory than any machine has.
MAX_SIZE = 2**31 - 1


def take_key(section: Mapping[str, Any], key: str, where: str, kind, *, default=..., check=None, why=""):
    """Read ``section[key]``, check its type and an optional predicate, or raise ConfigError
    naming ``where.key``. Public: the reader of ELMoForManyLangs folders checks its files with it."""
    name = f"{where}.{key}" if where else key
    if key not in section:
        if default is ...:
            raise ConfigError(f"{name}: missing")
        return default
    value = section[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{name}: expected {kind.__name__}, got {value!r}")
    if kind is int and abs(value) > MAX_SIZE:  # (1e30 overflowed inside torch)
        raise ConfigError(f"{name}: {section[key]!r} is beyond any model's size (at most {MAX_SIZE})")
    if check is not None and not check(value):
        raise ConfigError(f"{name}: {why}, got {value!r}")
    return value


def _refuse_unknown_keys(section: Mapping[str, Any], known: Tuple[str, ...], where: str) -> None:
    """ConfigError for a key of ``section`` that is not one of ``known``. A section's keys all
    shape the model, and one the reader passed over was a silent change of model: a misspelt
    ``"cel_clip": 3`` gave a model without cell clipping."""
    for key in section:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(known)})")


def _optional_clip(d: Mapping[str, Any], key: str) -> float | None:
    """A clip value: absent or null means no clipping (as in the original code)."""
    if d.get(key) is None:
        return None
    return take_key(d, key, "lstm", float, check=lambda v: v > 0 and math.isfinite(v),
                 why="must be a positive number or null")


#: Why an options file's ``"bidirectional": false`` is refused.
BIDIRECTIONAL_ONLY = "only bidirectional models are supported (a forward-only language model is not)"

#: The keys of the ``lstm`` and ``char_cnn`` sections (the original's; any other is refused).
LSTM_KEYS = ("dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections")
CHAR_CNN_KEYS = ("embedding", "filters", "n_highway", "n_characters", "max_characters_per_token", "activation")


def _set_fields(config: Any, fields: Mapping[str, Any]) -> None:
    """Put the checked (and normalised: ``3`` -> ``3.0``, lists -> tuples) ``fields`` on a
    frozen dataclass from its ``__post_init__``."""
    for name, value in fields.items():
        object.__setattr__(config, name, value)


def _lstm_fields(d: Mapping[str, Any]) -> Dict[str, Any]:
    """The checked :class:`LSTMConfig` fields of an options file's ``lstm`` section."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"lstm: expected an object, got {d!r}")
    _refuse_unknown_keys(d, LSTM_KEYS, "lstm")
    positive = dict(check=lambda v: v > 0, why="must be positive")
    return dict(
        dim=take_key(d, "dim", "lstm", int, **positive),
        projection_dim=take_key(d, "projection_dim", "lstm", int, **positive),
        n_layers=take_key(d, "n_layers", "lstm", int, **positive),
        cell_clip=_optional_clip(d, "cell_clip"),
        proj_clip=_optional_clip(d, "proj_clip"),
        use_skip_connections=take_key(d, "use_skip_connections", "lstm", bool),
    )


@dataclass(frozen=True)
class LSTMConfig:
    """The biLM's LSTM stacks: ``n_layers`` layers of ``dim`` cells projected to ``projection_dim``."""

    dim: int
    projection_dim: int
    n_layers: int
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True

    def __post_init__(self) -> None:
        # Built directly (elmo.LSTMConfig(...)) the fields were never checked: a NaN or negative
        # clip ran and gave NaN or constant vectors without an error, a string clip or a zero
        # n_layers failed deep in torch. The same checks as for an options file, naming the field.
        _set_fields(self, _lstm_fields(self.to_dict()))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LSTMConfig":
        return cls(**_lstm_fields(d))

    def to_dict(self) -> Dict[str, Any]:
        return {"dim": self.dim, "projection_dim": self.projection_dim, "n_layers": self.n_layers,
                "cell_clip": self.cell_clip, "proj_clip": self.proj_clip,
                "use_skip_connections": self.use_skip_connections}


#: The most values the character CNN may compute for one token: at each of its
#: ``max_characters_per_token`` positions the character embedding and every filter's output
#: (about 10**5 in the released models, 50 positions of 16 + 2048). Beyond it a batch of tokens
#: cannot be held: 10**9 positions passed, and the first batch failed with a MemoryError naming
#: no file.
MAX_VALUES_PER_TOKEN = 2**24
#: The most positions any model's token can have, whatever its sizes: each position holds at
#: least a 1-dim character embedding and one filter's output. ``batch_to_ids``, which knows no
#: model, refuses more with the options file's words (:func:`too_many_characters`).
MAX_CHARACTERS_PER_TOKEN = MAX_VALUES_PER_TOKEN // 2


def too_many_characters(max_chars: int) -> str:
    """Why ``max_chars`` positions per token are more than any model takes ("" when they are
    not): the one message of the options file's key and of ``batch_to_ids``'s argument."""
    if max_chars <= MAX_CHARACTERS_PER_TOKEN:
        return ""
    return (f"{max_chars} positions are more than any model's token can have (at most "
            f"{MAX_CHARACTERS_PER_TOKEN}: each holds a character embedding and the filters' "
            f"outputs; released models: 50)")


def _check_values_per_token(max_chars: int, emb_dim: int, n_filters: int, widest: int) -> None:
    """Refuse a ``max_characters_per_token`` whose one token needs more than
    :data:`MAX_VALUES_PER_TOKEN` values, given the embedding and filter sizes. Only the
    positions are judged: where not even the ``widest`` filter's width of positions would fit,
    the filters are what is too large (named by the weights' shapes, or :data:`MAX_SIZE`), and
    blaming the positions would point at the wrong key."""
    per_position = emb_dim + n_filters
    if MAX_VALUES_PER_TOKEN // per_position < widest:
        return
    if max_chars * per_position > MAX_VALUES_PER_TOKEN:
        raise ConfigError(f"char_cnn.max_characters_per_token: {max_chars} positions of {per_position} values "
                          f"each (char_cnn.embedding.dim {emb_dim} + {n_filters} filters) are "
                          f"{max_chars * per_position} values for every token, more than a batch can hold; "
                          f"at most {MAX_VALUES_PER_TOKEN // per_position} with these sizes (released models: 50)")


def _char_cnn_fields(d: Mapping[str, Any]) -> Dict[str, Any]:
    """The checked :class:`CharCNNConfig` fields of an options file's ``char_cnn`` section."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"char_cnn: expected an object, got {d!r}")
    _refuse_unknown_keys(d, CHAR_CNN_KEYS, "char_cnn")
    emb = take_key(d, "embedding", "char_cnn", dict)
    _refuse_unknown_keys(emb, ("dim",), "char_cnn.embedding")
    emb_dim = take_key(emb, "dim", "char_cnn.embedding", int, check=lambda v: v > 0, why="must be positive")
    raw = take_key(d, "filters", "char_cnn", list, check=lambda v: len(v) > 0, why="must not be empty")
    filters: List[Tuple[int, int]] = []
    for i, f in enumerate(raw):
        ok = (isinstance(f, (list, tuple)) and len(f) == 2
              and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in f))
        if not ok:
            raise ConfigError(f"char_cnn.filters[{i}]: expected [width, count] of positive ints, got {f!r}")
        if max(f) > MAX_SIZE:   # (as every other size: a count of 10**12 failed in torch's allocator)
            raise ConfigError(f"char_cnn.filters[{i}]: {f!r} is beyond any model's size (at most {MAX_SIZE})")
        filters.append((int(f[0]), int(f[1])))
    max_chars = take_key(d, "max_characters_per_token", "char_cnn", int,
                      check=lambda v: v >= 3, why="must be at least 3 (begin, end and one byte)")
    if max(w for w, _ in filters) > max_chars:
        raise ConfigError(f"char_cnn.filters: a width exceeds max_characters_per_token={max_chars}")
    _check_values_per_token(max_chars, emb_dim, sum(n for _, n in filters), max(w for w, _ in filters))
    # (what the sizes leave unjudged, a filter as wide as the positions: a file then took
    # widths batch_to_ids refuses)
    if too_many_characters(max_chars):
        raise ConfigError(f"char_cnn.max_characters_per_token: {too_many_characters(max_chars)}")
    return dict(
        embedding_dim=emb_dim,
        filters=tuple(filters),
        n_highway=take_key(d, "n_highway", "char_cnn", int, check=lambda v: v >= 0, why="must be >= 0"),
        n_characters=take_key(d, "n_characters", "char_cnn", int, default=262,
                           check=lambda v: v in (261, 262), why="must be 261 or 262"),
        max_characters_per_token=max_chars,
        activation=take_key(d, "activation", "char_cnn", str, default="relu",
                         check=lambda v: v in ("relu", "tanh"), why="must be 'relu' or 'tanh'"),
    )


@dataclass(frozen=True)
class CharCNNConfig:
    """The character CNN: ``filters`` is a list of (width, number of filters)."""

    embedding_dim: int
    filters: Tuple[Tuple[int, int], ...]
    n_highway: int
    n_characters: int = 262
    max_characters_per_token: int = 50
    activation: str = "relu"

    @property
    def n_filters(self) -> int:
        """Total number of convolution channels (the highway width)."""
        return sum(n for _, n in self.filters)

    @property
    def max_width(self) -> int:
        return max(w for w, _ in self.filters)

    def __post_init__(self) -> None:
        # Built directly, as LSTMConfig: a max_characters_per_token of 2 or a negative
        # n_highway failed deep in the model or was taken as 0, an unknown activation as relu.
        filters = list(self.filters) if isinstance(self.filters, (list, tuple)) else self.filters
        _set_fields(self, _char_cnn_fields({
            "embedding": {"dim": self.embedding_dim}, "filters": filters, "n_highway": self.n_highway,
            "n_characters": self.n_characters, "max_characters_per_token": self.max_characters_per_token,
            "activation": self.activation}))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CharCNNConfig":
        return cls(**_char_cnn_fields(d))

    def to_dict(self) -> Dict[str, Any]:
        return {"embedding": {"dim": self.embedding_dim}, "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway, "n_characters": self.n_characters,
                "max_characters_per_token": self.max_characters_per_token, "activation": self.activation}


def _char_vocabulary_fields(d: Mapping[str, Any]) -> Dict[str, Any]:
    """The checked :class:`CharVocabularyConfig` fields of an options file's ``char_vocabulary``."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"char_vocabulary: expected an object, got {d!r}")
    where = "char_vocabulary"
    _refuse_unknown_keys(d, ("format", "n_characters", "word_dim", "n_words"), where)
    word_dim = take_key(d, "word_dim", where, int, default=0, check=lambda v: v >= 0, why="must be >= 0")
    return dict(
        n_characters=take_key(d, "n_characters", where, int, check=lambda v: v > 0, why="must be positive"),
        word_dim=word_dim,
        n_words=take_key(d, "n_words", where, int, default=0,
                      check=lambda v: v > 0 or word_dim == 0, why="must be positive when word_dim > 0"),
        format=take_key(d, "format", where, str, default="elmoformanylangs",
                     check=lambda v: v == "elmoformanylangs", why="must be 'elmoformanylangs'"),
    )


@dataclass(frozen=True)
class CharVocabularyConfig:
    """Characters through a dictionary instead of UTF-8 bytes (ELMoForManyLangs models).

    The dictionaries themselves sit beside the weights (``char.dic``, and ``word.dic`` when
    ``word_dim`` > 0; see :mod:`elmo.manylangs.dictionary`); this section holds their sizes, so
    the weights' shapes follow from the options alone. In the options file::

        "char_vocabulary": {"format": "elmoformanylangs", "n_characters": 188,
                            "word_dim": 100, "n_words": 71222}
    """

    n_characters: int
    word_dim: int = 0
    n_words: int = 0
    format: str = "elmoformanylangs"

    def __post_init__(self) -> None:
        _set_fields(self, _char_vocabulary_fields(self.to_dict()))  # (built directly: see LSTMConfig)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CharVocabularyConfig":
        return cls(**_char_vocabulary_fields(d))

    def to_dict(self) -> Dict[str, Any]:
        return {"format": self.format, "n_characters": self.n_characters, "word_dim": self.word_dim,
                "n_words": self.n_words}


@dataclass(frozen=True)
class ElmoOptions:
    """The whole options.json: the LSTM and char CNN sections plus any extra keys, kept verbatim.

    ``char_vocabulary`` is None for the original models (characters are UTF-8 bytes); it is set
    for models whose characters go through a dictionary (:class:`CharVocabularyConfig`).
    """

    lstm: LSTMConfig
    char_cnn: CharCNNConfig
    extra: Dict[str, Any] = field(default_factory=dict)
    char_vocabulary: CharVocabularyConfig | None = None

    def __post_init__(self) -> None:
        # Built directly: a dict or None for a section failed later with an AttributeError
        # inside the model (BiLM reads options.lstm.dim ...); the sections are checked objects.
        for name, kind in (("lstm", LSTMConfig), ("char_cnn", CharCNNConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name}: expected {kind.__name__} (or ElmoOptions.from_dict), got "
                                  f"{type(getattr(self, name)).__name__}")
        if not isinstance(self.char_vocabulary, (CharVocabularyConfig, type(None))):
            raise ConfigError(f"char_vocabulary: expected CharVocabularyConfig or None, got "
                              f"{type(self.char_vocabulary).__name__}")
        if not isinstance(self.extra, Mapping):
            raise ConfigError(f"extra: expected a dict of the options file's other keys, got "
                              f"{type(self.extra).__name__}")
        take_key(self.extra, "bidirectional", "", bool, default=True, check=lambda v: v, why=BIDIRECTIONAL_ONLY)

    @property
    def output_dim(self) -> int:
        """Width of every biLM layer: forward and backward concatenated."""
        return 2 * self.lstm.projection_dim

    @property
    def num_layers(self) -> int:
        """L + 1: the token layer plus one per LSTM layer."""
        return self.lstm.n_layers + 1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ElmoOptions":
        if not isinstance(d, Mapping):
            raise ConfigError(f"options: expected a JSON object, got {type(d).__name__}")
        # The original trainer's switch for a forward-only model (kept in ``extra``): the biLM
        # here always has both directions, and ignoring it trained and ran another model.
        take_key(d, "bidirectional", "", bool, default=True, check=lambda v: v, why=BIDIRECTIONAL_ONLY)
        lstm = LSTMConfig.from_dict(take_key(d, "lstm", "", dict))
        vocab = d.get("char_vocabulary")
        cnn_section = take_key(d, "char_cnn", "", dict)
        if vocab is not None:  # char_cnn.n_characters counts byte ids; not used with a dictionary
            cnn_section = {k: v for k, v in cnn_section.items() if k != "n_characters"}
        cnn = CharCNNConfig.from_dict(cnn_section)
        extra = {k: v for k, v in d.items() if k not in ("lstm", "char_cnn", "char_vocabulary")}
        return cls(lstm=lstm, char_cnn=cnn, extra=extra,
                   char_vocabulary=None if vocab is None else CharVocabularyConfig.from_dict(vocab))

    @classmethod
    def preset(cls, name: str) -> "ElmoOptions":
        """A named model shape: "small", "medium" or "original" (see :data:`PRESETS`)."""
        return preset(name)

    @classmethod
    def from_file(cls, path: str | Path) -> "ElmoOptions":
        path = require_path("options file", path)
        data = read_json(path, ConfigError, what="valid JSON", expected="the options JSON file",
                         missing="options file not found", object_pairs_hook=unique_keys)
        if isinstance(data, dict) and data.get("format") == "elmo-task-model":   # (tasks.saved.FORMAT)
            # a task model's folder given for a biLM was "config.json: lstm: missing"
            raise ConfigError(f"{path}: the config of a task model saved by `elmo experiment "
                              f"--save-models`, not of a biLM; `elmo predict` runs it")
        try:
            return cls.from_dict(data)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None

    def to_dict(self) -> Dict[str, Any]:
        d = dict(self.extra)
        d["lstm"] = self.lstm.to_dict()
        d["char_cnn"] = self.char_cnn.to_dict()
        if self.char_vocabulary is not None:
            del d["char_cnn"]["n_characters"]
            d["char_vocabulary"] = self.char_vocabulary.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


#: The character CNN filters of every released English model, as (width, count): 2048 channels.
RELEASED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


def _released_shape(cells: int, projection: int, n_highway: int) -> Dict[str, Any]:
    """The options.json of a released model ``2x{cells}_{projection}_2048cnn_{n_highway}xhighway``."""
    return {"lstm": {"dim": cells, "projection_dim": projection, "n_layers": 2, "cell_clip": 3,
                     "proj_clip": 3, "use_skip_connections": True},
            "char_cnn": {"embedding": {"dim": 16}, "filters": [list(f) for f in RELEASED_FILTERS],
                         "n_highway": n_highway, "n_characters": 262, "max_characters_per_token": 50,
                         "activation": "relu"}}


#: Named model shapes, as options.json sections. ``elmo train`` builds :data:`TRAIN_PRESET`
#: when no --options file is given.
PRESETS: Dict[str, Dict[str, Any]] = {
    "small": _released_shape(1024, 128, 1),
    "medium": _released_shape(2048, 256, 1),
    "original": _released_shape(4096, 512, 2),
}
#: The shape ``elmo train`` builds without --options.
TRAIN_PRESET = "small"
#: No preset is called "default": one was, an alias of "small", while the bundled ``default``
#: model has another shape (512 cells, 256 filters), and a user asking for it got the other.
_NOT_A_PRESET = {"default": "the bundled default model's shape is "
                            "elmo.from_pretrained('default').options (512 cells, projection 128, 256 filters); "
                            "the shape `elmo train` builds without --options is preset 'small'"}


def preset_dict(name: str) -> Dict[str, Any]:
    """A fresh copy of the options.json sections of preset ``name`` (safe to edit)."""
    if isinstance(name, str) and name in _NOT_A_PRESET:
        raise ConfigError(f"preset {name!r}: there is none of that name; {_NOT_A_PRESET[name]}")
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"preset {name!r}: unknown; known presets: {', '.join(sorted(PRESETS))}")
    return json.loads(json.dumps(PRESETS[name]))


def preset(name: str) -> ElmoOptions:
    """The :class:`ElmoOptions` of preset ``name`` (see :data:`PRESETS`)."""
    return ElmoOptions.from_dict(preset_dict(name))
