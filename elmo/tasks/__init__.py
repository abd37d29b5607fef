"""Task models with and without ELMo, and the experiment runner (``elmo experiment``).

| module | concern |
|---|---|
| ``kinds`` | what differs per task kind (tagging, classification, pair, regression, pair_regression, span_qa): ``TASK_KINDS`` |
| ``datasets`` | task data: built-in presets on the fixed splits of ``elmo data``, or your files |
| ``files`` | reading CoNLL, CoNLL-U, ``word/TAG``, TSV and JSON-lines task files, with file:line errors |
| ``embeddings`` | task vocabularies and GloVe input vectors |
| ``batching`` | examples -> padded tensors |
| ``layer_cache`` | frozen biLM layers computed once per sentence |
| ``features`` | word, character and ELMo input features |
| ``crf`` | linear-chain CRF |
| ``models`` | tagger, sentence classifier, ESIM pair classifier, their regression variants, BiDAF-style span extractor |
| ``building`` | a task model built from its ``model`` settings (for the runner and ``saved``) |
| ``metrics`` | accuracy, span F1, Pearson and Spearman correlation, SQuAD exact match and F1 |
| ``train_loop`` | training with early stopping (``FitConfig``), scoring (a test set's metrics: ``split_metrics``) |
| ``experiment_config`` | the experiment config: its file format, read from its file, checked and typed (``ExperimentConfig``) |
| ``bilm_checksums`` | a biLM identified by the SHA-256 of the files that decide its outputs |
| ``fingerprints`` | run fingerprints (settings, data files, biLM) that ``--resume`` matches |
| ``resume_runs`` | what ``--resume`` keeps of an earlier results.json, and the log lines on what it drops |
| ``bilms`` | an experiment's biLMs: resolved, loaded, described, pooled with their layer caches |
| ``summary`` | statistics over seeds: means, spreads, gains over the baseline paired by seed |
| ``runner`` | one run (train and test), and the driver: plan, runs over seeds, results.json, reports |
| ``report`` | results.md, the layer-weight plot and the training-size plot |
| ``compare`` | one experiment's results under two biLMs, side by side |
| ``paired`` | two variants compared seed by seed: mean difference with a 95% interval |
| ``saved`` | a trained task model saved, loaded (``TaskModel.load``) and run on new text |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

if TYPE_CHECKING:
    from .models import TaskModel

#: ``from elmo.tasks import TaskModel`` imports the torch models when first used, not on
#: package import.
_LAZY = {"TaskModel": "models"}

# (type checkers see the TYPE_CHECKING import above, and no __getattr__ that makes any other
# name Any)
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)

__all__ = ["TaskModel"]
