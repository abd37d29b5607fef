"""What ``elmo experiment --resume`` keeps of an earlier ``results.json``
(:func:`reusable_runs`): the runs whose fingerprint (:mod:`.fingerprints`) this config still
gives, and, for runs with ELMo, whose biLM files have the SHA-256 they were run with; and the
log lines on the runs it drops (a changed or unrecorded biLM, a seed no longer run, a layer
norm that took its statistics over each batch) or keeps unchecked (a biLM not there now).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .bilm_checksums import BiLMChecksums, what_counts
from .experiment_config import ExperimentConfig
from .fingerprints import content_digest, run_content, run_fingerprint


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
            content = run_content(cfg, spec, v)
            del content["layer_norm_over"]
            if run["fingerprint"] in {content_digest(content), content_digest(content, run.get("bilm_sha256"))}:
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
            content = run_content(cfg, spec, v)
            settings_match = (same and "fingerprint" not in run) or run.get("fingerprint") in {
                content_digest(content), content_digest(content, run.get("bilm_sha256"))}
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
