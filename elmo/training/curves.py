"""``elmo plot-curve``: draw the learning curve of one or more ``log.jsonl`` files.

Left: training perplexity (exp of the training loss; an estimate when the softmax is sampled)
against tokens seen. Right: full-softmax validation perplexity, forward, backward and average.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence


def read_log(path: str | Path) -> List[Dict]:
    path = Path(path)
    if path.is_dir():
        path = path / "log.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_learning_curve(logs: Sequence[str | Path], output: str | Path, title: Optional[str] = None) -> Path:
    """Write a PNG of the curves in ``logs`` to ``output`` (atomically)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("plot-curve needs matplotlib: pip install 'elmo[plots]'") from None
    fig, (ax_train, ax_valid) = plt.subplots(1, 2, figsize=(11, 4.2))
    for log in logs:
        records = read_log(log)
        name = Path(log).parent.name if Path(log).is_file() else Path(log).name
        train = [r for r in records if r.get("event") == "train"]
        evals = [r for r in records if r.get("event") == "eval"]
        if train:
            ax_train.plot([r["tokens"] / 1e6 for r in train], [r["ppl"] for r in train], label=name, lw=1)
        if evals:
            tokens = [r["epoch"] for r in evals]
            for key, style in (("ppl_fwd", "o-"), ("ppl_bwd", "s--"), ("ppl", "^:")):
                ax_valid.plot(tokens, [r[key] for r in evals], style, label=f"{name} {key}", ms=3)
    ax_train.set(xlabel="tokens seen (millions)", ylabel="training perplexity", yscale="log",
                 title="training (sampled-softmax estimate)")
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
