"""The report's pictures (matplotlib, PNG, no display needed).

* :func:`sense_pca`: one word's contextual vectors across sentences, projected to 2-d with
  PCA (per layer), coloured by sense;
* :func:`layer_bars`: a score per layer (and the mix) with baselines as horizontal lines;
* :func:`mix_weights`: the softmax weights of a learned scalar mix;
* :func:`similarity_layers`: Spearman's rho per layer per word pair set, GloVe as a line.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence

import numpy as np


#: The footer of the pictures drawn now (see :func:`signed`); None: no footer.
_FOOTER: ContextVar[Optional[str]] = ContextVar("elmo_analysis_picture_footer", default=None)


@contextmanager
def signed(footer: str) -> Iterator[None]:
    """Every picture drawn inside names ``footer`` (the model and its weights fingerprint) in
    small print at its bottom, the data drawn as without: a picture copied out of its folder
    said nothing of the model that made it, which only the report beside it named."""
    token = _FOOTER.set(footer)
    try:
        yield
    finally:
        _FOOTER.reset(token)


#: The footer's font size, and the height (inches) the layout leaves for it.
FOOTER_POINTS, FOOTER_INCHES = 7, 0.2


def _footer_room(fig) -> float:
    """The fraction of ``fig``'s height at its bottom that the footer takes (0 with none)."""
    return 0.0 if _FOOTER.get() is None else FOOTER_INCHES / fig.get_size_inches()[1]


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def pca_2d(x: np.ndarray) -> np.ndarray:
    """The first two principal components of the rows of ``x`` (N, D): (N, 2), centred.
    Fewer than two components (N < 2 or constant rows) are padded with zeros. A NaN or an
    infinity is a ValueError (it was numpy's "SVD did not converge"), as rows that are no
    (N, D) matrix are (numpy's "Array must be at least two-dimensional")."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"pca_2d needs rows (N, D), got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("pca_2d: the rows hold NaN or infinite values")
    centred = x - x.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    out = np.zeros((len(x), 2))
    k = min(2, len(s))
    out[:, :k] = u[:, :k] * s[:k]
    return out


def sense_pca(vectors: np.ndarray, senses: Sequence[str], word: str, path: Path,
              layer_names: Optional[Sequence[str]] = None) -> Path:
    """PCA of one word's vectors, one panel per layer, coloured by sense.

    Args:
        vectors: (K, N, D): K layers, N occurrences; senses: N labels.
    """
    vectors = _check_pca_input(vectors, senses, layer_names)
    plt = _pyplot()
    k = vectors.shape[0]
    names = list(layer_names or [f"layer {j}" for j in range(k)])
    labels = sorted(set(senses))
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, k, figsize=(4 * k, 4.8), squeeze=False)
    for j, ax in enumerate(axes[0]):
        xy = pca_2d(vectors[j])
        for c, label in enumerate(labels):
            rows = [i for i, s in enumerate(senses) if s == label]
            ax.scatter(xy[rows, 0], xy[rows, 1], s=25, color=colours(c % 10), label=label)
        ax.set_title(names[j])
        ax.set_xticks([]), ax.set_yticks([])
    handles, names_ = axes[0][0].get_legend_handles_labels()
    room = _footer_room(fig)      # (the legend stands on the footer, not over it)
    fig.legend(handles, names_, fontsize=7, loc="lower center", ncol=2,
               **({"bbox_to_anchor": (0.5, room)} if room else {}))
    fig.suptitle(f'"{word}" in {vectors.shape[1]} sentences, PCA per layer, coloured by sense')
    fig.tight_layout(rect=(0, room + 0.06 * ((len(labels) + 1) // 2), 1, 1))
    return _save(fig, path)


def _check_pca_input(vectors: np.ndarray, senses: Sequence[str],
                     layer_names: Optional[Sequence[str]]) -> np.ndarray:
    """``vectors`` (K, N, D) as an array, checked against its N ``senses`` and K names: N
    labels short of the occurrences drew only the first few points (no word of the rest), no
    occurrence was matplotlib's "Number of columns must be a positive integer", and a NaN
    numpy's "SVD did not converge"."""
    x = np.asarray(vectors)
    if x.ndim != 3 or 0 in x.shape:
        raise ValueError(f"sense_pca needs vectors (layers, occurrences, width), none of them 0; got shape {x.shape}")
    if len(senses) != x.shape[1]:
        raise ValueError(f"sense_pca: {len(senses)} sense labels for {x.shape[1]} occurrences; give one per occurrence")
    if layer_names is not None and len(layer_names) != x.shape[0]:
        raise ValueError(f"sense_pca: {len(layer_names)} layer names for {x.shape[0]} layers")
    if not np.isfinite(x).all():
        raise ValueError("sense_pca: the vectors hold NaN or infinite values")
    return x


def _check_values(values: Sequence, what: str) -> None:
    """A picture of nothing (it was an empty PNG, or a StopIteration) or of a value that is no
    finite number (None was a TypeError from inside) is refused, naming what was drawn."""
    if len(values) == 0:
        raise ValueError(f"{what}: nothing to draw")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float, np.number))
           or not np.isfinite(v)]
    if bad:
        raise ValueError(f"{what}: {bad[0]!r} is not a finite number to draw")


def _check_bars_input(scores: Dict[str, float], baselines: Dict[str, float],
                      intervals: Optional[Dict[str, Sequence[float]]], what: str) -> None:
    """The scores, baselines and intervals of :func:`layer_bars`, checked: a NaN baseline was
    drawn as a line nowhere, labelled "nan", a list as a baseline was a TypeError from inside
    its label, an interval of one number numpy's "not enough values to unpack", and an
    interval of a name that has no bar was left out in silence."""
    _check_values(list(scores.values()), what)
    for name, value in baselines.items():
        _check_values([value], f"{what}: baseline {name!r}")
    for name, span in (intervals or {}).items():
        if name not in scores:
            raise ValueError(f"{what}: an interval for {name!r}, which has no score; scores: {', '.join(scores)}")
        if span is None:      # (no interval for this score: drawn without error bars)
            continue
        if not isinstance(span, (list, tuple, np.ndarray)) or len(span) != 2:
            raise ValueError(f"{what}: the interval of {name!r} must be [low, high], got {span!r}")
        _check_values(list(span), f"{what}: the interval of {name!r}")


def layer_bars(scores: Dict[str, float], baselines: Dict[str, float], title: str,
               ylabel: str, path: Path,
               intervals: Optional[Dict[str, Sequence[float]]] = None) -> Path:
    """Bars for ``scores`` (e.g. ``{"layer 0": 0.9, ..., "mix": 0.95}``) and a dashed line per
    baseline; values are fractions, drawn as percentages. ``intervals``: ``[low, high]`` per
    score name, drawn as error bars."""
    _check_bars_input(scores, baselines, intervals, f"layer_bars ({title})")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.2 * len(scores) + 3, 3.5))
    names = list(scores)
    values = [100 * scores[n] for n in names]
    errors = None
    if intervals:
        spans = [intervals.get(n) or (scores[n], scores[n]) for n in names]
        errors = [[max(v - 100 * lo, 0) for v, (lo, _) in zip(values, spans)],
                  [max(100 * hi - v, 0) for v, (_, hi) in zip(values, spans)]]
    bars = ax.bar(names, values, color="tab:blue", yerr=errors, capsize=4 if errors else 0)
    for bar, v in zip(bars, values):
        ax.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    styles = ["--", ":", "-."]
    for i, (name, v) in enumerate(baselines.items()):
        ax.axhline(100 * v, color="grey", linestyle=styles[i % 3], label=f"{name} {100 * v:.1f}")
    ax.set_ylim(0, 105)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if baselines:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout(rect=(0, _footer_room(fig), 1, 1))
    return _save(fig, path)


def mix_weights(weights: Sequence[float], path: Path, title: str = "learned mix weights") -> Path:
    """Bars of softmax(s), one per layer."""
    _check_values(list(weights), f"mix_weights ({title})")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.0 * len(weights) + 2, 3))
    ax.bar([f"layer {j}" for j in range(len(weights))], list(weights), color="tab:orange")
    ax.set_ylim(0, 1)
    ax.set_ylabel("softmax(s)")
    ax.set_title(title)
    fig.tight_layout(rect=(0, _footer_room(fig), 1, 1))
    return _save(fig, path)


def similarity_layers(res: dict, path: Path) -> Path:
    """Spearman's rho per layer (x) of each pair set in ``res`` (what
    :func:`elmo.analysis.similarity.similarity_eval` returns), with its 95% interval as error
    bars, each set's type averages' rho per layer (when ``res`` has them, on the pairs the
    corpus covers) as a dotted line of its colour, and its GloVe rho (on the pairs GloVe
    covers) as a dashed line. An undefined rho is left out."""
    sets = res["sets"]
    if not sets:   # (next() of no set was a bare StopIteration)
        raise ValueError("similarity_layers: no word pair set to draw")
    plt = _pyplot()
    n_layers = len(next(iter(sets.values()))["layers"])
    fig, ax = plt.subplots(figsize=(1.0 * n_layers + 4, 3.5))
    colours = plt.get_cmap("tab10")
    for c, (name, s) in enumerate(sets.items()):
        keep = [j for j, x in enumerate(s["layers"]) if x is not None]
        rho = np.array([s["layers"][j] for j in keep], dtype=np.float64)
        spans = [s["layers_interval"][j] or (s["layers"][j],) * 2 for j in keep]
        errors = [rho - [lo for lo, _ in spans], [hi for _, hi in spans] - rho]
        ax.errorbar(keep, rho, yerr=np.maximum(errors, 0), marker="o", capsize=4, color=colours(c % 10),
                    label=f"{name} ({s['n_pairs']} pairs)")
        averaged = (res.get("type_average") or {}).get(name)
        if averaged:          # (on the pairs whose words the corpus has, no error bars)
            kept = [j for j, x in enumerate(averaged["layers"]) if x is not None]
            ax.plot(kept, [averaged["layers"][j] for j in kept], marker="s", linestyle=":",
                    color=colours(c % 10), label=f"{name}: type averages on {averaged['n_pairs']} pairs")
        glove = s.get("glove")
        if glove and glove.get("rho") is not None:
            ax.axhline(glove["rho"], color=colours(c % 10), linestyle="--",
                       label=f"{name}: GloVe on its {glove['n_pairs']} pairs {glove['rho']:.3f}")
    ax.set_xticks(range(n_layers), [f"layer {j}" for j in range(n_layers)])
    ax.set_ylim(-1.05, 1.05)      # (an interval's cap at 1 stays in sight)
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_ylabel("Spearman's rho")
    ax.set_title("Word similarity, each word alone, 95% intervals")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout(rect=(0, _footer_room(fig), 1, 1))
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG, with the footer of :func:`signed` where one is set,
    whole or not at all, and close it. (It was drawn straight onto ``path``: a run stopped or
    a disk filled midway left a truncated picture in place of the earlier one.)"""
    path = Path(path)
    import matplotlib.pyplot as plt

    from ..io import atomic_commit, atomic_target
    from ..output_checks import writing
    try:
        # (matplotlib's failed write, a full disk, named no file: "[Errno 28] No space left")
        with writing(path, "picture"):
            tmp = atomic_target(path)
            try:
                footer = _FOOTER.get()
                if footer:   # (in the room the layout left for it at the bottom)
                    fig.text(0.5, 0.02 / fig.get_size_inches()[1], footer, ha="center", va="bottom",
                             fontsize=FOOTER_POINTS, color="dimgrey")
                fig.savefig(tmp, dpi=100, format="png")
                atomic_commit(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
    finally:
        plt.close(fig)
    return path
