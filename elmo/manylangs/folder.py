"""Load an ELMoForManyLangs (HIT-SCIR) model folder into a :class:`~elmo.BiLM`, exactly.

A folder holds::

    config.json            the training run's options; only ``config_path`` is read
    <model config>.json    sections encoder / token_embedder (classifier, dropout: training only)
    char.dic, word.dic     the dictionaries (:mod:`elmo.manylangs.dictionary`)
    token_embedder.pkl     torch.save state dict of the character CNN (+ word embedding)
    encoder.pkl            torch.save state dict of the two LSTM stacks

``config_path`` is looked for, in order, as given (relative to the folder), as its basename
in the folder, and as its basename among the configurations bundled in
``elmo/resources/elmoformanylangs`` (released folders name a path of the authors' machine).

The .pkl files are read with ``torch.load(weights_only=True)`` only (no code is unpickled),
and must hold exactly the expected keys and shapes. One in the zip format of PyTorch 1.6 on
must pass the CRC-32 check of every record (unless saved without them) and Python's reading of
its headers, which torch.load skips. A key given twice in either JSON file, or one the model configuration's
sections do not know, is refused (either way the model would differ without a word). Their parameters map exactly onto ours:

* highway: theirs is ``x <- g * x + (1 - g) * relu(h)`` with the gate ``g`` in the second half
  of each layer; ours gates the non-linear branch, so the gate's weights and bias are negated
  (sigmoid(-z) = 1 - sigmoid(z)) and the halves swapped;
* LSTM: gate order i, f, candidate, o with one bias and no forget offset; ours is i, j
  (candidate), f, o with +1 added to the forget gate at run time, so the blocks are reordered
  and 1 is subtracted from the forget bias. A clip of 0 means no clipping. Residual
  connections from the second layer on, as ours.

Outputs agree with the original's to float rounding (the conformance fixture, tolerance 1e-5).
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Dict, Mapping, Tuple

import torch

from ..config import CharVocabularyConfig, ConfigError, ElmoOptions, take_key
from ..text_files import read_json, unique_keys
from ..modules.bilm import BiLM
from ..modules.skip_init import init_skipped
from ..runtime import resolve_device
from ..weight_values import WeightFileError, check_finite
from ..zip_records import zip_damage
from .dictionary import read_dictionary
from .vocabulary import CHAR_DIC, WORD_DIC, CharVocabulary

FOLDER_CONFIG = "config.json"
TOKEN_EMBEDDER = "token_embedder.pkl"
ENCODER = "encoder.pkl"
#: Bundled configuration files by the basenames released folders use.
BUNDLED_CONFIGS = {"cnn_50_100_512_4096_sample.json": "cnn_50_100_512_4096_sample.json",
                   "cnn_0_100_512_4096_sample.json": "cnn_50_100_512_4096_sample.json"}


#: The keys of a model configuration's sections, as the released configurations hold them.
ENCODER_KEYS = ("name", "projection_dim", "cell_clip", "proj_clip", "dim", "n_layers")
TOKEN_EMBEDDER_KEYS = ("name", "activation", "filters", "n_highway", "word_dim", "char_dim",
                       "max_characters_per_token")


def is_manylangs_folder(folder: str | Path) -> bool:
    """Whether ``folder`` looks like an ELMoForManyLangs model (its .pkl files, or a
    ``config.json`` that points at a model configuration)."""
    folder = Path(folder)
    if (folder / TOKEN_EMBEDDER).exists() or (folder / ENCODER).exists():
        return True
    return holds_manylangs_config(folder)


def holds_manylangs_config(folder: str | Path) -> bool:
    """Whether ``folder/config.json`` is an ELMoForManyLangs folder's (it names the model
    configuration), not the native layout's file of the same name."""
    try:
        data = read_json(Path(folder) / FOLDER_CONFIG, object_pairs_hook=unique_keys)
    except ValueError:
        return False
    return isinstance(data, dict) and "config_path" in data


# ---------------------------------------------------------------------- configuration
def resolve_config_path(folder: str | Path) -> Path:
    """The model configuration file that ``folder/config.json`` names (see the module doc)."""
    folder = Path(folder)
    meta_path = folder / FOLDER_CONFIG
    meta = read_json(meta_path, ConfigError, missing="not found (an ELMoForManyLangs folder needs it)",
                     expected="an ELMoForManyLangs folder's config.json", object_pairs_hook=unique_keys)
    if not isinstance(meta, dict):
        raise ConfigError(f"{meta_path}: expected a JSON object")
    try:
        named = take_key(meta, "config_path", "", str)
    except ConfigError as e:
        raise ConfigError(f"{meta_path}: {e}") from None
    name = Path(named.replace("\\", "/")).name
    candidates = [folder / named, folder / name]
    if name in BUNDLED_CONFIGS:
        candidates.append(Path(str(resources.files("elmo") / "resources" / "elmoformanylangs"
                                   / BUNDLED_CONFIGS[name])))
    for path in candidates:
        if path.is_file():
            return path
    raise ConfigError(f"{meta_path}: config_path {named!r} not found (looked in the folder for "
                      f"{name!r}; bundled configurations: {', '.join(BUNDLED_CONFIGS)})")


def _clip(section: Mapping[str, Any], key: str, where: str):
    value = take_key(section, key, where, float, default=0.0,
                  check=lambda v: v >= 0, why="must be >= 0 (0: no clipping)")
    return value or None  # the original tests the value's truth: 0 means no clipping


def read_model_config(path: str | Path, n_characters: int, n_words: int) -> ElmoOptions:
    """Our options for the model configuration at ``path`` and dictionaries of these sizes.
    Errors name the file and key (e.g. ``encoder.dim: missing``)."""
    path = Path(path)
    # (a key given twice: Python's parser keeps the last value, another model without a word)
    data = read_json(path, ConfigError, expected="an ELMoForManyLangs model configuration",
                     object_pairs_hook=unique_keys)
    try:
        if not isinstance(data, dict):
            raise ConfigError("expected a JSON object")
        enc = take_key(data, "encoder", "", dict)
        emb = take_key(data, "token_embedder", "", dict)
        _refuse_unknown(enc, "encoder", ENCODER_KEYS)
        _refuse_unknown(emb, "token_embedder", TOKEN_EMBEDDER_KEYS)
        take_key(enc, "name", "encoder", str, check=lambda v: v == "elmo",
              why="only the 'elmo' encoder (the released models') is supported")
        take_key(emb, "name", "token_embedder", str, check=lambda v: v == "cnn",
              why="only the 'cnn' token embedder is supported")
        positive = dict(check=lambda v: v > 0, why="must be positive")
        word_dim = take_key(emb, "word_dim", "token_embedder", int, default=0,
                         check=lambda v: v >= 0, why="must be >= 0")
        options = {
            "lstm": {"dim": take_key(enc, "dim", "encoder", int, **positive),
                     "projection_dim": take_key(enc, "projection_dim", "encoder", int, **positive),
                     "n_layers": take_key(enc, "n_layers", "encoder", int, **positive),
                     "cell_clip": _clip(enc, "cell_clip", "encoder"),
                     "proj_clip": _clip(enc, "proj_clip", "encoder"),
                     "use_skip_connections": True},
            "char_cnn": {"embedding": {"dim": take_key(emb, "char_dim", "token_embedder", int, **positive)},
                         "filters": take_key(emb, "filters", "token_embedder", list),
                         "n_highway": take_key(emb, "n_highway", "token_embedder", int),
                         "max_characters_per_token": take_key(emb, "max_characters_per_token",
                                                           "token_embedder", int),
                         "activation": take_key(emb, "activation", "token_embedder", str)},
            "char_vocabulary": {"format": "elmoformanylangs", "n_characters": n_characters,
                                "word_dim": word_dim, "n_words": n_words if word_dim else 0},
        }
        return ElmoOptions.from_dict(options)
    except ConfigError as e:
        raise ConfigError(f"{path}: {_their_names(str(e))}") from None


def _refuse_unknown(section: Mapping[str, Any], where: str, known: Tuple[str, ...]) -> None:
    """ConfigError for a key the reader does not know: a misspelt ``" proj_clip"`` left the
    default (no clipping) in place, another model without a word."""
    for key in section:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(known)})")


def _their_names(message: str) -> str:
    """A message about our option names, in the names of the model configuration file."""
    for ours, theirs in (("char_cnn.embedding.dim", "token_embedder.char_dim"),
                         ("char_cnn.", "token_embedder."), ("lstm.", "encoder.")):
        message = message.replace(ours, theirs)
    return message


# ---------------------------------------------------------------------- weights
def torch_state_dict(path: Path) -> Mapping[str, torch.Tensor]:
    """A torch.save state dict, read without unpickling code (``weights_only=True``); each
    way it fails, one line naming ``path``."""
    if not path.is_file():
        raise WeightFileError(f"{path}: weight file not found")
    damage = zip_damage(path)   # (torch.load checks none of it: see elmo.zip_records)
    if damage is not None:
        raise WeightFileError(f"{path}: {damage}, the file is corrupt (changed since it was saved: "
                              f"a damaged copy or download?)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file: one line naming it
        raise WeightFileError(f"{path}: not a readable torch state dict ({_load_failure(e)})") from None
    if not isinstance(state, Mapping):
        raise WeightFileError(f"{path}: expected a state dict, got {type(state).__name__}")
    return state


def _load_failure(e: BaseException) -> str:
    """torch.load's reason for one line: where the weights-only reader refused the file, its own
    words (torch's message opens by advising to load the file with weights_only=False, which
    can run code from the file: never to be repeated to a user; it also holds terminal
    escapes), else the first line; control characters shown as '?', cut to 120 characters. A
    legacy file's storage of another size than its record is said in words: torch's message
    for it is its unfilled format ("expected %ld got %ld") and a number run on after it."""
    text = str(e)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    if "expected %ld got %ld" in text:   # (torch's own format left unfilled, a number run on after it)
        text = "a tensor's storage holds another number of bytes than the file records for it"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = "".join(c if c.isprintable() else "?" for c in (lines[0] if lines else type(e).__name__))
    return first if len(first) <= 120 else first[:117] + "..."


def check_state_dict(path: Path, state: Mapping[str, torch.Tensor],
                     expected: Dict[str, Tuple[int, ...]]) -> None:
    """``state`` (read from ``path``) must hold exactly the ``expected`` keys and shapes."""
    for name, shape in expected.items():
        if name not in state:
            raise WeightFileError(f"{path}: key '{name}' is missing (expected shape {shape})")
        value = state[name]
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            raise WeightFileError(f"{path}: key '{name}' is not a float tensor")
        if value.layout != torch.strided:   # (a sparse one failed later, in a traceback)
            raise WeightFileError(f"{path}: key '{name}' is a {value.layout} tensor, expected a dense one")
        if _overlapping(value):
            raise WeightFileError(f"{path}: key '{name}' has strides {value.stride()} for shape {tuple(value.shape)}: "
                                  f"its values share memory, which no saved weight does (a damaged file?)")
        if tuple(value.shape) != shape:
            raise WeightFileError(f"{path}: key '{name}' has shape {tuple(value.shape)}, "
                                  f"expected {shape}")
        check_finite(value, f"{path}: key '{name}'")
    extra = [k for k in state if k not in expected]
    if extra:
        raise WeightFileError(f"{path}: unexpected key '{extra[0]}'"
                              + (f" and {len(extra) - 1} more" if len(extra) > 1 else ""))


def _overlapping(value: torch.Tensor) -> bool:
    """Whether two elements of ``value`` may share memory: its dims of more than one element,
    by stride, each step past the span of the ones below. A legacy .pkl (no checksums) whose
    stride 1 read 0 loaded one value 16 times, silently."""
    reach = 1
    for stride, size in sorted((st, sz) for st, sz in zip(value.stride(), value.shape) if sz > 1):
        if stride < reach:
            return True
        reach = stride * size
    return False


def _vocabulary(options: ElmoOptions) -> CharVocabularyConfig:
    """The dictionary sizes of ELMoForManyLangs options; options of another model (which read
    UTF-8 bytes and have none) are refused in one line rather than failing on None."""
    if options.char_vocabulary is None:
        raise ConfigError("these options have no char_vocabulary: they are not an "
                          "ELMoForManyLangs model's")
    return options.char_vocabulary


def expected_token_embedder(options: ElmoOptions) -> Dict[str, Tuple[int, ...]]:
    """token_embedder.pkl's keys and shapes for these options."""
    cnn, vocab = options.char_cnn, _vocabulary(options)
    f, p = cnn.n_filters, options.lstm.projection_dim
    shapes: Dict[str, Tuple[int, ...]] = {}
    if vocab.word_dim:
        shapes["word_emb_layer.embedding.weight"] = (vocab.n_words, vocab.word_dim)
    shapes["char_emb_layer.embedding.weight"] = (vocab.n_characters, cnn.embedding_dim)
    for i, (width, count) in enumerate(cnn.filters):
        shapes[f"convolutions.{i}.weight"] = (count, cnn.embedding_dim, width)
        shapes[f"convolutions.{i}.bias"] = (count,)
    for k in range(cnn.n_highway):
        shapes[f"highways._layers.{k}.weight"] = (2 * f, f)
        shapes[f"highways._layers.{k}.bias"] = (2 * f,)
    shapes["projection.weight"] = (p, vocab.word_dim + f)
    shapes["projection.bias"] = (p,)
    return shapes


def expected_encoder(options: ElmoOptions) -> Dict[str, Tuple[int, ...]]:
    """encoder.pkl's keys and shapes for these options (the 'elmo' encoder)."""
    c, p = options.lstm.dim, options.lstm.projection_dim
    shapes: Dict[str, Tuple[int, ...]] = {}
    for layer in range(options.lstm.n_layers):
        for d in ("forward", "backward"):
            prefix = f"{d}_layer_{layer}"
            shapes[f"{prefix}.input_linearity.weight"] = (4 * c, p)
            shapes[f"{prefix}.state_linearity.weight"] = (4 * c, p)
            shapes[f"{prefix}.state_linearity.bias"] = (4 * c,)
            shapes[f"{prefix}.state_projection.weight"] = (p, c)
    return shapes


def _gates_to_ours(w: torch.Tensor, cells: int) -> torch.Tensor:
    """Gate blocks along dim 0 from i, f, candidate, o to our i, candidate, f, o."""
    i, f, g, o = w.split(cells, dim=0)
    return torch.cat([i, g, f, o], dim=0)


@torch.no_grad()
def assign_weights(bilm: BiLM, embedder: Mapping[str, torch.Tensor],
                   encoder: Mapping[str, torch.Tensor]) -> None:
    """Copy the two state dicts into ``bilm`` in our conventions (see the module doc)."""
    enc = bilm.token_encoder
    dtype = enc.projection.weight.dtype
    put = lambda param, value: param.copy_(value.to(dtype))  # noqa: E731
    put(enc.char_embedding.weight[1:], embedder["char_emb_layer.embedding.weight"])
    enc.char_embedding.weight[0].zero_()
    if enc.word_embedding is not None:
        put(enc.word_embedding.weight[1:], embedder["word_emb_layer.embedding.weight"])
        enc.word_embedding.weight[0].zero_()
    for i, conv in enumerate(enc.convolutions):
        put(conv.weight, embedder[f"convolutions.{i}.weight"])
        put(conv.bias, embedder[f"convolutions.{i}.bias"])
    f = bilm.options.char_cnn.n_filters
    for k, layer in enumerate(enc.highway.layers):
        weight, bias = embedder[f"highways._layers.{k}.weight"], embedder[f"highways._layers.{k}.bias"]
        # ours: rows [0, F) the gate of the non-linear branch = minus their gate of the input
        put(layer.weight[:f], -weight[f:])
        put(layer.bias[:f], -bias[f:])
        put(layer.weight[f:], weight[:f])
        put(layer.bias[f:], bias[:f])
    put(enc.projection.weight, embedder["projection.weight"])
    put(enc.projection.bias, embedder["projection.bias"])
    c = bilm.options.lstm.dim
    for j, lstm_layer in enumerate(bilm.lstm.layers):
        for d, name in enumerate(("forward", "backward")):
            prefix = f"{name}_layer_{j}"
            put(lstm_layer.weight_ih[d],
                _gates_to_ours(encoder[f"{prefix}.input_linearity.weight"], c))
            put(lstm_layer.weight_hh[d],
                _gates_to_ours(encoder[f"{prefix}.state_linearity.weight"], c))
            bias = _gates_to_ours(encoder[f"{prefix}.state_linearity.bias"], c).clone()
            bias[2 * c:3 * c] -= 1.0  # ours adds 1 to the forget gate when it runs
            put(lstm_layer.bias[d], bias)
            put(lstm_layer.weight_proj[d], encoder[f"{prefix}.state_projection.weight"])


# ---------------------------------------------------------------------- the folder
def load_manylangs(folder: str | Path, *, stateful: bool = False,
                   device: str | torch.device | None = None) -> BiLM:
    """Load an ELMoForManyLangs model folder (see the module doc) as a :class:`BiLM`.

    Every problem raises :class:`ConfigError` or :class:`WeightFileError` with one line naming
    the file (and the key, line or shape).
    """
    from ..folder_checksums import checked_reads

    folder = Path(folder)
    config_path = resolve_config_path(folder)
    # (against the SHA-256 the folder's metadata.json records, where it has one: the model
    # configuration config.json names among them, which load_pretrained's list cannot name)
    read = [config_path, *(folder / n for n in (CHAR_DIC, WORD_DIC, TOKEN_EMBEDDER, ENCODER))]
    with checked_reads(read):
        bilm = _read_folder(folder, config_path, stateful)
    return bilm.to(resolve_device(device, None, "device")) if device is not None else bilm


def _read_folder(folder: Path, config_path: Path, stateful: bool) -> BiLM:
    """:func:`load_manylangs` of ``folder``, whose model configuration is ``config_path``."""
    chars = read_dictionary(folder / CHAR_DIC)
    # Read the configuration once for word_dim, then again with the dictionary sizes.
    with_words = _vocabulary(read_model_config(config_path, len(chars), 1)).word_dim > 0
    words = read_dictionary(folder / WORD_DIC) if with_words else None
    options = read_model_config(config_path, len(chars), len(words) if words else 0)

    embedder_path, encoder_path = folder / TOKEN_EMBEDDER, folder / ENCODER
    embedder_state = torch_state_dict(embedder_path)
    # (before the vocabulary checks its ids: a row count that differs from the dictionary's
    # is named with the embedding it belongs to)
    _check_rows(embedder_path, embedder_state, "char_emb_layer.embedding.weight", folder / CHAR_DIC, chars)
    if words is not None:
        _check_rows(embedder_path, embedder_state, "word_emb_layer.embedding.weight", folder / WORD_DIC, words)
    vocab = CharVocabulary(chars, words, options.char_cnn.max_characters_per_token,
                           (folder / CHAR_DIC, folder / WORD_DIC))
    check_state_dict(embedder_path, embedder_state, expected_token_embedder(options))
    encoder_state = torch_state_dict(encoder_path)
    check_state_dict(encoder_path, encoder_state, expected_encoder(options))
    with init_skipped():   # (assign_weights overwrites every weight)
        bilm = BiLM(options, stateful=stateful, id_scheme=vocab)
    assign_weights(bilm, embedder_state, encoder_state)
    return bilm.eval()


def _check_rows(pkl: Path, state: Mapping[str, torch.Tensor], key: str, dic: Path,
                entries: Mapping[str, int]) -> None:
    """The embedding ``key`` must have one row per distinct dictionary token, and every id must
    be a row of it."""
    if not isinstance(state.get(key), torch.Tensor) or state[key].dim() != 2:
        return  # reported by check_state_dict (a scalar has no rows to count)
    rows = state[key].shape[0]
    if rows != len(entries):
        raise WeightFileError(f"{pkl}: '{key}' has {rows} rows but {dic} has {len(entries)} "
                              f"distinct entries (they must match)")
    token, value = max(entries.items(), key=lambda kv: kv[1])
    if value >= rows:
        raise WeightFileError(f"{dic}: id {value} of {token!r} is not below the {rows} rows of "
                              f"'{key}' in {pkl}")
