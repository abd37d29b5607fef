"""One experiment's results under two biLMs, side by side (e.g. the default model's version 1
and version 3): ``python experiments/compare_results.py OLD/results.json NEW/results.json
--names v1 v3``.

Per task and variant: the test metric's mean ± std over seeds (n seeds) under each, and the
change of the mean; per ELMo variant: its gain over the baseline of its own results (paired
by seed, as ``results.md`` computes it) under each, and the change of the gain. Every row is
in its task's own metric; tasks are never averaged. Each side's rows are recomputed from its
runs by :func:`~elmo.tasks.summary.summarise`, the function that writes ``results.md``. A task
that the two results did not run alike (split sizes, settings, word vectors, files) is flagged
(:func:`setup_differences`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .report import METRIC_NAMES, bilm_sha256_text, domain_adapted_text, pm
from ..checks import is_number
from ..text_files import read_json
from ..redact import redact_url


#: How :func:`comparison_markdown` begins (``compare_results.py -o`` replaces only such a file).
COMPARISON_HEADER = "# `"


class CompareError(ValueError):
    """Two results files that cannot be compared (the message names the file or task)."""


def read_results(path: str | Path, need: Sequence[str] = ("runs",)) -> dict:
    """A ``results.json`` (or the folder holding one), read; errors name the file, also when
    one of the keys ``need`` is missing (a tabled or rewritten report needs ``config`` too)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    results = read_json(path, CompareError, what="a results.json", expected="an experiment's results.json")
    missing = [key for key in need if not isinstance(results, dict) or key not in results]
    if missing:
        raise CompareError(f"{path}: not the results.json of an experiment (it has no "
                           f"{' or '.join(map(repr, missing))})")
    config = results.get("config")
    if "config" in need and not (isinstance(config, dict) and isinstance(config.get("name"), str)):
        # the tables and reports start from the experiment's name (a KeyError otherwise)
        raise CompareError(f"{path}: not the results.json of an experiment (its 'config' has no 'name')")
    if not isinstance(results.get("bilms", {}), dict):   # (--resume and reports read its items)
        raise CompareError(f"{path}: its bilms is {json.dumps(results['bilms'])[:80]}, not an object")
    if "runs" in need:
        _check_runs(path, results["runs"])
    return results


def _score(value: Any) -> bool:
    """A score as results.json holds it: a finite number, or None (strict JSON's NaN)."""
    return value is None or (is_number(value) and math.isfinite(value))


def _scores(value: Any) -> bool:
    return isinstance(value, dict) and all(_score(v) for v in value.values())


#: What each key of a run must hold where runs are told apart (:func:`read_results`: every
#: reader), and where they are summarised too (:func:`check_summarisable`), and in words.
_RUN_KEYS = {
    "task": (lambda v: isinstance(v, str), "a string"),
    "variant": (lambda v: isinstance(v, str), "a string"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "metric": (lambda v: v is None or isinstance(v, str), "a string"),   # (the summary needs one)
}
_SUMMARY_KEYS = {
    "metric": (lambda v: isinstance(v, str), "a string"),
    "dev": (_score, "a number or null"),
    "seconds": (lambda v: _score(v) and v is not None, "a number"),
    "elmo": (lambda v: v is None or v is False or isinstance(v, dict), "an object or null"),
    "other_metrics": (lambda v: v is None or _scores(v), "an object of numbers"),
    "extra_tests": (lambda v: v is None or _scores(v), "an object of numbers"),
    "extra_tests_other_metrics": (lambda v: v is None or isinstance(v, dict) and all(map(_scores, v.values())),
                                  "an object of objects of numbers"),
}


def _shape_problem(run: dict, keys: Dict[str, Any]) -> Optional[str]:
    """Why ``run`` does not hold what ``keys`` ask of it, or None."""
    for key, (fits, kind) in keys.items():
        if not fits(run.get(key)):
            return f"its {key} is {json.dumps(run.get(key))[:80]}, not {kind}"
    return None


def _not_a_run(path: Path, i: int, run: dict, problem: str) -> CompareError:
    return CompareError(f"{path}: run {i} ({json.dumps(run['task'])}, {json.dumps(run['variant'])}, seed "
                        f"{json.dumps(run['seed'])}) is not a run as elmo experiment writes it: {problem}; "
                        f"correct or remove that run (--resume trains a removed run again)")


def check_summarisable(path: str | Path, runs: Sequence[dict]) -> None:
    """Raise :class:`CompareError` naming ``path`` and the run unless each of ``runs`` (checked
    by :func:`read_results`) holds what the summary reads of it (:data:`_SUMMARY_KEYS`): a
    number as a string, a list for the metric or a key missing ended in a TypeError, KeyError
    or IndexError deep in the summary of --resume, experiment-report and experiment-table."""
    for i, run in enumerate(runs):
        problem = "it has no elmo (null for a run without ELMo)" if "elmo" not in run else \
            _shape_problem(run, _SUMMARY_KEYS)
        if problem is not None:
            raise _not_a_run(Path(path), i, run, problem)


def _check_runs(path: Path, runs: Any) -> None:
    """Each run must name its task, variant and seed, hold a finite test score (or None with
    the reason it is ``undefined``, a graded run's) and be the only run of its (task, variant,
    seed), and a task's runs must share one metric: the summary is computed from them (a NaN
    or a string score crashed deep in the statistics)."""
    if not isinstance(runs, list):
        raise CompareError(f"{path}: 'runs' must be a list, got {type(runs).__name__}")
    first: Dict[Tuple[Any, Any, Any], int] = {}
    metric_of: Dict[str, Tuple[int, Any]] = {}          # task -> (first run, its metric)
    for i, run in enumerate(runs):
        if not isinstance(run, dict) or any(key not in run for key in ("task", "variant", "seed", "test")):
            raise CompareError(f"{path}: run {i} is not a run (it needs task, variant, seed and test)")
        problem = _shape_problem(run, _RUN_KEYS)
        if problem is not None:
            raise _not_a_run(path, i, run, problem)
        test = run["test"]
        # (a graded run whose test correlation is undefined holds None, strict JSON's NaN, and
        # says why: the experiment could not be resumed, tabled or reported again)
        undefined = test is None and isinstance(run.get("undefined"), str)
        if not undefined and (isinstance(test, bool) or not isinstance(test, (int, float))
                              or not math.isfinite(test)):
            raise CompareError(f"{path}: run {i} ({run['task']}, {run['variant']}, seed {run['seed']}) "
                               f"has the test score {test!r}; a score must be a finite number")
        # a seed run twice (results merged by hand) was counted twice in the test mean and
        # once, the later run, in the gain, so the row's seeds and its gain disagreed
        key = (run["task"], run["variant"], json.dumps(run["seed"]))
        if key in first:
            raise CompareError(f"{path}: run {i} repeats run {first[key]} ({run['task']}, {run['variant']}, "
                               f"seed {run['seed']}); each seed of a task and variant is run once, so "
                               f"keep one of them")
        first[key] = i
        # a task's runs in two metrics (results merged by hand) were averaged into one mean,
        # token accuracy with span F1, and the gain compared one metric with the other
        scored = metric_of.setdefault(json.dumps(run["task"]), (i, run.get("metric")))
        if scored[1] != run.get("metric"):
            raise CompareError(f"{path}: run {i} ({run['task']}, {run['variant']}, seed {run['seed']}) "
                               f"is scored in {run.get('metric')!r} but run {scored[0]} of task "
                               f"{run['task']!r} in {scored[1]!r}; a task's runs are averaged and "
                               f"compared in one metric, so keep the runs of one")


def recomputed(results: dict, path: str | Path) -> dict:
    """``results`` with its ``summary`` recomputed from its runs under its own recorded config
    (:func:`~elmo.tasks.summary.summarise`, as ``experiment-report`` does); a config this
    version cannot read is an error naming ``path``.

    The stored summary is what the writing version computed: a results.json of an older
    version held gains without their seed pairing or intervals, a hand-merged one a summary
    of other runs, and one written without a summary gave no row at all."""
    from ..config import ConfigError
    from .experiment_config import normalise_config
    from .summary import summarise
    try:
        cfg = normalise_config(results["config"])
    except ConfigError as e:
        raise CompareError(f"{path}: its recorded config cannot be read ({e})") from None
    check_summarisable(path, results["runs"])
    return {**results, "summary": summarise(results["runs"], cfg)}


def summary_rows(results: dict) -> Dict[Tuple[str, str], dict]:
    """(task, variant) -> the summary row of a results.json, recomputed from its runs under
    its own recorded config (so the baseline is that experiment's)."""
    from .experiment_config import normalise_config
    from .summary import summarise
    rows = summarise(results.get("runs", []), normalise_config(results["config"]))
    return {(row["task"], row["variant"]): row for row in rows}


def _either(old_row: Optional[dict], new_row: Optional[dict]) -> dict:
    """The old row, else the new one: a paired row is missing on one side at most."""
    row = old_row or new_row
    assert row is not None, "a paired row is missing on both sides"
    return row


def paired_rows(old: dict, new: dict) -> List[Tuple[str, str, str, Optional[dict], Optional[dict]]]:
    """(task, metric, variant, old row, new row) for every (task, variant) in either results,
    in the old results' order then the new ones'; a row missing on one side is None. A task
    measured in two different metrics is an error (the numbers could not be compared)."""
    a, b = summary_rows(old), summary_rows(new)
    out = []
    for key in list(a) + [k for k in b if k not in a]:
        ra, rb = a.get(key), b.get(key)
        if ra and rb and ra["metric"] != rb["metric"]:
            raise CompareError(f"task {key[0]!r}: metric {ra['metric']} in the first results, "
                               f"{rb['metric']} in the second")
        out.append((key[0], _either(ra, rb)["metric"], key[1], ra, rb))
    return out


def _test_cell(row: Optional[dict]) -> str:
    """``mean ± std (n)`` of a summary row's test metric; ``-`` when the side lacks it."""
    return "-" if row is None else f"{pm(row['test_mean'], row['test_std'])} ({len(row['seeds'])})"


def _gain_cell(row: Optional[dict]) -> str:
    """``gain ± std (n paired seeds)`` of an ELMo row; ``-`` when missing or unpaired."""
    if row is None or not row.get("gain_seeds"):
        return "-"
    return f"{pm(row['gain_mean'], row['gain_std'], signed=True)} ({row['gain_seeds']})"


def _change(a: Optional[float], b: Optional[float]) -> str:
    """``b - a`` signed, or ``-`` when either is missing."""
    return "-" if a is None or b is None else pm(b - a, None, signed=True)


def _source_lines(name: str, path: str, results: dict) -> List[str]:
    """Which results a column comes from: the file, its command, its biLMs' SHA-256 and
    whether each was adapted to the domain (extra data, which a comparison must say)."""
    lines = [f"* **{name}**: `{path}` (`{results.get('command', '')}`)"]
    for spec, info in (results.get("bilms") or {}).items():
        lines.append(f"  * biLM `{spec}` = `{info.get('path', '')}`, {bilm_sha256_text(info)}; "
                     f"domain-adapted: {domain_adapted_text(info)}")
    return lines


#: What a task's ``data`` block of results.json records of how it was set up, by label.
_SETUP = (("sizes", "split sizes"), ("model", "model settings"), ("train", "training settings"),
          ("embeddings", "word vectors"))
#: Counts of the ``embeddings`` block that follow from the text read, not from the vectors
#: chosen (other split sizes change them; "word vectors differ" said another file was used).
_TEXT_COUNTS = {"in_vectors", "train_words_not_in_vectors", "vocab", "found_exact", "found_lowercased",
                "not_found"}


def _setup_value(d: dict, key: str):
    """``d[key]`` as :data:`_SETUP` compares it: the word vectors without the counts of the text."""
    value = d[key]
    if key == "embeddings" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in _TEXT_COUNTS}
    return value


#: What a task's ``data.source`` records of how its files were read, by label (compared where
#: both sides record it: results of older versions lack some).
_READ = (("format", "file format (the columns or fields read)"), ("tokenize", "tokenization"),
         ("dev", "dev split"))


def _sampled(d: dict) -> bool:
    """Whether max_train / max_dev / max_test drew a sample of one of the task's splits."""
    full = (d.get("source") or {}).get("full_sizes") or {}
    return any(n != full.get(split, n) for split, n in (d.get("sizes") or {}).items())


def _read_differences(da: dict, db: dict, spec_a: Optional[dict], spec_b: Optional[dict]) -> List[str]:
    """The labels of what two runs of one task read differently from the same files: their
    format (another label column, say), tokenization, dev split, the sample drawn
    (``subset_seed``, where a split is sampled) and where texts are cut (``max_tokens``)."""
    from .datasets import text_limits
    sa, sb = da.get("source") or {}, db.get("source") or {}
    differ = [label for key, label in _READ if key in sa and key in sb and sa[key] != sb[key]]
    if (_sampled(da) or _sampled(db)) and sa.get("subset_seed", 0) != sb.get("subset_seed", 0):
        differ.append("sample (subset_seed)")
    if spec_a is not None and spec_b is not None and text_limits(spec_a) != text_limits(spec_b):
        differ.append("text cut (max_tokens)")
    return differ


def _task_specs(results: dict) -> Dict[str, dict]:
    """Task name -> its entry of the results' recorded config."""
    tasks = (results.get("config") or {}).get("tasks") or []
    return {str(spec.get("name", spec.get("task"))): spec for spec in tasks if isinstance(spec, dict)}


def differing_setups(old: dict, new: dict) -> Dict[str, List[str]]:
    """Task -> what the two results did otherwise on it, for each task both ran but not alike:
    other split sizes, model or training settings, word vectors, other file contents
    (SHA-256), or the same files read otherwise (:func:`_read_differences`)."""
    a, b = old.get("data") or {}, new.get("data") or {}
    specs_a, specs_b = _task_specs(old), _task_specs(new)
    out = {}
    for task in [t for t in a if t in b]:
        da, db = a[task], b[task]
        differ = [label for key, label in _SETUP
                  if key in da and key in db and _setup_value(da, key) != _setup_value(db, key)]
        differ += _read_differences(da, db, specs_a.get(task), specs_b.get(task))
        files_a, files_b = ((d.get("source") or {}).get("files") or {} for d in (da, db))
        shas = [split for split in files_a if split in files_b
                and isinstance(files_a[split], dict) and isinstance(files_b[split], dict)
                and files_a[split].get("sha256") != files_b[split].get("sha256")]
        if shas:
            differ.append(f"{', '.join(shas)} file contents")
        if differ:
            out[task] = differ
    return out


def setup_differences(old: dict, new: dict) -> List[str]:
    """One line per task that both results ran but not alike (:func:`differing_setups`): the
    columns of such a task measure more than the change of biLM; empty when every shared task
    matches."""
    return [f"* **task {task} was not run alike**: its {'; '.join(differ)} differ, so its change is "
            f"not the biLM's alone" for task, differ in differing_setups(old, new).items()]


def comparison_markdown(old: dict, new: dict, names: Sequence[str] = ("old", "new"),
                        paths: Sequence[str] = ("", "")) -> str:
    """The two tables (test metric per task and variant; gain of each ELMo variant over its
    baseline) as markdown, with where each column comes from."""
    n_old, n_new = names
    rows = paired_rows(old, new)
    experiments = dict.fromkeys([old["config"]["name"], new["config"]["name"]])
    out = [COMPARISON_HEADER[:2] + f"{' / '.join(f'`{e}`' for e in experiments)}: {n_old} against {n_new}", "",
           *_source_lines(n_old, paths[0], old), *_source_lines(n_new, paths[1], new),
           *setup_differences(old, new), "",
           "Test mean ± std over seeds (number of seeds), each task in its own metric (never "
           f"averaged); change = {n_new} − {n_old}.", "",
           f"| task | metric | variant | {n_old} | {n_new} | change |", "|---|---|---|---|---|---|"]
    for task, metric, variant, a, b in rows:
        out.append(f"| {task} | {METRIC_NAMES.get(metric, metric)} | {variant} | {_test_cell(a)} | "
                   f"{_test_cell(b)} | {_change(a['test_mean'] if a else None, b['test_mean'] if b else None)} |")
    gains = [r for r in rows if _either(r[3], r[4]).get("elmo")]
    if gains:
        out += ["", "Gain of each ELMo variant over the baseline of the same results, paired by "
                "seed: mean ± std (paired seeds).", "",
                f"| task | metric | variant | gain, {n_old} | gain, {n_new} | change |",
                "|---|---|---|---|---|---|"]
        for task, metric, variant, a, b in gains:
            ga = a.get("gain_mean") if a and a.get("gain_seeds") else None
            gb = b.get("gain_mean") if b and b.get("gain_seeds") else None
            out.append(f"| {task} | {METRIC_NAMES.get(metric, metric)} | {variant} | "
                       f"{_gain_cell(a)} | {_gain_cell(b)} | {_change(ga, gb)} |")
    # (a biLM URL or command of results recorded before logins were refused: no password shown)
    return redact_url("\n".join(out) + "\n")
