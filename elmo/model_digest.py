"""One digest of "the model that made these vectors" for the whole package.

:func:`model_digest` hashes what a model computes with: the options of each biLM in it, its
dictionaries (an ELMoForManyLangs model's ``char.dic`` / ``word.dic`` and characters per token),
any further settings the caller names (a task model's config, labels and vocabulary), and every
tensor of its ``state_dict``: name, shape, dtype and exact bytes. Two models share it only if
they embed (or tag) alike; a few weights changed, or the same weights under other options,
give another. Embed outputs and their segments, saved task models, analysis reports, the
neighbour index cache and spaCy's saved pipelines and Doc records all use it.

Records written before it keep the digest of their time; the ``legacy_*`` functions compute
those forms, only to recognise such a record as this model's (read, never written anew).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Collection, Optional

import torch

from .modules.bilm import BiLM
from .checksums import tensor_bytes

#: What the digest's hash starts with: another form (a later change) starts otherwise.
_FORM = b"elmo model digest 2\0"


def _part(h, data: bytes) -> None:
    """Feed ``data`` with its length first: no two sequences of parts feed the same bytes."""
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)


def model_digest(model: torch.nn.Module, settings: Optional[Any] = None) -> str:
    """The digest of ``model`` (a :class:`~elmo.modules.BiLM`, or a module holding one, as a
    task model does), a 32-character hex string: the options and dictionaries of each biLM in
    it, ``settings`` (anything JSON can write, key order ignored: what else defines the model,
    as a task model's config and labels), then each tensor of its ``state_dict`` in name order:
    its name, shape, dtype and every byte of its values (the same on every machine and rank,
    on any device)."""
    h = hashlib.blake2b(_FORM, digest_size=16)
    for module in model.modules():
        if isinstance(module, BiLM):
            _part(h, module.options.to_json().encode())
            scheme = module.id_scheme
            _part(h, b"" if scheme is None else scheme.fingerprint())
    _part(h, json.dumps(settings, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    for name, tensor in sorted(model.state_dict().items()):
        _part(h, f"{name}\0{tuple(tensor.shape)}\0{tensor.dtype}".encode())
        h.update(tensor_bytes(tensor))       # (its length follows from the shape and dtype)
    return h.hexdigest()


# ----------------------------------------------------------------------------- legacy forms
# Each reads a record that users already have on disk, written before this digest existed: an
# embed output or its segments (hours of vectors), a saved task model, a report's sections. Not
# recognised, they were refused as another model's, and only recomputing them went on. None is
# ever written again. (Caches keyed by the neighbour index's old fingerprint simply miss once.)

#: The stride of the sampled digest that embed recorded before it hashed every weight.
LEGACY_DIGEST_STRIDE = 97


def legacy_embed_digest(bilm: BiLM, stride: int = 1) -> str:
    """The ``model_digest`` that embed outputs and their segments, and saved task models
    (``weights_digest`` of their biLM), recorded before :func:`model_digest`: options, the id
    scheme's fingerprint, each tensor's name, shape and every ``stride``-th value (97 in the
    versions before that: :data:`LEGACY_DIGEST_STRIDE`)."""
    h = hashlib.blake2b(bilm.options.to_json().encode(), digest_size=16)
    if bilm.id_scheme is not None:
        h.update(bilm.id_scheme.fingerprint())
    for name, tensor in sorted(bilm.state_dict().items()):
        h.update(f"{name}{tuple(tensor.shape)}".encode())
        h.update(tensor_bytes(tensor, stride))
    return h.hexdigest()


def legacy_weights_digest(module: torch.nn.Module) -> str:
    """The ``weights_digest`` a spaCy pipeline saved before (``elmo_model.json``): each
    tensor's name, shape, dtype and bytes, without the options."""
    h = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(module.state_dict().items()):
        h.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        h.update(tensor_bytes(tensor))
    return h.hexdigest()


def legacy_analysis_fingerprint(bilm: BiLM) -> str:
    """The ``model_fingerprint`` an analysis report (``results.json``) recorded before: SHA-1
    of the options, a ManyLangs model's dictionaries as JSON and each tensor's name and bytes,
    cut to 16 characters."""
    h = hashlib.sha1(bilm.options.to_json().encode())
    if bilm.options.char_vocabulary is not None:
        scheme = bilm.id_scheme
        h.update(json.dumps([sorted(scheme.chars.items()),
                             None if scheme.words is None else sorted(scheme.words.items())],
                            ensure_ascii=False).encode())
    for name, tensor in sorted(bilm.state_dict().items()):
        h.update(name.encode())
        h.update(tensor_bytes(tensor))
    return h.hexdigest()[:16]


def _sampled_embed_digest(bilm: BiLM) -> str:
    """:func:`legacy_embed_digest` of every :data:`LEGACY_DIGEST_STRIDE`-th value."""
    return legacy_embed_digest(bilm, LEGACY_DIGEST_STRIDE)


#: The legacy forms, newest first, by the length of their hex string.
_LEGACY_FORMS = ((32, legacy_embed_digest), (32, _sampled_embed_digest), (16, legacy_analysis_fingerprint))


def recorded_digest(bilm: BiLM, recorded: Collection[str], digest: Optional[str] = None) -> Optional[str]:
    """This model's digest as ``recorded`` holds it: :func:`model_digest` (``digest``, where
    the caller has it), else the first legacy form (newest first) that ``recorded`` holds;
    None where it holds none of them (another model's). A legacy form is computed only where
    the new one is not recorded and a record has its length: a run on output of its own time
    hashes the model once."""
    digest = digest or model_digest(bilm)
    if digest in recorded:
        return digest
    lengths = {len(r) for r in recorded}
    for length, form in _LEGACY_FORMS:
        if length in lengths:
            old = form(bilm)
            if old in recorded:
                return old
    return None
