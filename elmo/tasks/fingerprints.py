"""Run fingerprints: what decides one run's result besides its seed, hashed.

``elmo experiment --resume`` keeps an earlier run whose fingerprint this config gives
(:func:`run_fingerprint`): the task entry, the variant and the shared settings, the SHA-256
of the task's own files (:func:`data_digests`) and of a GloVe file of your own, and for a
variant with ELMo its biLM's SHA-256 (:mod:`.bilm_checksums`).
"""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Dict, Optional

from .bilm_checksums import BiLMChecksums
from .experiment_config import ExperimentConfig, Variant
from .files import FileDigest, file_digest
from .kinds import task_kind
from .. import tokenize as tokenizer


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
    content = run_content(cfg, spec, variant, data)
    if variant.elmo is None:
        return content_digest(content)     # unchanged since biLMs are counted: old baselines still match
    sha = (bilms or BiLMChecksums())(cfg.bilm_of(variant))
    return None if sha is None else content_digest(content, sha)


def run_content(cfg: ExperimentConfig, spec: dict, variant: Variant,
                 data: Optional[Dict[str, Optional[str]]] = None) -> dict:
    """The settings and data checksums (``data``, else hashed now) a run's fingerprint hashes
    (all but the biLM)."""
    recorded = cfg.recorded()             # the settings as written: earlier runs keep matching
    common = {k: v for k, v in recorded.items() if k not in _NOT_RESULT_KEYS}
    written = next(v for v in recorded["variants"] if v["name"] == variant.name)
    content = {"task": spec, "variant": written, "common": common}
    if variant.elmo is not None and variant.elmo.do_layer_norm:
        # its layer norm's statistics became each sentence's own (they were the batch's):
        # runs computed the old way are not reused (see resume_runs._batch_layer_norm_run)
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


def content_digest(content: dict, bilm_sha256: Optional[str] = None) -> str:
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
    return checksums_of(data_digests(spec))


def data_digests(spec: dict) -> Dict[str, Optional[FileDigest]]:
    """split -> SHA-256 and size (one reading) of the user-supplied files a task spec reads
    (None when missing; :func:`_data_paths`)."""
    return {k: file_digest(p) if p.is_file() else None for k, p in sorted(_data_paths(spec).items())}


def checksums_of(digests: Dict[str, Optional[FileDigest]]) -> Dict[str, Optional[str]]:
    """split -> SHA-256 of :func:`data_digests`: what a run's fingerprint counts."""
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
