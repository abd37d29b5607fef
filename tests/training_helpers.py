"""Small corpora and configurations shared by the training tests."""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import torch

import elmo
from elmo.data.corpus import CorpusStream
from elmo.data.lm_batches import LMBatch, PackedLMBatches
from elmo.training.model import LanguageModel
from elmo.training.config import TrainConfig
from elmo.vocab import Vocabulary

FIXTURE = Path(__file__).parent / "fixtures" / "bilm-tf-train"

DETS = ["the", "a", "every", "no"]
ADJS = ["red", "small", "old", "happy", "quiet", "green"]
NOUNS = ["cat", "dog", "bird", "child", "farmer", "teacher", "river", "house"]
VERBS = ["sees", "likes", "follows", "finds", "helps", "builds"]
ENDINGS = [".", "!"]


def toy_sentences(n: int, seed: int):
    """A little language with structure an LM can learn: det (adj) noun verb det (adj) noun end."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = []
        for part in range(2):
            s.append(rng.choice(DETS))
            if rng.random() < 0.5:
                s.append(rng.choice(ADJS))
            s.append(rng.choice(NOUNS))
            if part == 0:
                s.append(rng.choice(VERBS))
        s.append(rng.choice(ENDINGS))
        out.append(s)
    return out


def write_toy_corpus(folder: Path, n_train: int = 600, n_heldout: int = 80):
    """train.txt, heldout.txt and vocab.txt of the toy language; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    train, held = toy_sentences(n_train, 0), toy_sentences(n_heldout, 1)
    (folder / "train.txt").write_text("".join(" ".join(s) + "\n" for s in train))
    (folder / "heldout.txt").write_text("".join(" ".join(s) + "\n" for s in held))
    counts = Counter(w for s in train for w in s)
    counts["<S>"] = counts["</S>"] = len(train)
    Vocabulary.from_counts(counts).save(folder / "vocab.txt", with_counts=False)
    return folder / "train.txt", folder / "heldout.txt", folder / "vocab.txt"


def tiny_model_options(skip: bool = True, dim: int = 32, proj: int = 16):
    return {"lstm": {"dim": dim, "projection_dim": proj, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
                     "use_skip_connections": skip},
            "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 8], [2, 8], [3, 16]], "n_highway": 1,
                         "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"}}


def tiny_lm_and_batch(text: Path, lines: str, rows: int, steps: int, seed: int = 0
                      ) -> tuple[LanguageModel, Vocabulary, LMBatch]:
    """A tiny language model (seeded, no dropout), the vocabulary of the words of ``lines``
    (each counted once) and the first packed batch of ``rows`` x ``steps`` read from ``lines``,
    written to ``text``."""
    text.write_text(lines)
    vocab = Vocabulary.from_counts({w: 1 for w in dict.fromkeys(lines.split())})
    torch.manual_seed(seed)
    model = LanguageModel(elmo.ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)
    return model, vocab, PackedLMBatches(CorpusStream([text], shuffle=False), vocab, rows, steps).next_batch()


def tiny_config(output, train, vocab, **overrides) -> TrainConfig:
    fields = dict(train=[str(train)], vocab=str(vocab), output=str(output), options=tiny_model_options(),
                  batch_size=4, unroll_steps=10, epochs=1.0, n_negative=0, checkpoint_every=10_000,
                  log_every=10, progress=False, device="cpu")
    if overrides.get("layout") == "bucketed":
        del fields["unroll_steps"]   # (refused with that layout, which reads whole sentences)
    fields.update(overrides)
    return TrainConfig(**fields)


def unrecord(folder: Path, *names: str) -> None:
    """Delete ``names`` from the SHA-256 record of ``folder``'s metadata.json, as a user accepts a
    file edited on purpose: a test of a deeper check of that file (its HDF5 layout, its words)
    reaches it, instead of the record's refusal of the edit (tests/test_folder_checksums.py)."""
    import json
    path = Path(folder) / "metadata.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    for name in names:
        del meta["files_sha256"][name]
    path.write_text(json.dumps(meta), encoding="utf-8")


def toy_run_config(folder: Path, device: str = "cpu", **overrides) -> TrainConfig:
    """:func:`tiny_config` of a small toy corpus written in ``folder``; the run in ``folder/run``."""
    train_txt, _, vocab_txt = write_toy_corpus(folder / "text", n_train=60, n_heldout=5)
    return tiny_config(folder / "run", train_txt, vocab_txt, device=device, **overrides)


def training_run(folder: Path, device: str = "cpu", **overrides):
    """A TrainingRun of :func:`toy_run_config`, set up as ``run`` sets it up before its first step."""
    import time
    from elmo.training import distributed
    from elmo.training.run_log import new_window
    from elmo.training.trainer import TrainingRun
    cfg = toy_run_config(folder, device, **overrides)
    run = TrainingRun(cfg, distributed.setup(device))
    run.setup()
    run.resume()
    run.open_log()
    run.net, run.window, run.t_last = run.model, new_window(), time.perf_counter()
    return run


class NetAside:
    """The net's forward and backward run inside ``aside`` (a context manager: reads not
    counted, syncs allowed); the step gets the loss as a leaf, so its ``backward()`` is a no-op
    and what the step itself reads is what is left."""

    def __init__(self, net, aside):
        self.net, self.aside = net, aside

    def __call__(self, *args, **kwargs):
        with self.aside():
            out = self.net(*args, **kwargs)
            out["loss"].backward()
            return {**out, "loss": out["loss"].detach().requires_grad_()}
