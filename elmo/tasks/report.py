"""The human-readable outputs of an experiment: ``results.md``, ``layer_weights.png`` and,
for a task run at several training-set sizes, ``training_sizes.png``.

``results.md`` has one table row per (task, variant): the task's own metric on test as
mean ± std over seeds, and the gain over the baseline as the mean ± std of the per-seed
differences. Rows of different tasks are never averaged. A second table gives the learned
ELMo layer weights softmax(s) and gamma per task, variant and position (mean ± std over
seeds); the plot shows the same weights.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..io import atomic_commit, atomic_target, atomic_write_text
from ..output_checks import writing
from ..redact import redact_url
from ..training.adaptation import trained_text
from .paired import sample_std
from .paired import signed as signed_text

METRIC_NAMES = {"token_accuracy": "token accuracy %", "span_f1": "span F1 %",
                "accuracy": "accuracy %", "pearson": "Pearson r ×100",
                "spearman": "Spearman ρ ×100", "f1": "F1 %", "exact_match": "exact match %"}


def _num(x) -> Optional[float]:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def pm(mean, std, digits: int = 2, signed: bool = False) -> str:
    """``mean ± std`` (``mean`` alone when std is undefined, e.g. a single seed)."""
    m, s = _num(mean), _num(std)
    if m is None:
        return "n/a"
    text = signed_text(m, digits) if signed else f"{m:.{digits}f}"
    return text if s is None else f"{text} ± {s:.{digits}f}"


def gain(row: dict) -> str:
    """An ELMo row's gain, ``+1.17 ± 0.76``, with ``(1 of 3 seeds paired)`` when the baseline
    ran on fewer of its seeds: the row's seed count is its test mean's, the gain is only over
    the seeds the baseline shares (a gain of one seed read as one over all three)."""
    text = pm(row.get("gain_mean"), row.get("gain_std"), signed=True)
    paired, seeds = row.get("gain_seeds"), len(row["seeds"])
    if isinstance(paired, int) and paired != seeds:
        text += f" ({paired} of {seeds} seeds paired)"
    return text


def interval(row: dict) -> str:
    """A gain's 95% interval, ``+0.97 to +5.03``; ``n/a`` when undefined (one seed, or a record
    written before intervals were kept)."""
    low, high = _num(row.get("gain_low")), _num(row.get("gain_high"))
    return "n/a" if low is None or high is None else f"{low:+.2f} to {high:+.2f}"


def mix_weight_rows(runs: List[dict]) -> List[dict]:
    """Per (task, variant, position) with learned mixes: mean and std over seeds of each
    layer's softmax(s) weight and of gamma."""
    groups: Dict[Tuple[str, str, str], List[dict]] = {}
    for r in runs:
        e = r.get("elmo")
        if not e or e.get("layers") != "all":
            continue
        for pos, mw in (e.get("mix_weights") or {}).items():
            groups.setdefault((r["task"], r["variant"], pos), []).append(mw)
    rows = []
    for (task, variant, pos), mws in groups.items():
        n_layers = len(mws[0]["weights"])
        layer_w = [[mw["weights"][j] for mw in mws] for j in range(n_layers)]
        gammas = [mw["gamma"] for mw in mws]
        rows.append({"task": task, "variant": variant, "position": pos, "seeds": len(mws),
                     "weights_mean": [statistics.fmean(w) for w in layer_w],
                     "weights_std": [sample_std(w) for w in layer_w],
                     "gamma_mean": statistics.fmean(gammas),
                     "gamma_std": sample_std(gammas)})
    return rows


def _adapted_text(entry) -> str:
    """One ``adapted_on`` entry of a model's metadata.json, as text: its files and how much of
    them was trained (the steps and tokens the run took, not the text's size)."""
    if isinstance(entry, dict):
        files = entry.get("files") or [entry.get("path") or entry.get("name") or entry]
        trained = trained_text(entry)
        return ", ".join(f"`{f}`" for f in files) + (f" ({trained})" if trained else "")
    return f"`{entry}`"


def bilm_sha256_text(info: dict) -> str:
    """A biLM's short SHA-256 and what it covers (``bilms`` block of results.json), e.g.
    ``SHA-256 1a2b3c4d5e6f (weights, options and vocabulary)``."""
    sha = info.get("sha256")
    if not sha:
        return "SHA-256 not recorded"
    return f"SHA-256 {sha[:12]} ({info.get('sha256_of', 'its files')})"


def domain_adapted_text(info: dict) -> str:
    """Whether a biLM (an entry of results.json's ``bilms``, :func:`~.bilms.describe_bilm`)
    was adapted to the domain, which is extra data: the text it was adapted on, ``yes (extra
    data)`` where its metadata says so without naming the text, ``no`` where the entry records
    that it was not, and ``not recorded`` for an entry with neither field (results written
    before they were recorded, or by hand): "no" there claimed what the file does not say."""
    if "adapted_on" not in info and "domain_adapted" not in info:
        return "not recorded"
    adapted = info.get("adapted_on") or []
    if adapted:
        return "; ".join(_adapted_text(a) for a in adapted)
    return "yes (extra data)" if info.get("domain_adapted") else "no"


def bilm_lines(bilms: Dict[str, dict]) -> List[str]:
    """One bullet per biLM: spec, folder, short SHA-256, domain adaptation, training data."""
    lines = []
    for spec, info in bilms.items():
        meta = info.get("metadata") or {}
        lines.append(f"* `{spec}` = `{info['path']}`, {bilm_sha256_text(info)}; "
                     f"domain-adapted: {domain_adapted_text(info)}"
                     + (f"; trained on: {meta.get('corpus') or meta.get('train_data')}"
                        if meta.get("corpus") or meta.get("train_data") else ""))
        if info.get("warning"):
            lines.append(f"  * **{info['warning']}**")
    return lines


def _means_table(results: dict, key: str, column: str, title: str,
                 shown: Callable[[str], str] = str) -> List[str]:
    """A table of the summary rows' ``key`` (name -> test mean), one line per task, variant
    and name (``shown`` as ``column``); nothing when no row has one."""
    rows = [row for row in results.get("summary", []) if row.get(key)]
    if not rows:
        return []
    out = ["", title, "", f"| task | variant | {column} | test mean |", "|---|---|---|---|"]
    for row in rows:
        for name, mean in row[key].items():
            out.append(f"| {row['task']} | {row['variant']} | {shown(name)} | {pm(mean, None)} |")
    return out


def _set_metric_name(name: str) -> str:
    """``"extra: spearman"`` -> ``"extra: Spearman ρ ×100"``."""
    split, _, metric = name.rpartition(": ")
    return f"{split}: {METRIC_NAMES.get(metric, metric)}"


def _graded_lines(results: dict) -> List[str]:
    """A graded task's other correlation on test, a span_qa task's exact match or F1 (each
    row's own task, never averaged with its metric or another task), and the runs whose test
    correlation is undefined, with why."""
    out = _means_table(results, "other_metrics_mean", "metric",
                       "Other metrics on test, from the same predictions (a graded task's other "
                       "correlation, a question answering task's exact match, or its F1 where it is "
                       "scored in exact match), mean over seeds:",
                       lambda name: METRIC_NAMES.get(name, name))
    undefined = [(r, "", r["undefined"]) for r in results.get("runs", []) if r.get("undefined")]
    undefined += [(r, f" (test set `{k}`)", why) for r in results.get("runs", [])
                  for k, why in (r.get("extra_tests_undefined") or {}).items()]
    if undefined:
        out += ["", "Runs whose test correlation is undefined (n/a above):", ""]
        out += [f"* {r['task']} / {r['variant']} / seed {r['seed']}{where}: {why}"
                for r, where, why in undefined]
    return out


def markdown(results: dict) -> str:
    """``results.md`` of an experiment's results. A URL's password in it (a biLM spec or a
    command of results recorded before logins were refused) is shown as ``***``."""
    return redact_url(_markdown(results))


def _seeds_note(seeds: Sequence[int], summary: Sequence[dict]) -> str:
    """The paragraph under the command: the seeds, and what ± (the sample std), the gain, its
    interval and paired t are. Where no row has two seeds (one seed, or results whose every
    row has run one so far) there is no spread to show: the note says so, since rows of one
    seed show no ± and the interval and paired t are n/a."""
    listed = f"Seeds: {', '.join(map(str, seeds))}."
    spread = any(len(row["seeds"]) > 1 for row in summary) if summary else len(seeds) > 1
    if not spread:
        return (f"{listed} Each row is one seed's run, and a single seed has no spread: no ± (the "
                "sample standard deviation over seeds) is shown, and each +ELMo row's 95% interval "
                "and paired t are n/a. Each +ELMo row's gain is its test score minus the baseline's "
                "with the same seed. Each task is reported in its own metric; tasks are never averaged.")
    return (f"{listed} ± is the sample standard deviation over "
            "seeds. Each +ELMo row's gain is its test score "
            "minus the baseline's with the same seed, averaged over seeds (± the std of those "
            "differences), with its 95% Student-t interval; paired t = mean gain / (its std / "
            "sqrt(seeds)), e.g. above 4.30 for a two-sided 5% test with 3 seeds. Each task is "
            "reported in its own metric; tasks are never averaged.")


def _beside_train_lines(data: Dict[str, dict]) -> List[str]:
    """Lines of the Data section naming, per task, the dev and test labels no training example
    has (``unseen_labels``: each is scored as an error) and the dev and test examples whose text
    is a training text (``in_train``). Both were in the log and results.json only, so the
    shared report showed such a task's scores as any other's. Duplicates are named, not
    refused: a corpus's fixed splits keep the ones it has (short sentences, tweets)."""
    unseen = {t: d["unseen_labels"] for t, d in data.items() if d.get("unseen_labels")}
    shared = {t: d["in_train"] for t, d in data.items() if d.get("in_train")}
    out: List[str] = []
    if unseen:
        out += ["", "Dev and test labels that no training example has (each example or token "
                "with one is scored as an error):", ""]
        out += [f"* {task}: " + "; ".join(
                    f"{split} " + ", ".join(f"{label!r} ({n})" for label, n in list(counts.items())[:10])
                    + (f" and {len(counts) - 10} more" if len(counts) > 10 else "")
                    for split, counts in splits.items()) for task, splits in unseen.items()]
    if shared:
        out += ["", "Dev and test examples whose text is also a training text (their scores "
                "measure what the model was trained on):", ""]
        out += [f"* {task}: " + "; ".join(
                    f"{split} {'all ' if n == data[task]['sizes'][split] else ''}{n} of "
                    f"{data[task]['sizes'][split]}" for split, n in counts.items())
                for task, counts in shared.items()]
    return out


def _markdown(results: dict) -> str:
    cfg = results["config"]
    out = [f"# Experiment `{cfg['name']}`", ""]
    if cfg.get("description"):
        out += [cfg["description"], ""]
    out += [f"Reproduce: `{results.get('command', '')}`", "", _seeds_note(cfg["seeds"], results.get("summary", [])),
            "", "biLMs:", *bilm_lines(results.get("bilms", {})), ""]
    out += ["| task | metric | variant | ELMo at | layers | λ | biLM | biLM tuned | seeds | "
            "test mean ± std | gain ± std | 95% interval | paired t | dev mean | time s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in results.get("summary", []):
        e = row.get("elmo")
        c = elmo_cells(e)
        out.append(f"| {row['task']} | {METRIC_NAMES.get(row['metric'], row['metric'])} | "
                   f"{row['variant']} | {c['at']} | {c['layers']} | {c['lambda']} | {c['bilm']} | "
                   f"{c['tuned']} | "
                   f"{len(row['seeds'])} | {pm(row['test_mean'], row['test_std'])} | "
                   f"{gain(row) if e else '-'} | "
                   f"{interval(row) if e else '-'} | {pm(row.get('gain_t'), None) if e else '-'} | "
                   f"{pm(row['dev_mean'], None)} | {row['seconds']:.0f} |")
    out += _graded_lines(results)
    out += _means_table(results, "extra_tests_mean", "test set",
                        "Further test sets (each task's other `files`), test mean over seeds:")
    out += _means_table(results, "extra_tests_other_metrics_mean", "test set: metric",
                        "Graded tasks' other correlation on the further test sets, mean over seeds:",
                        _set_metric_name)
    cache = results.get("bilm_cache_seconds") or {}
    if cache:
        out += ["", "The frozen biLMs' layers were computed once per sentence and shared by all "
                "runs: " + "; ".join(f"`{p}` {s:.0f} s" for p, s in cache.items()) + "."]
    weights = mix_weight_rows(results.get("runs", []))
    if weights:
        n = max(len(w["weights_mean"]) for w in weights)
        out += ["", "## Learned layer weights", "",
                "softmax(s) per layer (0 = the token layer) and gamma, mean ± std over seeds.", "",
                "| task | variant | position | " + " | ".join(f"layer {j}" for j in range(n))
                + " | gamma | seeds |",
                "|---|---|---|" + "---|" * n + "---|---|"]
        for w in weights:
            cells = [pm(m, s, 3) for m, s in zip(w["weights_mean"], w["weights_std"])]
            cells += [""] * (n - len(cells))
            out.append(f"| {w['task']} | {w['variant']} | {w['position']} | " + " | ".join(cells)
                       + f" | {pm(w['gamma_mean'], w['gamma_std'], 3)} | {w['seeds']} |")
        out += ["", "![learned layer weights](layer_weights.png)"]
    if training_size_curves(results):
        out += ["", "## Training-set size", "",
                "![test metric against training-set size](training_sizes.png)"]
    data = results.get("data") or {}
    if data:
        out += ["", "## Data", "", "| task | train | dev | test | labels | word vectors |",
                "|---|---|---|---|---|---|"]
        for task, d in data.items():
            s = d["sizes"]
            emb = d.get("embeddings", {})
            labels = d["labels"] if not d.get("targets") else "numeric"
            out.append(f"| {task} | {s['train']} | {s['dev']} | {s['test']} | {labels} | "
                       f"{emb.get('vectors', '')} |")
        past = {t: d["answers_past_cut"] for t, d in data.items() if d.get("answers_past_cut")}
        if past:
            out += ["", "Questions scored whose every gold answer lies past the context's cut "
                    "(max_tokens_b; the model, which points inside what it read, cannot answer "
                    "them, and they count in F1 and exact match):", ""]
            out += [f"* {task}: " + "; ".join(f"{split} {n} of {data[task]['sizes'][split]}"
                                              for split, n in counts.items())
                    for task, counts in past.items()]
        out += _beside_train_lines(data)
        own = {t: d["source"] for t, d in data.items()
               if isinstance(d.get("source"), dict) and d["source"].get("files")
               and not d["source"].get("corpus")}
        if own:
            out += ["", "Files read (SHA-256, first 12 hex digits; all in results.json):", ""]
            for task, src in own.items():
                files = "; ".join(f"{split} `{f['path']}` {f['sha256'][:12]}"
                                  for split, f in src["files"].items())
                out.append(f"* {task}: {files}; dev: {src.get('dev', 'file')}")
    return "\n".join(out) + "\n"


def _save_png(fig, path: Path) -> None:
    """Save a matplotlib figure as a PNG atomically, then close it."""
    import matplotlib.pyplot as plt
    tmp = atomic_target(path)
    try:
        # (matplotlib's failed write, a full disk, named no file: "[Errno 28] No space left")
        with writing(path, "plot"):
            fig.savefig(tmp, dpi=100, format="png")
            atomic_commit(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)


def plot_weights(runs: List[dict], path: Path) -> bool:
    """Bar charts of the learned softmax(s) (mean ± std over seeds), one panel per task,
    variant and position; gamma in each title. Returns False when there is nothing to plot
    or matplotlib is missing."""
    rows = mix_weight_rows(runs)
    if not rows:
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    cols = min(4, len(rows))
    lines = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(lines, cols, figsize=(3.2 * cols, 2.8 * lines), squeeze=False)
    for ax, w in zip(axes.flat, rows):
        n = len(w["weights_mean"])
        err = [0.0 if math.isnan(s) else s for s in w["weights_std"]]
        ax.bar(range(n), w["weights_mean"], yerr=err, capsize=3, color="tab:blue")
        ax.set_xticks(range(n))
        ax.set_ylim(0, 1)
        ax.set_xlabel("layer")
        ax.set_title(f"{w['task']} / {w['variant']}\n{w['position']}, γ = {w['gamma_mean']:.2f}",
                     fontsize=9)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    axes[0][0].set_ylabel("softmax(s)")
    fig.tight_layout()
    _save_png(fig, Path(path))
    return True


def _size_groups(results: dict) -> Dict[str, List[str]]:
    """Title -> the names of the task entries that are one task at several training-set sizes:
    entries equal but for their ``name`` and ``max_train``. The title is the task (``pos``),
    with the names when two groups share it (two tasks of one kind from your own files)."""
    import json
    groups: Dict[str, Tuple[str, List[str]]] = {}
    for spec in (results.get("config") or {}).get("tasks", []):
        same = {k: v for k, v in spec.items() if k not in ("name", "max_train")}
        key = json.dumps(same, sort_keys=True, default=str)
        groups.setdefault(key, (spec["task"], []))[1].append(spec.get("name", spec["task"]))
    titles = [task for task, _ in groups.values()]
    return {(task if titles.count(task) == 1 else f"{task}: {', '.join(names)}"): names
            for task, names in groups.values()}


def training_size_curves(results: dict) -> Dict[str, Dict[str, List[Tuple[int, float, float]]]]:
    """For every task that an experiment runs at two or more training-set sizes (task
    entries with their own ``name`` that differ in nothing else but ``max_train``):
    ``{task: {variant: [(train size, test mean, test std)]}}``, sorted by size. Empty when no
    task has several sizes. Other entries of one kind (two taggers on different files, or
    one scored in another metric) are separate tasks, never points of one curve."""
    data = results.get("data") or {}
    curves: Dict[str, Dict[str, List[Tuple[int, float, float]]]] = {}
    for task, names in _size_groups(results).items():
        sizes = {n: data[n]["sizes"]["train"] for n in names if n in data}
        if len(set(sizes.values())) < 2:
            continue
        per_variant: Dict[str, List[Tuple[int, float, float]]] = {}
        for row in results.get("summary", []):
            if row["task"] in sizes and _num(row.get("test_mean")) is not None:
                std = _num(row.get("test_std"))
                per_variant.setdefault(row["variant"], []).append(
                    (sizes[row["task"]], row["test_mean"], 0.0 if std is None else std))
        curves[task] = {v: sorted(points) for v, points in per_variant.items()}
    return curves


def plot_training_sizes(results: dict, path: Path) -> bool:
    """Test metric against training-set size (log scale), one line per variant with ± std
    over seeds, one panel per task (the paper's Figure 1). False when no task has several
    sizes or matplotlib is missing."""
    curves = training_size_curves(results)
    if not curves:
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    metrics = {r["task"]: r["metric"] for r in results.get("summary", [])}
    groups = _size_groups(results)
    fig, axes = plt.subplots(1, len(curves), figsize=(4.5 * len(curves), 3.5), squeeze=False)
    for ax, (task, per_variant) in zip(axes[0], curves.items()):
        for variant, points in per_variant.items():
            xs, ys, es = zip(*points)
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=variant)
        ax.set_xscale("log")
        sizes = sorted({x for points in per_variant.values() for x, _, _ in points})
        ax.set_xticks(sizes, [f"{x:,}" for x in sizes])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("training examples")
        metric = next((metrics[n] for n in groups[task] if n in metrics), "")
        ax.set_ylabel(f"test {METRIC_NAMES.get(metric, metric)}")
        ax.set_title(task)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save_png(fig, Path(path))
    return True


def elmo_cells(e: Optional[dict]) -> Dict[str, str]:
    """The table cells that describe a variant's ELMo settings ("-" for the baseline)."""
    if not e:
        return {"at": "-", "layers": "-", "lambda": "-", "bilm": "-", "tuned": "-"}
    return {"at": "+".join(e["positions"]), "layers": e["layers"],
            "lambda": f"{e['lambda']:g}" if e["layers"] == "all" else "-",
            "bilm": f"`{e['bilm']}`", "tuned": "yes" if e["finetune"] else "no"}


#: How :func:`combined_table` begins (``experiment-table -o`` replaces only such a file).
TABLE_HEADER = "| experiment |"


def combined_table(all_results: List[dict], sources: Optional[Sequence[str]] = None) -> str:
    """One markdown table of the summary rows of several experiments (e.g. pos, ner and
    sentiment), each row in its task's own metric, with the experiment it comes from, and
    under it each experiment's command and biLMs (short SHA-256, domain adaptation). Rows are
    listed, never averaged.

    ``sources`` (where each results file was read) names an experiment whose name another
    one shares: the same config run with two biLMs (``v1/pos`` and ``pos``) gave rows that
    differed in nothing but their numbers."""
    names = [results["config"]["name"] for results in all_results]
    labels = [name if names.count(name) == 1
              else f"{name} ({sources[i] if sources else f'#{i + 1}'})" for i, name in enumerate(names)]
    out = [TABLE_HEADER + " task | metric | variant | ELMo at | layers | λ | biLM | biLM tuned | "
           "seeds | test mean ± std | gain ± std | 95% interval | paired t |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    commands = []
    for label, results in zip(labels, all_results):
        commands.append(f"* `{label}`: `{results.get('command', '')}`")
        # which files each biLM was: `default` of one version and of another read the same
        commands += ["  " + line for line in bilm_lines(results.get("bilms") or {})]
        for row in results.get("summary", []):
            e = row.get("elmo")
            c = elmo_cells(e)
            t = pm(row.get("gain_t"), None) if e else "-"
            out.append(f"| {label} | {row['task']} | {METRIC_NAMES.get(row['metric'], row['metric'])} "
                       f"| {row['variant']} | {c['at']} | {c['layers']} | {c['lambda']} | "
                       f"{c['bilm']} | {c['tuned']} | {len(row['seeds'])} | "
                       f"{pm(row['test_mean'], row['test_std'])} | {gain(row) if e else '-'} | "
                       f"{interval(row) if e else '-'} | {t} |")
    # (a biLM URL or command of results recorded before logins were refused: no password shown)
    return redact_url("\n".join(out + _not_alike_lines(all_results, labels)
                                 + ["", "Reproduce (and the biLMs each experiment used):", *commands]) + "\n")


def _not_alike_lines(all_results: Sequence[dict], labels: Sequence[str]) -> List[str]:
    """Under :func:`combined_table`: each task that two of its experiments ran otherwise (split
    sizes, settings, word vectors, files or how they were read; see
    :func:`~elmo.tasks.compare.differing_setups`), whose rows of one task name side by side
    are then not of one setup."""
    from .compare import differing_setups
    lines = []
    for i, first in enumerate(all_results):
        for j in range(i + 1, len(all_results)):
            for task, differ in differing_setups(first, all_results[j]).items():
                lines.append(f"* **task {task} is not run alike in `{labels[i]}` and `{labels[j]}`**: "
                             f"its {'; '.join(differ)} differ")
    return ["", "Tasks of one name run otherwise (their rows are not of one setup):", ""] + lines if lines else []


def write_reports(results: dict, out: Path) -> None:
    """Write ``results.md``, ``layer_weights.png`` and, when a task runs at several
    training-set sizes, ``training_sizes.png`` into ``out``."""
    out = Path(out)
    atomic_write_text(out / "results.md", markdown(results))
    plot_weights(results.get("runs", []), out / "layer_weights.png")
    plot_training_sizes(results, out / "training_sizes.png")
    # a plot of an earlier experiment into this folder (--overwrite) or of an earlier version
    # of the report stayed beside results that have nothing to plot, as if it were theirs
    if not mix_weight_rows(results.get("runs", [])):
        (out / "layer_weights.png").unlink(missing_ok=True)
    if not training_size_curves(results):
        (out / "training_sizes.png").unlink(missing_ok=True)
