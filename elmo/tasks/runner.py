"""``elmo experiment``: baseline vs +ELMo on identical splits over several seeds.

The config (its format: :mod:`.experiment_config`) names the tasks and the variants to
compare; every variant of a task is trained once per seed on the same examples, and each
variant is compared with the baseline run of the same seed.

Output: ``results.json`` (the config, every run's record, the per-variant summary, what
each biLM is), ``results.md`` (the table, the learned layer weights), ``layer_weights.png``
and, when one task runs at several training sizes (entries with their own ``name``),
``training_sizes.png``. ``results.json`` is rewritten (atomically) after every run, and
``resume`` keeps the runs it already holds whose settings match and, for runs with ELMo,
whose biLM files (weights, options, vocabulary) have the SHA-256 they were run with.

This module trains and tests one run (:func:`run_one`) and drives the experiment (:func:`plan`,
:func:`run_experiment`, :func:`rewrite_reports`). The config is read by
:mod:`.experiment_config`, a run's model built by :mod:`.building`, trained and scored by
:mod:`.train_loop`, its fingerprint taken by :mod:`.fingerprints`, the runs that ``resume``
keeps chosen by :mod:`.resume_runs`, the biLMs loaded by :mod:`.bilms` and the runs summarised
over seeds by :mod:`.summary`.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from .batching import make_batch
from .bilm_checksums import BiLMChecksums
from .bilms import BiLMPool, bilm_brief, bilm_entry, resolve_bilm
from .building import build_model   # (looked up here by run_one: tests patch runner.build_model)
from .datasets import TaskData, load_task, splits_raw_text, text_limits
from .embeddings import ExtendedVocab, WordVocab, build_embeddings, glove_record
from .features import ElmoFeatures
from .fingerprints import checksums_of, data_digests, run_fingerprint
from .kinds import task_kind
from .report import write_reports
from .resume_runs import reusable_runs
from .experiment_config import (ExperimentConfig, ModelSettings, Variant, check_bilm_logins, check_variants_differ,
                                normalise_config)
from .files import FileDigest
from .summary import summarise
from .train_loop import FitConfig, fit, split_metrics
from .. import tokenize as tokenizer
from ..config import ConfigError
from ..io import atomic_write_text, no_empty_folder_on_failure
from ..output_checks import check_output_dir
from ..output_lock import output_lock
from ..strict_json import nonfinite_as_none
from ..runtime import cpu_model, machine_description, threads
from ..runtime import resolve_device

#: Characters per token when no biLM says otherwise (the char features of the baseline).
DEFAULT_MAX_CHARS = 50


# ----------------------------------------------------------------------------- one run
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
    vocab: Union[WordVocab, ExtendedVocab]
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
            log: Callable[[str], None], save_to: Optional[Path] = None, progress: bool = False) -> dict:
    """Train and test one (task, variant, seed); returns its record. With ``save_to`` the
    trained model (its best epoch) is saved there (:mod:`.saved`). ``progress``: bars on
    stderr over each epoch's batches, dev and the test sets (:func:`.train_loop.fit`)."""
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
                 length=task_kind(data.kind).batch_length, progress=progress)
    test_metrics = split_metrics(model, data, make, log, progress=progress)
    test = test_metrics.pop(data.metric)
    # further test sets named in the task's files, scored by the same model (a graded task's
    # with its other correlation and why one is undefined, as test)
    extras = {k: split_metrics(model, data, make, log, split=k, progress=progress)
              for k in data.splits if k not in ("train", "dev", "test")}
    extra = {k: m.pop(data.metric) for k, m in extras.items()}
    record = {
        "task": data.name, "metric": data.metric, "variant": variant.name, "seed": seed,
        "test": test, "dev": result["best_dev"], "best_epoch": result["best_epoch"],
        "epochs": result["epochs"], "seconds": time.time() - start,
        "cpu": cpu_model(),  # each run's own: a resumed experiment's runs may come from other machines
        "history": result["history"],
        "elmo": None if e is None else {
            "bilm": cfg.bilm_of(variant), **bilm_brief(cfg.bilm_of(variant)),
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
    if prep.spec.get("tokenize"):   # which elmo.tokenize split its texts (see fingerprints.run_content)
        record["tokenizer_revision"] = tokenizer.TOKENIZER_REVISION
    if save_to is not None:
        from .saved import save
        save(save_to, model, kind=data.kind, metric=data.metric, labels=data.labels,
             vocab=prep.vocab, settings=prep.settings.to_dict(),
             elmo=None if e is None else {**e.to_dict(), "bilm": cfg.bilm_of(variant)},
             max_chars=max_chars, layer_cache=cache is not None,
             tokenize=splits_raw_text(prep.spec), **text_limits(prep.spec),
             embeddings=glove_record(cfg.embeddings),
             record={"task": data.name, "variant": variant.name, "seed": seed,
                     "test": test, "dev": result["best_dev"], "extra_tests": extra,
                     "best_epoch": result["best_epoch"], "data": data.source})
        record["saved_model"] = str(save_to)
    return record


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
        lines.append(f"{data.name} ({data.metric}): {data.describe_sizes()}, {data.describe_labels()}")
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


class ResultsExistError(ValueError):
    """The results folder already holds results and neither resume nor overwrite was asked."""


def run_experiment(cfg: ExperimentConfig | dict, out: Optional[str | Path] = None, resume: bool = False,
                   command: Optional[str] = None,
                   log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
                   only_variants: Optional[Sequence[str]] = None, overwrite: bool = False,
                   save_models: bool = False, progress: bool = False) -> dict:
    """Run every (task, variant, seed) of a config (a dict is read by
    :func:`normalise_config`); write and return the results.

    ``only_variants`` runs just those variants now (the config, and so ``resume``, is unchanged):
    baselines can run while the biLM is still training, and a later ``resume`` adds the rest.
    An existing ``results.json`` is kept unless ``resume`` (keep its matching runs) or
    ``overwrite`` (start again) is given. ``save_models`` keeps every trained model in
    ``OUT/models/<task>/<variant>/seed-<seed>/`` (see :mod:`.saved`). ``progress`` draws bars
    on stderr while the biLM layer cache fills, over each epoch's batches and while dev and
    test are scored (``elmo experiment``: on a terminal, without --quiet)."""
    cfg = normalise_config(cfg)
    check_bilm_logins(cfg)      # (before the results folder is made)
    check_variants_differ(cfg)
    selected = selected_variants(cfg, only_variants)
    out = results_folder(cfg, out)
    results_path = out / "results.json"
    check_output_dir(out, "results folder")
    # a second experiment into this folder would write its own runs over the first's
    # results.json (and the same saved-model folders): refused at once, naming the holder.
    # (One that failed before its first run, a biLM or task file missing, left the folder empty.)
    with no_empty_folder_on_failure(out), output_lock(results_path, name=out):
        if results_path.exists() and not resume and not overwrite:
            raise ResultsExistError(f"{results_path} exists: --resume keeps its finished runs, "
                                    f"--overwrite starts again")
        return _run_locked(cfg, out, results_path, resume, command, log, selected, save_models, progress)


def results_folder(cfg: ExperimentConfig, out: Optional[str | Path] = None) -> Path:
    """Where :func:`run_experiment` writes: ``out``, else the config's ``out``, else
    ``experiments/results/<name>`` under the working folder."""
    return Path(out or cfg.out or Path("experiments") / "results" / cfg.name)


def _run_locked(cfg: ExperimentConfig, out: Path, results_path: Path, resume: bool,
                command: Optional[str], log: Callable[[str], None], selected: List[Variant],
                save_models: bool, progress: bool = False) -> dict:
    """:func:`run_experiment` once it holds the results folder's lock."""
    bilms = BiLMChecksums()
    done: List[dict] = []
    described: Dict[str, dict] = {}
    if resume and results_path.exists():
        # checked as experiment-table reads it: a truncated or hand-broken file was a bare
        # JSON message, a list or a run without its seed an AttributeError or KeyError traceback
        from .compare import check_summarisable, read_results
        old = read_results(results_path)
        check_summarisable(results_path, old["runs"])   # (the runs kept are summarised with the new ones)
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
        "bilms": {**described, **{s: bilm_entry(s, bilms) for s in sorted(specs)}},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "data": {}, "runs": list(done), "summary": [],
    }
    with threads(cfg.threads or None) as n_threads:
        results["machine"]["threads"] = n_threads
        _run_all(cfg, results, results_path, done, log, selected, bilms,
                 out / "models" if save_models else None, progress)
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


def write_results(path: Path, results: dict) -> None:
    """Write ``results`` to ``path`` (results.json) atomically, as strict JSON: a NaN or
    infinity (an undefined correlation, say) is written as null."""
    atomic_write_text(path, json.dumps(nonfinite_as_none(results), indent=1, allow_nan=False) + "\n")


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
        write_results(results_path, results)
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
             models: Optional[Path] = None, progress: bool = False) -> None:
    pool = BiLMPool(cfg.cache_layers, log, progress)
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
    digests = [data_digests(spec) for spec in cfg.tasks]
    fingerprints = [{v.name: run_fingerprint(cfg, spec, v, bilms, checksums_of(data)) for v in variants}
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
        log(f"{name}: {prep.data.describe_sizes()}, {prep.data.describe_labels()}")
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
                    record = run_one(prep, variant, seed, cfg, pool, log, save_to, progress)
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
                write_results(results_path, results)
    results["summary"] = summarise(results["runs"], cfg)
    results["bilm_cache_seconds"] = pool.cache_seconds
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_results(results_path, results)
