"""A trained task model on disk, loaded back, and run on new text.

A saved task model is a folder::

    model.safetensors   the task model's weights (without a frozen biLM's: see config.json)
    vocab.json          the word vocabulary (id order), labels.json the label set (id order;
                        empty for span_qa and for a graded kind, whose config.json records
                        the training targets' mean and std in ``target``, also saved with
                        the weights)
    config.json         kind, metric, model and ELMo settings, how text is tokenized (and
                        by which tokenizer revision: load() warns when this version's differs) and
                        how many tokens of a text are kept (max_tokens, max_tokens_b), and the
                        biLM reference: its spec (a bundled name, a path or a URL) with the
                        SHA-256 of its weight, option and dictionary files, checked (a copy in
                        other files, converted, passes when its weights as loaded are the same)

``elmo experiment --save-models`` writes one per task, variant and seed; :func:`load` (also
``TaskModel.load(folder)``) rebuilds it and ``model.predict(texts)`` labels new text::

    model = TaskModel.load("experiments/results/my-pos/models/my-pos/elmo/seed-1")
    model.predict([["The", "dog", "barked", "."], "A raw sentence, split like the training data."])
    # tagging: one tag list per text; classification: one label per text;
    # pair: texts are (text_a, text_b) pairs; regression: one number per text;
    # span_qa: (question, context) pairs, one {"text", "start", "end"} answer span each

Predictions are computed as at evaluation: the same batches, and a frozen biLM's layers
rounded to float16 as the experiment's layer cache stores them, so a saved model scores a
test set as ``results.json`` reports, but for float rounding: the biLM's float32 results
differ in the last bits with the batch a sentence runs in, and the experiment's cache batches
all of a task's sentences by length, so a value rounded to float16 can land one step apart
and a label on the edge can (rarely) flip.
"""
from __future__ import annotations

import functools
import json
import math
import warnings
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import torch

from .. import tokenize as tokenizer
from ..checks import require_count, require_path, require_switch, shown
from ..strict_json import nonfinite_as_none

FORMAT = "elmo-task-model"
VERSION = 1
#: A saved model's biLM weights key prefix (the frozen biLM is not stored, only referenced).
BILM_MODULE = "encoder.elmo.elmo._elmo_lstm"
#: The files of a saved model folder.
SAVED_FILES = ("config.json", "vocab.json", "labels.json", "model.safetensors")


class TaskModelError(ValueError):
    """A saved task model folder that cannot be loaded as saved (the message says why).

    A URL in the message is shown without its password (:func:`~elmo.redact.redact_url`): a
    biLM URL given (``bilm=``) or recorded by a model saved before logins were refused."""

    def __init__(self, message: object = "") -> None:
        from ..redact import redact_url
        super().__init__(redact_url(str(message)))


def bilm_reference(spec: str) -> dict:
    """What a saved model records of its biLM: the spec, the folder it came from, whether it
    is bundled, the checksums of its files and the digest of its weights as loaded (which a
    converted copy, in other files, shares: see :func:`_load_bilm`)."""
    from .bilm_checksums import bilm_files
    from .bilms import describe_bilm, resolve_bilm
    folder = resolve_bilm(spec)
    info = describe_bilm(spec)
    files = bilm_files(folder)
    return {"spec": spec, "path": str(folder.resolve()), "bundled": info["bundled"],
            "random_weights": info["random_weights"], "sha256": files,
            "weights_digest": _weights_digest(spec, tuple(sorted(files.items())))}


@functools.lru_cache(maxsize=8)
def _weights_digest(spec: str, files: tuple) -> str:
    """The digest of a biLM's weights as loaded, once per spec and files (an experiment saves
    a task model per variant and seed, and each loaded and hashed the whole biLM again); the
    files' checksums are in the key, so a biLM changed on disk is loaded anew."""
    from .bilms import load_bilm
    from ..model_digest import model_digest
    return model_digest(load_bilm(spec))


def save(folder: Union[str, Path], model, *, kind: str, metric: str, labels: Sequence[str],
         vocab, settings: dict, elmo: Optional[dict], max_chars: int, layer_cache: bool,
         tokenize: bool = False, record: Optional[dict] = None,
         max_tokens: Optional[int] = None, max_tokens_b: Optional[int] = None,
         embeddings: Optional[dict] = None) -> Path:
    """Write a trained task model into ``folder`` (replaced whole, through a temporary folder).

    ``elmo`` is the variant's ELMo settings (None for the baseline), with ``bilm`` the spec;
    ``layer_cache`` says the frozen biLM's layers were float16-cached at evaluation;
    ``max_tokens`` (``max_tokens_b``) is how many tokens of each text (second text) the
    training and test examples kept: predictions cut new texts so. ``embeddings`` is what
    :func:`~elmo.tasks.embeddings.glove_record` says of the static word vectors: a word
    outside ``vocab`` that this GloVe knows gets its vector at prediction."""
    from ..io import os_errors_naming
    from ..folder_swap import atomic_folder
    from ..native_layout import write_safetensors
    folder = Path(folder)
    frozen = elmo is not None and not elmo["finetune"]
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
             if not (frozen and k.startswith(BILM_MODULE + "."))}
    config = {
        "format": FORMAT, "version": VERSION, "kind": kind, "metric": metric,
        "model": settings, "vocab_size": len(vocab), "embedding_dim": int(model.encoder.words.embed.weight.shape[1]),
        "max_chars": max_chars, "tokenize": bool(tokenize),
        # (predict splits new texts with this version's tokenizer: load() warns under another)
        "tokenizer_revision": tokenizer.TOKENIZER_REVISION if tokenize else None,
        "max_tokens": max_tokens, "max_tokens_b": max_tokens_b, "embeddings": embeddings,
        "elmo": None if elmo is None else {
            **{k: elmo[k] for k in ("positions", "layers", "lambda", "finetune", "dropout",
                                    "do_layer_norm")},
            "bilm": bilm_reference(elmo["bilm"]),
            # (a model saved without it normalised over the whole batch: load() keeps that)
            "layer_norm_over": model.encoder.elmo.layer_norm_over,
            "bilm_weights_saved": not frozen,
            "layer_cache": "float16" if (frozen and layer_cache) else None},
        "trained": record or {},
    }
    from .kinds import task_kind
    if task_kind(kind).graded:     # (the model's own buffers: what its predictions unscale by)
        config["target"] = {"mean": float(model.target_mean), "std": float(model.target_std)}
    texts = {"vocab.json": json.dumps(vocab.itos, ensure_ascii=False) + "\n",
             "labels.json": json.dumps(list(labels), ensure_ascii=False) + "\n",
             # a run without dev has a NaN dev score
             "config.json": json.dumps(nonfinite_as_none(config), indent=1, allow_nan=False) + "\n"}
    with _writing_file_of(folder), atomic_folder(folder) as tmp:
        write_safetensors(state, tmp / "model.safetensors")
        for name, text in texts.items():
            with os_errors_naming(tmp / name):   # (a full disk met by write() names no file)
                (tmp / name).write_text(text, encoding="utf-8")
    return folder


@contextmanager
def _writing_file_of(folder: Path) -> Iterator[None]:
    """:func:`elmo.output_checks.writing` for a task model's files: an OSError of the block is one
    line naming the file of ``folder`` that failed (``atomic_folder`` gives its errors the file's
    final path), else ``folder``. A full disk said only "FOLDER: cannot write the task model"."""
    from ..output_checks import writing
    try:
        yield
    except OSError as e:
        named = e.filename if isinstance(e.filename, str) and Path(e.filename).is_relative_to(folder) else folder
        with writing(Path(named), "task model"):
            raise


def _load_bilm(ref: dict, override: Optional[str]):
    """The biLM a saved model was trained with, checked against its recorded checksums."""
    from .bilm_checksums import bilm_files
    from .bilms import load_bilm, resolve_bilm
    spec = shown = override or ref["spec"]
    # The files cannot tell a random: control from its trained model (a random one reads only
    # the options, and both record the same checksums): the folder of a random control passed
    # without the prefix gave the trained weights, and the reverse random ones, silently.
    trained_random = bool(ref.get("random_weights")) or str(ref["spec"]).startswith("random:")
    if override and override.startswith("random:") != trained_random:
        raise TaskModelError(
            f"biLM {shown!r}: this task model was trained with "
            + (f"random weights ({ref['spec']!r}), a control: pass 'random:' before the folder"
               if trained_random else f"the trained weights of {ref['spec']!r}: pass the folder "
                                      f"without 'random:'"))
    local = not override and not ref["bundled"] and "://" not in spec
    if local and not Path(ref["path"]).is_dir() and not spec.startswith("random:"):
        raise TaskModelError(f"the biLM {ref['path']} this task model was trained with is gone; "
                             f"pass bilm= (elmo predict --bilm) with its new place")
    if local:   # the folder recorded, not the spec: a relative one named another folder elsewhere
        spec = ("random:" if spec.startswith("random:") else "") + ref["path"]
    try:
        folder = resolve_bilm(spec)
    except (FileNotFoundError, ValueError) as e:
        raise TaskModelError(f"biLM {shown!r}: {e}") from None
    found = bilm_files(folder)
    if found == ref["sha256"]:
        return load_bilm(spec)
    # Other files may hold the same model: a copy converted to the other layout (elmo convert)
    # has other file names and bytes but the same weights, so the weights as loaded decide.
    differ = sorted(k for k in set(found) | set(ref["sha256"]) if found.get(k) != ref["sha256"].get(k))
    why = f"{', '.join(differ)} differ from the recorded SHA-256"
    recorded = ref.get("weights_digest") or _recorded_folder_digest(ref)
    if recorded is None:   # (saved before the digest was recorded, and its biLM is gone)
        raise TaskModelError(f"biLM {shown!r} ({folder}) cannot be checked against the one this task "
                             f"model was trained with: {why}, and the model records no digest of its "
                             f"weights to compare (save the task model again to record one)")
    from ..model_digest import recorded_digest
    from ..weight_values import WeightFileError
    try:
        bilm = load_bilm(spec)
    except (OSError, WeightFileError) as e:
        raise TaskModelError(f"biLM {shown!r} ({folder}) is not the one this task model was trained "
                             f"with ({why}) and does not load: {e}") from None
    # (a model saved before the digest took its present form records the form of its time)
    if recorded_digest(bilm, {recorded}) is None:
        raise TaskModelError(f"biLM {shown!r} ({folder}) is not the one this task model was trained "
                             f"with: its weights differ ({why})")
    return bilm


def _recorded_folder_digest(ref: dict) -> Optional[str]:
    """The weights digest of the biLM a saved model records, from the folder it names when that
    still holds the recorded files (a model saved before the digest was recorded); else None."""
    from .bilm_checksums import bilm_files
    from .bilms import RANDOM_PREFIX, load_bilm
    from ..model_digest import model_digest
    path = Path(ref["path"])
    if not path.is_dir() or bilm_files(path) != ref["sha256"]:
        return None
    prefix = RANDOM_PREFIX if ref.get("random_weights") or str(ref["spec"]).startswith(RANDOM_PREFIX) else ""
    return model_digest(load_bilm(prefix + str(path)))


def _read_json(path: Path):
    """A saved model's JSON file, or a :class:`TaskModelError` naming it and what is wrong
    (a file not UTF-8 gave the codec's message, without the line and the byte's offset)."""
    from ..text_files import read_json
    return read_json(path, TaskModelError, what="JSON", expected="a JSON file of the saved model",
                     hint="the saved model folder is damaged or incomplete: save it again")


def _models_below(folder: Path) -> str:
    """'; the saved models below it: ...' for a folder above saved models (an experiment's
    ``models/``, a task's or a variant's folder, given for its ``seed-<n>``), else ''."""
    if not folder.is_dir():
        return ""
    found = sorted(str(c.parent) for depth in (1, 2, 3)
                   for c in folder.glob("/".join(["*"] * depth) + "/config.json") if _is_task_config(c))
    if not found:
        return ""
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"; the saved models below it: {', '.join(found[:3])}{more}"


def _is_task_config(path: Path) -> bool:
    """Whether ``path`` is a saved task model's config.json (a biLM saved with
    save_pretrained has a config.json too, which is no task model)."""
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(cfg, dict) and cfg.get("format") == FORMAT


def _read_config(folder: Path) -> dict:
    """config.json, checked for the format, the version and the settings load() reads."""
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise TaskModelError(f"{folder}: not a saved task model (no config.json){_models_below(folder)}")
    cfg = _read_json(cfg_path)
    if not isinstance(cfg, dict) or cfg.get("format") != FORMAT:
        raise TaskModelError(f"{cfg_path}: not a {FORMAT} config")
    version = cfg.get("version")
    if version != VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
        raise TaskModelError(f"{cfg_path}: {FORMAT} version {version!r}, but this elmo reads "
                             f"version {VERSION}" + ("; upgrade elmo-pytorch" if newer else ""))
    needed = {"kind": str, "metric": str, "model": dict, "vocab_size": int, "embedding_dim": int,
              "max_chars": int, "tokenize": bool}
    for key, kind in needed.items():
        if not isinstance(cfg.get(key), kind):
            raise TaskModelError(f"{cfg_path}: {key!r} is missing or not a {kind.__name__}")
    for key in ("max_tokens", "max_tokens_b"):    # (absent in a model saved before: no cut)
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise TaskModelError(f"{cfg_path}: {key!r} must be null or a positive whole number, "
                                 f"got {value!r}")
    if not isinstance(cfg.get("embeddings"), (dict, type(None))):   # (absent before: no GloVe)
        raise TaskModelError(f"{cfg_path}: 'embeddings' must be null or what save() records of "
                             f"the word vectors")
    e = cfg.get("elmo")
    elmo_keys = ("positions", "layers", "lambda", "finetune", "dropout", "do_layer_norm", "bilm",
                 "bilm_weights_saved")
    if e is not None and not (isinstance(e, dict) and all(k in e for k in elmo_keys)
                              and isinstance(e["bilm"], dict)
                              and all(k in e["bilm"] for k in ("spec", "path", "bundled", "sha256"))):
        raise TaskModelError(f"{cfg_path}: 'elmo' must be null or the ELMo settings save() "
                             f"writes ({', '.join(elmo_keys)})")
    from .kinds import TASK_KINDS
    if cfg["kind"] not in TASK_KINDS:
        raise TaskModelError(f"{cfg_path}: unknown kind {cfg['kind']!r}; known: "
                             f"{', '.join(TASK_KINDS)}")
    return cfg


def _warn_other_tokenizer(cfg: dict, cfg_path: Path) -> None:
    """Warn (one line) when a model that tokenizes the texts it is given was trained on the
    tokens of another tokenizer revision (:data:`elmo.tokenize.TOKENIZER_REVISION`), or of one
    not recorded (saved before revisions were): predict splits some texts otherwise."""
    if not cfg["tokenize"]:
        return
    then, now = cfg.get("tokenizer_revision"), tokenizer.TOKENIZER_REVISION
    if then != now:
        which = "an unrecorded revision (saved before revisions were recorded)" if then is None \
            else f"revision {then}"
        warnings.warn(f"{cfg_path}: this model was trained on texts split by tokenizer {which}; "
                      f"predict splits texts with revision {now}, which splits some of them "
                      f"otherwise (its predictions there may be worse): train it again to match",
                      tokenizer.TokenizerRevisionWarning, stacklevel=3)


def _read_weights(path: Path, expected: Mapping[str, torch.Tensor], labels: Sequence[str], frozen: bool) -> dict:
    """model.safetensors (never unpickled, read by :func:`elmo.native_layout.read_safetensors`),
    checked against ``expected``, the ``state_dict`` of the model config.json builds: each of
    its tensors there (a ``frozen`` biLM's left out: it is not saved with the model), of its
    shape, of floating values where its are and finite, and no other tensor. Each way it is
    not is one TaskModelError naming the file, before any weight is copied."""
    from ..native_layout import read_safetensors
    from ..weight_values import WeightFileError, check_finite
    if not path.exists():
        raise TaskModelError(f"{path}: missing; the saved model folder is incomplete: save it "
                             f"again")
    try:
        state, _ = read_safetensors(path, what="task model")
    except WeightFileError as e:
        raise TaskModelError(str(e)) from None
    try:
        for name, tensor in state.items():
            check_finite(tensor, f"{path}: tensor '{name}'")
    except WeightFileError as e:
        raise TaskModelError(str(e)) from None
    for name, tensor in state.items():    # load_state_dict's size error is a page of text
        if name in expected and tensor.shape != expected[name].shape:
            raise TaskModelError(f"{path}: tensor '{name}' has shape {tuple(tensor.shape)}, "
                                 f"config.json and labels.json ({len(labels)} labels) make it "
                                 f"{tuple(expected[name].shape)}")
        if name in expected and tensor.is_floating_point() != expected[name].is_floating_point():
            # (load_state_dict converts: an int64 or bool copy of a weight loaded, rounded)
            raise TaskModelError(f"{path}: tensor '{name}' holds {str(tensor.dtype).replace('torch.', '')} "
                                 f"values, the model's are {str(expected[name].dtype).replace('torch.', '')}")
    frozen_part = [k for k in state if frozen and k.startswith(BILM_MODULE + ".")]
    if frozen_part:   # (they replaced the weights of the biLM checked against its record)
        more = f" and {len(frozen_part) - 1} more" if len(frozen_part) > 1 else ""
        raise TaskModelError(f"{path}: holds biLM weights ('{frozen_part[0]}'{more}), but config.json says "
                             f"the biLM was frozen, its weights not saved with the model")
    missing = [k for k in expected if k not in state and not (frozen and k.startswith(BILM_MODULE + "."))]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        raise TaskModelError(f"{path}: does not fit config.json "
                             f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    return state


def load(folder: Union[str, Path], bilm: Optional[str] = None, device=None,
         glove: Union[str, bool, None] = None):
    """The task model saved in ``folder``, in eval mode, ready for ``predict(texts)``.

    ``bilm`` points at the biLM when it has moved (its files must still match), ``glove`` at
    the GloVe file the model was built with (its words and vectors must match); ``glove=False``
    looks no new word up (they get ``<unk>``, as in models saved before GloVe was recorded). A folder
    with a file missing, damaged or not fitting the others is a :class:`TaskModelError`
    naming the file; a ``device`` this machine lacks, a ValueError naming it."""
    from .embeddings import CASED_LOOKUP, WordVocab
    from .features import LAYER_NORM_OVER, ElmoFeatures
    from .experiment_config import ModelSettings
    from .building import build_model
    folder = require_path("folder", folder)  # (None was pathlib's TypeError, naming no argument)
    if glove is True:   # (Path(True) failed deep in the GloVe reader, after the biLM had loaded)
        raise TypeError("glove must be the path of the GloVe file the model was built with, "
                        "None for the one it records, or False to look no new word up; got True")
    if device is not None:
        # named here, as the rest of the API names it (model.to() raised torch's AssertionError
        # or RuntimeError, after the whole model and its biLM had loaded); plain "cuda" is
        # torch's current CUDA device, as module.to("cuda") takes it
        from ..runtime import resolve_device
        device = resolve_device(device, local_rank=None, what="device")
    cfg = _read_config(folder)
    cfg_path = folder / "config.json"
    _warn_other_tokenizer(cfg, cfg_path)
    itos = _read_json(folder / "vocab.json")
    labels = _read_json(folder / "labels.json")
    if not isinstance(itos, list) or not all(isinstance(w, str) for w in itos):
        raise TaskModelError(f"{folder / 'vocab.json'}: not a vocabulary written by save()")
    emb_rec = cfg.get("embeddings")
    # a model built from a cased GloVe file looks words up as written first (see embeddings)
    vocab = WordVocab(itos[2:], cased=isinstance(emb_rec, dict) and emb_rec.get("lookup") == CASED_LOOKUP)
    if vocab.itos != itos or len(itos) != cfg["vocab_size"]:
        raise TaskModelError(f"{folder / 'vocab.json'}: not the vocabulary of config.json "
                             f"({len(itos)} words, config.json says {cfg['vocab_size']})")
    from .kinds import task_kind
    kind = task_kind(cfg["kind"])
    if not isinstance(labels, list) or bool(labels) != kind.classes \
            or not all(isinstance(x, str) for x in labels) or len(set(labels)) != len(labels):
        raise TaskModelError(f"{folder / 'labels.json'}: not "
                             + (f"[], a {cfg['kind']} model's (it has no classes)" if not kind.classes else
                                "a list of distinct label strings"))
    e = cfg["elmo"]
    elmo_features, lam = None, 0.0
    if e is None and bilm is not None:   # (it was ignored without a word)
        raise TaskModelError(f"{cfg_path}: a model without ELMo (the baseline) uses no biLM; "
                             f"leave out the biLM given ({bilm})")
    if e is not None:
        # the settings checked as an experiment's elmo block is (a hand-edited "dropout": "x"
        # or "finetune": "yes" was a TypeError traceback from torch, "lambda": "x" float()'s
        # bare message), before the biLM is loaded
        from .experiment_config import ElmoSettings
        ElmoSettings.from_dict({k: e[k] for k in ("positions", "layers", "lambda", "finetune",
                                                  "dropout", "do_layer_norm")}, f"{cfg_path}: ")
        if e["finetune"] is not e["bilm_weights_saved"]:    # (saved together: see save())
            raise TaskModelError(f"{cfg_path}: elmo: finetune {json.dumps(e['finetune'])} with "
                                 f"bilm_weights_saved {json.dumps(e['bilm_weights_saved'])}: a fine-tuned "
                                 f"biLM's weights are saved with the model, a frozen one's are not")
        bilm_model = _load_bilm(e["bilm"], bilm)
        over = e.get("layer_norm_over", "batch")
        if over not in LAYER_NORM_OVER:
            raise TaskModelError(f"{cfg_path}: 'layer_norm_over' must be one of "
                                 f"{', '.join(LAYER_NORM_OVER)}, got {over!r}")
        elmo_features = ElmoFeatures(bilm_model, e["positions"], e["layers"], e["dropout"],
                                     e["finetune"], e["do_layer_norm"], layer_norm_over=over)
        lam = float(e["lambda"])

    shape = SimpleNamespace(kind=cfg["kind"], labels=labels)     # what build_model reads
    emb = torch.zeros(cfg["vocab_size"], cfg["embedding_dim"])   # overwritten by the weights
    model = build_model(shape, emb, ModelSettings.from_dict(cfg["model"], f"{cfg_path}: "),
                        elmo_features, lam)
    weights = folder / "model.safetensors"
    state = _read_weights(weights, model.state_dict(), labels, e is not None and not e["bilm_weights_saved"])
    if e is not None and e["bilm_weights_saved"]:
        # a fine-tuned biLM is read in the dtype it was saved in (float32 for one fine-tuned from
        # a bfloat16 biLM), not rounded to the dtype of the biLM it started from
        saved = next((t.dtype for k, t in state.items() if k.startswith(BILM_MODULE + ".")
                      and t.is_floating_point()), None)
        if saved is not None:
            bilm_model.to(saved)
    model.load_state_dict(state, strict=False)   # (checked: only a frozen biLM's are missing)
    if kind.graded:
        _check_target_record(cfg, cfg_path, weights, model)
    if device is not None:
        model.to(device)
    model.eval()
    model.saved = SavedInfo(folder, cfg, vocab, labels, _load_glove(cfg, cfg_path, glove))
    return model


def _valid_scale(mean, std) -> bool:
    """Whether (mean, std) is a target scale training can set: finite numbers, std > 0."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (mean, std))
    return numbers and math.isfinite(mean) and math.isfinite(std) and std > 0


def _check_target_record(cfg: dict, cfg_path: Path, weights: Path, model) -> None:
    """A graded model's config.json ``target`` is the mean and std saved with its weights
    (the ones its predictions are unscaled by): an edited one would be a silent lie. A scale
    that training cannot set (not finite, std 0 or below) is a damaged file, said as such: it
    read as files not belonging together (NaN != NaN), or loaded when both said the same."""
    rec = cfg.get("target")
    saved = {"mean": float(model.target_mean), "std": float(model.target_std)}
    if not _valid_scale(saved["mean"], saved["std"]):
        raise TaskModelError(f"{weights}: the saved target scale (mean {saved['mean']}, std "
                             f"{saved['std']}) is not a finite mean and a positive std, as "
                             f"training sets it: the file is damaged; save the model again")
    if not (isinstance(rec, dict) and _valid_scale(rec.get("mean"), rec.get("std"))):
        raise TaskModelError(f"{cfg_path}: 'target' is {rec!r}, not a finite mean and a positive "
                             f"std ({{\"mean\": ..., \"std\": ...}}, as saving writes them): the "
                             f"file is damaged or was edited; save the model again")
    if rec != saved:
        raise TaskModelError(f"{cfg_path}: 'target' is {rec!r}, but the weights hold the "
                             f"training targets' mean and std {saved}: the folder's files do "
                             f"not belong together")


#: How to use a saved model without its GloVe, said where the GloVe cannot be read.
_NO_GLOVE = ("; or glove=False (elmo predict --no-glove) to leave the words outside the model's "
             "vocabulary <unk>, as models saved before the GloVe was recorded do")


def _load_glove(cfg: dict, cfg_path: Path, override: Union[str, Literal[False], None]):
    """(word -> row, (V, E) vectors) of the GloVe a saved model was built with, checked
    against its recorded digest; None for a model with random vectors, or saved before the
    GloVe was recorded (its words outside the vocabulary stay ``<unk>``, as they were)."""
    from .embeddings import glove_digest, load_glove
    if override is False:     # (asked for: words outside the vocabulary stay <unk>)
        return None
    rec = cfg.get("embeddings")
    if not isinstance(rec, dict) or not rec.get("digest"):
        if override is not None:
            raise TaskModelError(f"{cfg_path}: this model records no GloVe to look new words up "
                                 f"in; leave out the GloVe given ({override})")
        return None
    shown = override or rec.get("glove") or "glove-50d"
    if override is None and rec.get("glove") is not None and not Path(rec["path"]).exists():
        raise TaskModelError(f"the GloVe file {rec['path']} this task model was built with is gone; "
                             f"pass glove= (elmo predict --glove) with its new place{_NO_GLOVE}")
    try:
        words, vectors = load_glove(override or (rec["path"] if rec.get("glove") is not None else None))
    except (OSError, ValueError, ImportError) as e:
        raise TaskModelError(f"GloVe {shown!r}: {e}{_NO_GLOVE}") from None
    if vectors.shape[1] != cfg["embedding_dim"] or glove_digest(words, vectors) != rec["digest"]:
        raise TaskModelError(f"GloVe {shown!r} is not the one this task model was built with "
                             f"(its words or vectors differ from the recorded digest)")
    return {w: i for i, w in enumerate(words)}, vectors


class SavedInfo:
    """What ``predict`` needs besides the weights: vocabulary, labels and settings."""

    def __init__(self, folder: Path, config: dict, vocab, labels: List[str], glove=None):
        self.folder, self.config, self.vocab, self.labels = folder, config, vocab, labels
        self.glove = glove      # (word -> row, vectors) of its GloVe, or None
        self.kind = config["kind"]
        e = config["elmo"]
        self.cached = bool(e and e.get("layer_cache"))
        self.max_tokens = config.get("max_tokens")
        self.max_tokens_b = config.get("max_tokens_b")

    def read(self, example) -> Tuple[int, Optional[int]]:
        """How many tokens of ``example``'s text (and second text) the model reads."""
        cut = self.cut(example)
        return len(cut.tokens), None if cut.tokens_b is None else len(cut.tokens_b)

    def vocab_for(self, examples: Sequence):
        """The vocabulary to batch ``examples`` with: the saved one, and (a model built with
        GloVe) the words of the examples outside it that GloVe knows, with their vectors."""
        if self.glove is None:
            return self.vocab
        from .embeddings import ExtendedVocab, lookup_key
        index, vectors = self.glove
        cased = self.vocab.cased
        # (a cased vocabulary's word as written goes first: one it holds needs nothing new)
        words = sorted({lookup_key(t, index, cased) for ex in examples
                        for text in (ex.tokens, ex.tokens_b or []) for t in text
                        if not (cased and t in self.vocab.stoi)} - set(self.vocab.stoi))
        new = [w for w in words if w in index]
        return ExtendedVocab(self.vocab, new, torch.from_numpy(vectors[[index[w] for w in new]]))

    def cut(self, example):
        """``example`` with its texts cut to the tokens the training examples kept."""
        from .datasets import Example
        a, b, label = example.tokens, example.tokens_b, example.label
        if self.max_tokens:
            a = a[:self.max_tokens]
            if isinstance(label, list):     # a tag per token (it crashed building the batch)
                label = label[:self.max_tokens]
        if b is not None and self.max_tokens_b:
            b = b[:self.max_tokens_b]
        return Example(a, label, b, example.source_b)


def _tokens(text, tokenize: bool, kind, where: str) -> List[str]:
    """The tokens of one text (``where``: which text, for an error: "text 3")."""
    if isinstance(text, str):
        if tokenize and not kind.token_labels:
            from ..tokenize import tokenize as split
            return split(text)
        return text.split()
    if not isinstance(text, (list, tuple)):
        raise TypeError(f"{where}: a text must be a string or a list of token strings, got "
                        f"{type(text).__name__}: {shown(text)}")
    # the token by its place: the whole text's repr (a 10,000-token one) was the message
    bad = next((j for j, token in enumerate(text) if not isinstance(token, str)), None)
    if bad is not None:
        raise TypeError(f"{where}, token {bad}: tokens must be strings, got "
                        f"{type(text[bad]).__name__}: {shown(text[bad])}")
    return list(text)


def to_examples(texts: Sequence, kind: str, tokenize: bool = False) -> list:
    """Texts (strings or token lists; pairs for a pair model) as unlabelled examples."""
    from ..chars import refuse_unordered
    from .kinds import task_kind
    spec = task_kind(kind)
    if isinstance(texts, (str, bytes)) or not hasattr(texts, "__iter__"):
        # a string's characters would each be labelled as a text
        raise TypeError(f"texts must be a list of texts, got {type(texts).__name__}; for one "
                        f"text pass [text]")
    # the labels come back in the texts' order: a set's was its hash order, a dict's its keys
    refuse_unordered(texts, "predict", "a list of texts")
    out = []
    for i, t in enumerate(texts):
        if spec.pair:
            if not (isinstance(t, (list, tuple)) and len(t) == 2):
                raise TypeError(f"a pair model takes (text_a, text_b) pairs, got {shown(t)}; for one "
                                f"pair pass [(text_a, text_b)]")
            if spec.span_answers and isinstance(t[1], str):   # the answer is read back from it
                from .datasets import SourceText
                tokens_b, source_b = SourceText.split(t[1], tokenize)
                out.append(replace(spec.unlabelled(_tokens(t[0], tokenize, spec, f"text {i}, text_a"),
                                                   tokens_b), source_b=source_b))
            else:
                out.append(spec.unlabelled(_tokens(t[0], tokenize, spec, f"text {i}, text_a"),
                                           _tokens(t[1], tokenize, spec, f"text {i}, text_b")))
        else:
            out.append(spec.unlabelled(_tokens(t, tokenize, spec, f"text {i}")))
    return out


def predict_examples(model, examples: Sequence, batch_size: int = 64, progress: bool = False,
                     bar=None) -> list:
    """Label ids -> labels for examples, batched as evaluation batches them (see module doc).
    ``bar``: a tqdm bar to advance a step a batch instead of drawing one of its own (``elmo
    predict`` labels a file in parts, under one bar)."""
    batch_size = require_count("batch_size", batch_size)
    progress = require_switch("progress", progress)  # ("no" is true to Python: it drew a bar)
    from tqdm import tqdm
    from .batching import make_batch
    from .kinds import located_answer, task_kind
    from .layer_cache import LayerCache
    info: SavedInfo = model.saved
    spec = task_kind(info.kind)
    label_index = {label: i for i, label in enumerate(info.labels)}
    device = next(model.parameters()).device
    bilm = model.encoder.elmo.elmo.bilm if model.encoder.elmo is not None else None
    model.eval()
    out = []
    starts = range(0, len(examples), batch_size)
    for start in tqdm(starts, disable=not progress or bar is not None, unit="batch", desc="predict"):
        # texts cut as the training and test examples were (max_tokens): a longer text was
        # read whole, and labelled otherwise than evaluation labelled the same test example
        chunk = [info.cut(ex) for ex in examples[start:start + batch_size]]
        # a fresh cache per batch: the float16 rounding of evaluation, bounded memory
        cache = None
        if info.cached:
            assert bilm is not None     # only a model with ELMo caches its biLM's layers
            cache = LayerCache(bilm)
        batch = make_batch(chunk, info.kind, info.vocab_for(chunk), label_index,
                           info.config["max_chars"], cache).to(device)
        decoded = [spec.decode(p, info.labels) for p in model.predict_batch(batch)]
        if spec.span_answers:     # the answer's text as its context wrote it, where known
            decoded = [located_answer(ex, p) for ex, p in zip(chunk, decoded)]
        if spec.token_labels:   # a tag per input token: None for those past the cut
            decoded = [tags + [None] * (len(ex.tokens) - len(tags))
                       for tags, ex in zip(decoded, examples[start:start + batch_size])]
        out += decoded
        if bar is not None:
            bar.update(1)
    return out


def predict(model, texts: Sequence, batch_size: int = 64, progress: bool = False) -> list:
    """Tags (one list per text) or labels (one per text) for new texts; a tagger's tokens past
    ``max_tokens``, which the model does not read, get None."""
    if getattr(model, "saved", None) is None:
        raise TaskModelError("predict(texts) needs a model from TaskModel.load(folder); a model "
                             "being trained takes batches")
    info: SavedInfo = model.saved
    return predict_examples(model, to_examples(texts, info.kind, info.config["tokenize"]),
                            batch_size, progress)
