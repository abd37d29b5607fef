"""``elmo plot-curve``: draw the learning curve of one or more ``log.jsonl`` files.

Left: exp of the training loss against tokens seen: ``sampled_ppl`` when the softmax was
sampled (not comparable with a perplexity), ``train_ppl`` with the full softmax (on training
batches, with dropout); logs written before these keys have ``ppl``, which is either. Right:
full-softmax validation perplexity, forward, backward and average.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ..io import json_objects


def read_log(path: str | Path) -> List[Dict]:
    """The records of a ``log.jsonl`` (or of the one in a run folder); a line that is not a JSON
    object is a ValueError naming the file and the line."""
    path = Path(path)
    if path.is_dir():
        path = path / "log.jsonl"
    with open(path, encoding="utf-8") as f:
        return [record for _, record in json_objects(
            f, lambda line, problem: ValueError(f"{path}: line {line}: {problem}; not a training log?"))]


TRAIN_KEYS = ("sampled_ppl", "train_ppl", "ppl")  # new logs, then older ones


def train_figure(record: Dict) -> Optional[tuple]:
    """(key, value) of a training record's exp(loss), whichever key its log version used."""
    for key in TRAIN_KEYS:
        if key in record:
            return key, record[key]
    return None


def plot_learning_curve(logs: Sequence[str | Path], output: str | Path, title: Optional[str] = None) -> Path:
    """Write a PNG of the curves in ``logs`` to ``output`` (atomically)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("plot-curve needs matplotlib: pip install 'elmo-pytorch[plots]'") from None
    every = {log: read_log(log) for log in logs}
    empty = [str(log) for log, records in every.items()
             if not any(r.get("event") in ("train", "eval") for r in records)]
    if empty:  # else a picture without a curve
        raise ValueError(f"no training or validation records in {', '.join(empty)}")
    fig, (ax_train, ax_valid) = plt.subplots(1, 2, figsize=(11, 4.2))
    kinds = set()
    for log, records in every.items():
        name = Path(log).parent.name if Path(log).is_file() else Path(log).name
        train = [(r, f) for r in records if r.get("event") == "train" and (f := train_figure(r))]
        evals = [r for r in records if r.get("event") == "eval"]
        if train:
            kinds.update(key for _, (key, _) in train)
            ax_train.plot([r["tokens"] / 1e6 for r, _ in train], [v for _, (_, v) in train], label=name, lw=1)
        if evals:
            tokens = [r["epoch"] for r in evals]
            for key, style in (("ppl_fwd", "o-"), ("ppl_bwd", "s--"), ("ppl", "^:")):
                ax_valid.plot(tokens, [r[key] for r in evals], style, label=f"{name} {key}", ms=3)
    titles = {"sampled_ppl": "sampled softmax", "train_ppl": "full softmax", "ppl": "sampled or full softmax"}
    ax_train.set(xlabel="tokens seen (millions)", ylabel="exp(training loss)", yscale="log",
                 title="training: " + ", ".join(titles[k] for k in TRAIN_KEYS if k in kinds)
                 + (" (not comparable with validation)" if kinds - {"train_ppl"} else ""))
    ax_valid.set(xlabel="epoch", ylabel="validation perplexity (full softmax)", yscale="log",
                 title="validation")
    for ax in (ax_train, ax_valid):
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, output)
    return output
