"""Linear probes on frozen vectors, and the POS probe per layer (the paper's Table 6).

A probe is a softmax regression: features are standardised with the training mean and
standard deviation, then ``scores = x W^T + b``; it is fit by full-batch L-BFGS on the
cross-entropy plus ``l2 * ||W||^2``. It is deliberately weak (linear), so its accuracy says
what a layer makes linearly readable, not what a strong tagger could learn on top of it.

The mix probe learns a :class:`~elmo.ScalarMix` of the standardised layers jointly with the
linear map, as a task model would; its softmax weights say which layers the probe leaned on.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ..checks import require_count, require_seed, shown
from ..modules import ScalarMix
from ..runtime import threads as _threads
from .stats import bootstrap_interval, paired_bootstrap, verdict
from . import vectors

Tagged = List[Tuple[str, str]]


@dataclass
class LinearProbe:
    """A trained softmax-regression probe.

    ``mean``, ``std``: (D,) or (K, D) standardisation; ``weight`` (C, D); ``bias`` (C,);
    ``mix``: the :class:`ScalarMix` for a probe on K layers, else None.
    """

    mean: torch.Tensor
    std: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    mix: Optional[ScalarMix] = None

    def scores(self, x: np.ndarray) -> np.ndarray:
        """Class scores (N, C) of features (N, D), or (K, N, D) for a mix probe."""
        with torch.no_grad():
            z = _features(torch.as_tensor(x, dtype=torch.float32), self.mean, self.std, self.mix)
            return (z @ self.weight.T + self.bias).numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted class ids (N,)."""
        return self.scores(x).argmax(axis=1)

    def mix_weights(self) -> Optional[List[float]]:
        """softmax(s) of the mix probe, one weight per layer (None for a one-layer probe)."""
        return None if self.mix is None else [float(w) for w in self.mix.weights().detach()]


def _features(x: torch.Tensor, mean, std, mix: Optional[ScalarMix]) -> torch.Tensor:
    z = (x - mean.unsqueeze(-2)) / std.unsqueeze(-2) if x.dim() == 3 else (x - mean) / std
    return mix(list(z)) if mix is not None else z


#: Problems smaller than this (rows x features x classes) are fit on one thread: thread
#: start-up and contention cost more than they save there.
SMALL_PROBLEM = 2e7


def check_probe_settings(l2: Any, seed: Any, max_iter: Any = 1) -> Tuple[float, int, int]:
    """``l2``, ``seed`` and ``max_iter`` checked, as ``elmo analyze`` checks its options: a
    negative or NaN ``l2`` failed inside L-BFGS (an IndexError, or "value cannot be converted
    to type float without overflow"), a seed out of numpy's and torch's range after every
    vector was computed. Called before the vectors are, where a function computes them."""
    if isinstance(l2, (bool, str, bytes)) or not isinstance(l2, (int, float, np.number)):
        raise TypeError(f"l2 must be a number, got {type(l2).__name__}: {shown(l2)}")
    if not 0.0 <= float(l2) < math.inf:
        raise ValueError(f"l2 must be a finite number of 0 or more, got {l2!r}")
    return float(l2), require_seed(seed), require_count("max_iter", max_iter)


def train_probe(x: np.ndarray, y: Union[Sequence[int], np.ndarray], n_classes: int, l2: float = 1e-3,
                max_iter: int = 100, mix: bool = False, seed: int = 0, in_place: bool = False) -> LinearProbe:
    """Fit a linear probe.

    Args:
        x: features (N, D); with ``mix=True``, the layers (K, N, D) to mix.
        y: class ids (N,) in ``[0, n_classes)``.
        l2: weight of ``||W||^2``, added to the mean cross-entropy (finite, 0 or more).
        max_iter: L-BFGS iterations (full batch).
        seed: from 0 to 2**64 - 1.
        in_place: standardise the features in ``x``'s own memory where it is a float32 array
            (it is left standardised; the probe is the same): the mix probe over all of Brown
            held the layers and their standardised copy at once.
    """
    l2, seed, max_iter = check_probe_settings(l2, seed, max_iter)
    size = float(np.prod(np.shape(x))) * n_classes
    if size < SMALL_PROBLEM:
        with _threads(1):
            return _fit(x, y, n_classes, l2, max_iter, mix, seed, in_place)
    return _fit(x, y, n_classes, l2, max_iter, mix, seed, in_place)


def _class_ids(y: Union[Sequence[int], np.ndarray]) -> np.ndarray:
    """The labels as (N,) int64 class ids. A fraction was cut to the id below it (0.5 trained
    as class 0, in silence), NaN was read as -9223372036854775808, a word was torch's list of
    the dtypes it takes, and (N, 2) labels were counted as N."""
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"the labels must be one class id per feature row (N,), got shape {labels.shape}")
    if not (labels.dtype == bool or np.issubdtype(labels.dtype, np.integer)
            or np.issubdtype(labels.dtype, np.floating)):
        raise ValueError(f"the labels must be whole-number class ids, got values such as {shown(labels[0].item())}")
    if np.issubdtype(labels.dtype, np.floating):
        bad = labels[~np.isfinite(labels) | (labels != np.round(labels))]
        if len(bad):
            raise ValueError(f"the labels must be whole-number class ids, got {bad[0].item()!r}")
    return labels.astype(np.int64)


def _fit(x: np.ndarray, y: Union[Sequence[int], np.ndarray], n_classes: int, l2: float, max_iter: int,
         mix: bool, seed: int, in_place: bool = False) -> LinearProbe:
    torch.manual_seed(seed)
    if isinstance(x, np.ndarray) and not x.flags.writeable:   # (a read-only array is not written)
        in_place = False
    x_t = torch.as_tensor(x, dtype=torch.float32)
    y_t = torch.from_numpy(_class_ids(y))
    if mix and x_t.dim() != 3:
        raise ValueError("a mix probe needs features (K, N, D)")
    if not mix and x_t.dim() != 2:
        raise ValueError("a probe needs features (N, D)")
    n = x_t.shape[-2]
    if n != len(y_t) or n == 0:
        raise ValueError(f"{n} feature rows for {len(y_t)} labels")
    # (else torch's "Target 2 is out of bounds" from inside L-BFGS, or NaN weights that failed
    # the line search with "cannot be converted to type float")
    if int(y_t.min()) < 0 or int(y_t.max()) >= n_classes:
        raise ValueError(f"labels must be class ids from 0 to {n_classes - 1}; got {int(y_t.min())} "
                         f"to {int(y_t.max())}")
    if not torch.isfinite(x_t).all():
        raise ValueError("the probe's features hold NaN or infinite values")
    mean = x_t.mean(dim=-2)
    std = x_t.std(dim=-2, unbiased=False).clamp_min(1e-6)
    # standardised once (the same operations, and so the same numbers, in place)
    z = (x_t.sub_(mean.unsqueeze(-2)).div_(std.unsqueeze(-2)) if in_place
         else (x_t - mean.unsqueeze(-2)) / std.unsqueeze(-2))
    dim = x_t.shape[-1]
    weight = torch.zeros(n_classes, dim, requires_grad=True)
    bias = torch.zeros(n_classes, requires_grad=True)
    scalar_mix = ScalarMix(x_t.shape[0]) if mix else None
    params = [weight, bias] + (list(scalar_mix.parameters()) if scalar_mix is not None else [])
    # Stops after max_iter, or earlier once the loss changes by less than 1e-7 (ample for a
    # probe's accuracy, and many times faster than the default 1e-9 on separable data).
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, history_size=20,
                            tolerance_grad=1e-5, tolerance_change=1e-7,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        feats = scalar_mix(list(z)) if scalar_mix is not None else z
        loss = torch.nn.functional.cross_entropy(feats @ weight.T + bias, y_t)
        loss = loss + l2 * (weight ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return LinearProbe(mean, std, weight.detach(), bias.detach(), scalar_mix)


# ----------------------------------------------------------------------------- POS
def majority_baselines(train: Sequence[Tagged], test: Sequence[Tagged]) -> Dict[str, float]:
    """Accuracy of two baselines that use no context:

    * ``majority_tag``: every token gets the tag most frequent in training;
    * ``word_majority_tag``: each word gets its most frequent training tag (unseen words: the
      majority tag).
    """
    tag_counts = Counter(t for s in train for _, t in s)
    majority = tag_counts.most_common(1)[0][0]
    by_word: Dict[str, Counter] = defaultdict(Counter)
    for s in train:
        for w, t in s:
            by_word[w][t] += 1
    best = {w: c.most_common(1)[0][0] for w, c in by_word.items()}
    gold = [t for s in test for _, t in s]
    words = [w for s in test for w, _ in s]
    return {"majority_tag": float(np.mean([t == majority for t in gold])),
            "word_majority_tag": float(np.mean([best.get(w, majority) == t
                                                for w, t in zip(words, gold)]))}


def pos_probe(model, train: Sequence[Tagged], test: Sequence[Tagged], l2: float = 1e-3,
              max_iter: int = 100, seed: int = 0, batch_size: int = 32, progress: bool = False) -> dict:
    """POS accuracy of a linear probe on each layer and on a learned mix.

    Args:
        model: an :class:`~elmo.embedding.Embedder`, a BiLM, or a model name or folder.
        train, test: tagged sentences (tags already reduced).
        progress: bars on stderr over the tokens embedded and the probes trained (minutes
            each on all of Brown).

    Returns:
        a dict: ``layers`` (accuracy per layer 0..L), ``mix``, ``mix_weights``,
        ``layers_interval`` / ``mix_interval`` (95% bootstrap intervals over test
        sentences, ``[low, high]``), the baselines (``majority_tag``, ``word_majority_tag``, ``layer0``), counts, and
        ``finding`` (layer 1 vs layer 2, by a paired bootstrap over test sentences).
    """
    check_probe_settings(l2, seed, max_iter)   # (before the vectors are computed)
    n_train, n_test = sum(len(s) for s in train), sum(len(s) for s in test)
    if not n_train or not n_test:  # (else numpy's "need at least one array to concatenate")
        raise ValueError(f"pos_probe needs tagged tokens to train and to test on; got {n_train} "
                         f"train and {n_test} test tokens")
    tags = sorted({t for s in train for _, t in s})
    tag_id = {t: i for i, t in enumerate(tags)}
    # (into arrays made beforehand, a chunk of sentences at a time: every sentence's array
    # and their concatenation were held at once, twice the memory, for all of Brown)
    embedder = vectors.as_embedder(model, batch_size)
    with vectors.progress_bar(n_train, "pos: train tokens", progress) as bar:
        x_train = vectors.stacked_layers(embedder, [[w for w, _ in s] for s in train], batch_size, bar)
    with vectors.progress_bar(n_test, "pos: test tokens", progress) as bar:
        x_test = vectors.stacked_layers(embedder, [[w for w, _ in s] for s in test], batch_size, bar)
    y_train = np.array([tag_id[t] for s in train for _, t in s])
    y_test = np.array([tag_id.get(t, -1) for s in test for _, t in s])   # unseen tag: wrong
    groups = np.array([i for i, s in enumerate(test) for _ in s])
    correct = []
    # (a probe per layer and the mix probe, each an L-BFGS fit)
    with vectors.progress_bar(x_train.shape[0] + 1, "pos: probes", progress, unit="probe") as bar:
        for j in range(x_train.shape[0]):
            probe = train_probe(x_train[j], y_train, len(tags), l2, max_iter, seed=seed)
            correct.append(probe.predict(x_test[j]) == y_test)
            bar.update(1)
        # (x_train's last use: standardised in its own memory, not in a copy as large)
        mix_probe = train_probe(x_train, y_train, len(tags), l2, max_iter, mix=True, seed=seed, in_place=True)
        mix_correct = mix_probe.predict(x_test) == y_test
        bar.update(1)
    result: Dict[str, Any] = {
        "layers": [float(c.mean()) for c in correct],
        "mix": float(mix_correct.mean()),
        "mix_weights": mix_probe.mix_weights(),
        **majority_baselines(train, test),
        "layer0": float(correct[0].mean()),
        "n_train_sentences": len(train), "n_test_sentences": len(test),
        "n_train_tokens": int(len(y_train)), "n_test_tokens": int(len(y_test)),
        "n_tags": len(tags),
        # 95% intervals from resampling test sentences (a sentence's tokens are related)
        "layers_interval": [_interval(c, groups, seed) for c in correct],
        "mix_interval": _interval(mix_correct, groups, seed),
    }
    if len(correct) >= 3:
        boot = paired_bootstrap(correct[1], correct[2], groups, seed=seed)
        result["layer1_minus_layer2"] = boot
        result["finding"] = verdict("layer 1", "layer 2", boot)
    return result


def _interval(correct: np.ndarray, groups: np.ndarray, seed: int) -> List[float]:
    b = bootstrap_interval(correct, groups, seed=seed)
    return [b["low"], b["high"]]
