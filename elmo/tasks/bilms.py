"""The biLMs of an experiment: a spec resolved to its folder, loaded (``random:SPEC``: SPEC's
architecture with fixed random weights), described for the records, and pooled
(:class:`BiLMPool`: each frozen biLM loaded once, with its layer cache, for all runs).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import torch

from .bilm_checksums import BiLMChecksums, what_counts
from .experiment_config import ExperimentConfig, Variant
from .features import dictionary_bilm_problem
from .layer_cache import LayerCache
from ..config import ConfigError


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


def bilm_brief(spec: str) -> dict:
    """The part of :func:`describe_bilm` that every run record repeats."""
    info = describe_bilm(spec)
    return {"bilm_path": info["path"], "domain_adapted": info["domain_adapted"],
            "adapted_on": info["adapted_on"]}


def bilm_entry(spec: str, bilms: BiLMChecksums) -> dict:
    """What ``results.json``'s ``bilms`` block says of a biLM: :func:`describe_bilm` and the
    SHA-256 that identifies its files (:mod:`.bilm_checksums`), with each file's."""
    return {**describe_bilm(spec), "sha256": bilms(spec), "sha256_of": what_counts(spec),
            "files_sha256": bilms.files(spec)}


class BiLMPool:
    """Loaded biLMs and their layer caches, shared by all runs of an experiment. ``progress``:
    a bar on stderr while a cache fills (see :meth:`LayerCache.fill`)."""

    def __init__(self, cache_layers: bool, log: Callable[[str], None], progress: bool = False):
        self.cache_layers = cache_layers
        self.log = log
        self.progress = progress
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
        cache.fill(sentences, self.progress)
        spent = time.time() - start
        self.cache_seconds[spec] = self.cache_seconds.get(spec, 0.0) + spent
        if len(cache) > before:
            self.log(f"biLM layers cached for {len(cache) - before} sentences in {spent:.1f} s "
                     f"({cache.nbytes() / 2**20:.0f} MiB in all)")
        return cache
