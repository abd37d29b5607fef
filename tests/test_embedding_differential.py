"""Differential tests of the embedding paths against the plainest computation there is.

Each case draws, from one seed, a small input file (0 to 60 tokens a line, lines longer than
``max_tokens``, repeats, non-ASCII words, blank lines) and a random combination of the options
of :func:`elmo.embed_file` (layers, dtype, batch size, windows, sorting, token cache, stateful,
segments, ranks, an interruption and resume, sentence keys, tokenizer), runs it, and compares
every dataset with the *ground truth*: the biLM called directly on one sentence alone (a
fresh, stateless copy of the model), the selection applied by hand (mean of the layers,
``gamma * sum_j w_j h_j``, ``softmax(s)`` of a ScalarMix).

What is promised, and so what is checked:
  * a sentence of at most ``max_tokens`` tokens is one window: its vectors are those of the
    sentence alone, up to float32 rounding;
  * a longer one is cut into windows of ``max_tokens`` tokens that start every
    ``max_tokens - overlap`` tokens (the last one ending at the sentence's end), and each
    token takes its vectors from the window where min(left, right) context is largest (an
    edge at the sentence's start or end counting as unlimited; ties: the earlier window):
    the truth there is that window run alone, re-derived here from the README's rule;
  * stateful: batches follow the input order, each piece (a sentence or a window) is a row
    ``i % batch_size`` of batch ``i // batch_size`` and starts from the state its row ended
    with in the previous batch; the state is reset at every segment (``embed_file``);
  * the layout: one dataset per line named by line number (or by sentence with sentence
    keys), ``sentence_to_index`` mapping each sentence to its last line, shapes
    (L + 1, n, D) for ``all`` and (n, D) otherwise, the requested dtype.

``ElmoEmbedder`` (AllenNLP's API) is compared with the same truth. The default run takes a
handful of seeds; ``-m slow`` sweeps many more.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import h5py
import numpy as np
import pytest
import torch

from elmo import Embedder, ElmoEmbedder, embed_file, sentence_vectors
from elmo.embedding import EmbedConfig, InputError
from elmo.embedding import embedder as embedder_module
from elmo.embedding.output import parts_dir
from elmo.modules import ScalarMix
from elmo.tokenize import tokenize as tokenize_en
from tests.conftest import random_bilm

#: Words of the drawn sentences: ASCII, accents, CJK, emoji, a combining mark, a word longer
#: than the 48 bytes a token keeps, punctuation that the English tokenizer splits off.
WORDS = ("the bank river money a of to closed opened water , . ! ? don't U.S. 3.14 and/or / "
         "café naïve Ünïcödé 北京 我 爱 😀 e\u0301 ß <S> </S> " + "x" * 60 + " " + "é" * 30).split() + [
            "a\u3000b", "c\xa0d", "e\x1cf", "g\x85h", "i\u2028j", "m\rn"]   # (str.split splits these)
# (no NUL: a file holding one is refused, tests/test_text_nul.py)


# ---------------------------------------------------------------------- the ground truth
def truth_layers(model, tokens: Sequence[str]) -> np.ndarray:
    """(L + 1, n, D) float64: the biLM called on this one sentence alone, from a zero state."""
    if not tokens:
        return np.zeros((model.num_layers, 0, model.output_dim))
    with torch.no_grad():
        layers = model(model.token_ids([list(tokens)]))["activations"]
    return torch.stack(layers)[:, 0].double().numpy()


def select(layers: np.ndarray, kind: str, weights=None, gamma: float = 1.0) -> np.ndarray:
    """The selection by hand: (L + 1, n, D) -> itself for ``all``, else (n, D)."""
    if kind == "all":
        return layers
    if kind == "top":
        return layers[-1]
    if kind == "average":
        return layers.mean(axis=0)
    return gamma * sum(w * h for w, h in zip(weights, layers))


def owners(n: int, max_tokens: int, overlap: int):
    """[(window start, window stop)] of each token of an n-token sentence, by the README's rule."""
    if n <= max_tokens:
        return [(0, n)] * n
    starts = list(range(0, n - max_tokens, max_tokens - overlap)) + [n - max_tokens]
    result = []
    for i in range(n):
        best = None
        for s in starts:            # in order: a tie keeps the earlier window
            e = s + max_tokens
            if not s <= i < e:
                continue
            left = float("inf") if s == 0 else i - s
            right = float("inf") if e == n else e - 1 - i
            score = min(left, right)
            if best is None or score > best[0]:
                best = (score, (s, e))
        result.append(best[1])
    return result


def stateless_truth(model, tokens, max_tokens: int, overlap: int) -> np.ndarray:
    """(L + 1, n, D): each token from the window that owns it, that window run alone."""
    n = len(tokens)
    out = np.zeros((model.num_layers, n, model.output_dim))
    cache: Dict = {}
    for i, span in enumerate(owners(n, max_tokens, overlap)):
        if span not in cache:
            cache[span] = truth_layers(model, tokens[span[0]:span[1]])
        out[:, i] = cache[span][:, i - span[0]]
    return out


def pieces_of(n: int, max_tokens: int, overlap: int):
    """The windows of a sentence in order, as (start, stop, [token positions kept])."""
    spans: List = []
    for i, span in enumerate(owners(n, max_tokens, overlap)):
        if not spans or spans[-1][:2] != span:
            spans.append((span[0], span[1], []))
        spans[-1][2].append(i)
    return spans or [(0, 0, [])]


def stateful_truth(model, sentences, max_tokens: int, overlap: int, batch_size: int) -> List[np.ndarray]:
    """(L + 1, n, D) of each sentence of one run from a zero state: piece i (sentence or window,
    in input order) runs in row i % batch_size after the pieces before it in that row; each
    row is replayed alone, one piece at a time, on a stateful copy of the model. An empty
    sentence runs nothing (its row keeps its state)."""
    rows: Dict[int, list] = {}
    k = 0
    for j, tokens in enumerate(sentences):
        for start, stop, kept in pieces_of(len(tokens), max_tokens, overlap):
            rows.setdefault(k % batch_size, []).append((j, start, stop, kept))
            k += 1
    out = [np.zeros((model.num_layers, len(s), model.output_dim)) for s in sentences]
    for row in rows.values():
        replay = copy.deepcopy(model)
        replay.stateful = True
        replay.reset_states()
        for j, start, stop, kept in row:
            if stop > start:
                layers = truth_layers(replay, sentences[j][start:stop])
                for i in kept:
                    out[j][:, i] = layers[:, i - start]
    return out


def magnitude(layers: np.ndarray, weights=None, gamma: float = 1.0) -> float:
    """How large the numbers summed into a selected vector are: max |h|, times gamma * sum |w|
    for a mix (whose result may be small where its terms are not)."""
    scale = float(np.abs(layers).max(initial=1.0))
    return scale * abs(gamma) * sum(abs(w) for w in weights) if weights else scale


def assert_close(got: np.ndarray, want: np.ndarray, dtype, what: str, scale: float = 1.0) -> None:
    """Equal up to float32 rounding (and float16's, for a float16 output) of numbers of ``scale``."""
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype}, expected {dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, scale, float(np.abs(want).max(initial=0.0)))
    tol = 1e-5 * scale   # float32 rounding of a few hundred operations on values of this size
    if np.dtype(dtype) == np.float16:
        tol = tol + np.abs(want).astype(np.float16).astype(np.float64) * 2.0 ** -11
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= tol).all(), f"{what}: differs by up to {err.max():.3g} (tolerance {np.max(tol):.3g})"


# ---------------------------------------------------------------------- drawing a case
@dataclass
class Case:
    lines: List[str]
    layers: object                     # str or ScalarMix
    kind: str
    weights: Optional[tuple]
    gamma: float
    options: Dict = field(default_factory=dict)
    world_size: int = 1
    interrupt_at: Optional[int] = None
    cli: bool = False               # run as ``elmo embed`` with the options spelled as flags
    cli_config: bool = False        # ... printed with --print-config, then read back with --config
    bom: bool = False               # a UTF-8 byte-order mark opens the file (dropped, as documented)
    last_newline: bool = True       # the file's last line ends with a newline
    earlier: Optional[str] = None   # an output of other settings ("stale") or a stopped --overwrite run

    def raw(self) -> bytes:
        data = (b"\xef\xbb\xbf" if self.bom else b"") + b"".join(
            line.encode("utf-8", "surrogateescape") + b"\n" for line in self.lines)
        return data if self.last_newline else data[:-1]

    def sentences(self) -> List[str]:
        """The stripped text of each line as the reader documents it (bad bytes replaced)."""
        return [line.encode("utf-8", "surrogateescape").decode("utf-8", "replace").strip()
                for line in self.lines]

    def tokens(self) -> List[List[str]]:
        split = tokenize_en if self.options.get("tokenize") else str.split
        return [split(sentence) for sentence in self.sentences()]


def draw_sentence(rng: random.Random, longest: int) -> List[str]:
    n = rng.choice([0, rng.randint(1, 8), rng.randint(1, longest)])
    if rng.random() < 0.02:   # longer than the default max_tokens (256)
        n = rng.randint(257, 330)
    return [rng.choice(WORDS) for _ in range(n)]


def draw_case(seed: int, n_layers: int) -> Case:
    rng = random.Random(seed)
    sentence_keys = rng.random() < 0.2
    lines: List[str] = []
    for _ in range(rng.randint(1, 14)):
        if lines and rng.random() < 0.15:
            lines.append(rng.choice(lines))          # a repeated line
        elif rng.random() < 0.1:
            lines.append(rng.choice(["", "   ", "\t"]))
        else:
            words = draw_sentence(rng, 60)
            if words and rng.random() < 0.1:
                words[rng.randrange(len(words))] += "\udcff"   # a byte that is not UTF-8
            lines.append(rng.choice([" ", "  ", "\t"]).join(words) + rng.choice(["", " ", "\r"]))
    if sentence_keys:   # unique, non-empty sentences name the datasets
        # (HDF5 reads "/" as a group: a name may be neither a ".", nor another's name or group)
        names: set = set()
        groups: set = set()
        unique = []
        for line in lines:
            line = line.replace("\udcff", "")
            parts = [p for p in line.strip().split("/") if p]
            name = "/".join(parts)
            prefixes = {"/".join(parts[:i]) for i in range(1, len(parts))}
            if (parts and "." not in parts and "\0" not in line and name not in names | groups
                    and not prefixes & names):
                names.add(name)
                groups |= prefixes
                unique.append(line)
        lines = unique or ["only one"]
    kind = rng.choice(["all", "top", "average", "mix", "scalarmix"])
    weights, gamma, layers = None, 1.0, kind
    if kind == "mix":
        weights = tuple(round(rng.uniform(-1, 2), 3) for _ in range(n_layers))
        gamma = rng.choice([1.0, 0.5, 2.5])
        layers = "mix:" + ",".join(str(w) for w in weights)
    elif kind == "scalarmix":
        s = [rng.uniform(-2, 2) for _ in range(n_layers)]
        layers = ScalarMix(n_layers, initial_scalar_parameters=s, initial_gamma=rng.choice([1.0, 0.7]))
        weights = tuple(float(w) for w in layers.weights().detach())
        gamma, kind = float(layers.gamma.detach()), "mix"
    max_tokens = rng.choice([256, 60, rng.randint(1, 30)])
    # (a stride of one token is drawn for short windows only: 300 windows a line take seconds)
    widest = max_tokens - 1 if max_tokens <= 30 else max_tokens * 3 // 4
    overlap = rng.randint(0, widest) if rng.random() < 0.7 else min(64, max_tokens - 1)
    options = dict(
        batch_size=rng.choice([1, 2, 3, 5, 64]), max_tokens=max_tokens, overlap=overlap,
        sort_by_length=rng.random() < 0.7, token_cache=rng.random() < 0.6,
        cache_min_count=rng.choice([1, 2]), cache_sample_lines=rng.choice([1, 3, 100_000]),
        cache_max_words=rng.choice([1, 5, 50_000]),
        stateful=rng.random() < 0.25, segment_lines=rng.choice([1, 2, 3, 4096]),
        dtype=rng.choice(["float32", "float32", "float16"]), sentence_keys=sentence_keys,
        forget_sentences=rng.random() < 0.2, tokenize=rng.random() < 0.2, errors="replace",
        overwrite=rng.random() < 0.2)
    if kind != "mix":
        options["gamma"] = 1.0
    else:
        options["gamma"] = gamma if not isinstance(layers, ScalarMix) else 1.0
    case = Case(lines, layers, kind, weights, gamma, options)
    case.world_size = rng.choice([1, 1, 2, 3])
    case.interrupt_at = rng.choice([None, None, rng.randint(1, 6)])
    case.bom = rng.random() < 0.1
    case.last_newline = rng.random() < 0.8 or lines[-1] == ""   # (else that empty line is gone)
    case.cli = rng.random() < 0.25
    case.cli_config = case.cli and rng.random() < 0.5
    case.earlier = rng.choice([None, None, None, "stale"])
    if case.earlier == "stale":
        options["overwrite"] = True
    return case


# ---------------------------------------------------------------------- running a case
def run_embed_file(case: Case, model, tmp_path, monkeypatch) -> Path:
    inp = tmp_path / "in.txt"
    inp.write_bytes(case.raw())
    out = tmp_path / "out.hdf5"
    kwargs = dict(case.options, layers=case.layers)
    if case.earlier == "stale":   # a finished file of other settings: replaced only by overwrite
        other = dict(kwargs, layers="top", gamma=1.0, dtype="float32", stateful=False, overwrite=False)
        embed_file(inp, out, copy.deepcopy(model), **other)
    if case.interrupt_at is not None:       # a run stopped at one of its batches, then resumed
        real, calls = embedder_module.Embedder._run_batch, []

        def stopping(self, *args):
            calls.append(1)
            if len(calls) == case.interrupt_at:
                raise KeyboardInterrupt
            return real(self, *args)

        monkeypatch.setattr(embedder_module.Embedder, "_run_batch", stopping)
        try:   # (it finishes when it has fewer batches: the runs below find the file done)
            embed_file(inp, out, model, command_line="interrupted", **kwargs)
        except KeyboardInterrupt:
            pass
        monkeypatch.setattr(embedder_module.Embedder, "_run_batch", real)
    if case.cli:
        run_cli(case, model, inp, out, tmp_path, monkeypatch)
        return out
    config = None
    if case.world_size == 2:   # the settings given as an EmbedConfig (a keyword wins over it)
        config = EmbedConfig(**dict(kwargs, batch_size=kwargs["batch_size"] + 1))
        kwargs = {"batch_size": case.options["batch_size"]}
    for rank in range(case.world_size - 1, -1, -1):   # rank 0 last: it merges
        result = embed_file(inp, out, model, config, rank=rank, world_size=case.world_size, **kwargs)
        assert result == (out if rank == 0 else None)
    assert not parts_dir(out).exists()
    return out


def cli_flags(case: Case) -> List[str]:
    """``elmo embed``'s flags for the options of ``case``."""
    o = case.options
    layers = case.layers
    flags = ["--gamma", repr(o["gamma"])]
    if isinstance(layers, ScalarMix):
        layers = "mix:" + ",".join(repr(w) for w in case.weights)
        flags = ["--gamma", repr(case.gamma)]
    flags += ["--layers", layers, "--dtype", o["dtype"], "--batch-size", str(o["batch_size"]),
              "--max-tokens", str(o["max_tokens"]), "--overlap", str(o["overlap"]),
              "--cache-min-count", str(o["cache_min_count"]), "--cache-max-words", str(o["cache_max_words"]),
              "--cache-sample", str(o["cache_sample_lines"]), "--segment-lines", str(o["segment_lines"]),
              "--errors", o["errors"], "--quiet"]
    for name, flag, when in (("sort_by_length", "--no-sort", False), ("token_cache", "--no-token-cache", False),
                             ("sentence_keys", "--sentence-keys", True), ("stateful", "--stateful", True), ("overwrite", "--overwrite", True),
                             ("forget_sentences", "--forget-sentences", True), ("tokenize", "--tokenize", True)):
        if o[name] == when:
            flags.append(flag)
    return flags


def run_cli(case: Case, model, inp, out, tmp_path, monkeypatch) -> None:
    """``elmo embed`` on a saved copy of the model, one process a rank (torchrun's variables);
    then the command stored in the output, run again, finds the file done."""
    from elmo.cli import main as cli_main
    from elmo import save_pretrained
    folder = tmp_path / "model"
    if not folder.exists():
        save_pretrained(model, folder)
    args = ["embed", str(inp), str(out), "--model", str(folder), *cli_flags(case)]
    if case.cli_config:   # the settings printed, then read back from that file alone
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert cli_main([*args, "--print-config"]) == 0
        (tmp_path / "config.json").write_text(printed.getvalue(), encoding="utf-8")
        args = ["embed", str(inp), str(out), "--config", str(tmp_path / "config.json")]
    for rank in range(case.world_size - 1, -1, -1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(case.world_size))
        monkeypatch.setenv("LOCAL_RANK", "0")
        assert cli_main(args) == 0
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name)
    assert not parts_dir(out).exists()
    with h5py.File(out, "r") as f:
        stored = shlex.split(f.attrs["command_line"])
    if stored == ["interrupted"]:   # the run meant to be stopped finished the file
        return
    before = out.stat().st_mtime_ns
    assert stored[:2] == ["elmo", "embed"] and cli_main(stored[1:]) == 0
    if not case.options["overwrite"]:
        assert out.stat().st_mtime_ns == before   # the same settings: done, not redone


def expected_arrays(case: Case, truth_model) -> List[tuple]:
    """Each line's array as documented (before the dtype), and the magnitude of its terms."""
    o = case.options
    tokens = case.tokens()
    if o["stateful"]:
        layers = []
        step = o["segment_lines"]
        for first in range(0, len(tokens), step):
            layers += stateful_truth(truth_model, tokens[first:first + step], o["max_tokens"],
                                     o["overlap"], o["batch_size"])
    else:
        layers = [stateless_truth(truth_model, t, o["max_tokens"], o["overlap"]) for t in tokens]
    return [(select(a, case.kind, case.weights, case.gamma), magnitude(a, case.weights, case.gamma))
            for a in layers]


def check_file(case: Case, out, truth_model) -> None:
    want = expected_arrays(case, truth_model)
    sentences = case.sentences()
    o = case.options
    with h5py.File(out, "r") as f:
        names = []
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        if o["sentence_keys"]:
            assert len(names) == len(sentences)
        else:
            index = [] if o["forget_sentences"] else ["sentence_to_index"]
            assert sorted(names) == sorted([str(i) for i in range(len(sentences))] + index)
        if not o["sentence_keys"] and not o["forget_sentences"]:
            got_index = json.loads(f["sentence_to_index"][0])
            assert got_index == {s: str(i) for i, s in enumerate(sentences)}   # the last line wins
        assert f.attrs["stateful"] == o["stateful"]
        for i, (sentence, (array, scale)) in enumerate(zip(sentences, want)):
            name = sentence if o["sentence_keys"] else str(i)
            assert_close(f[name][()], array, o["dtype"], f"line {i} ({len(case.tokens()[i])} tokens)", scale)


# ---------------------------------------------------------------------- the tests
def draw_model(seed: int):
    """A small random biLM: 1 to 3 LSTM layers, with or without skip connections."""
    return random_bilm(seed=seed % 7, n_layers=1 + seed % 3, skip=seed % 4 != 1)


def run_file_case(seed, tmp_path, monkeypatch):
    model = draw_model(seed)
    truth_model = copy.deepcopy(model)
    case = draw_case(seed, model.num_layers)
    training = seed % 3 == 0   # a model still being trained: its dropout must not reach the vectors
    model.lstm.dropout = 0.5
    model.train(training)
    carried = None
    if seed % 5 == 2:   # a stateful model that carries a state: the file starts from zeros, and
        model.stateful = True   # the model gets its state back (stateful=None keeps its setting)
        with torch.no_grad():
            model(model.token_ids([["the", "bank"], ["a"]]))
        carried = [(c.clone(), h.clone()) for c, h in model.get_states()]
        if case.options["stateful"] and not case.cli:   # (the CLI loads the model anew)
            case.options["stateful"] = None
    out = run_embed_file(case, model, tmp_path, monkeypatch)
    if case.options["stateful"] is None:
        case.options["stateful"] = True
    assert model.training == training and model.stateful == (carried is not None)
    for (c0, h0), (c1, h1) in zip(carried or [], model.get_states() or []):
        assert torch.equal(c0, c1) and torch.equal(h0, h1)
    assert (carried is None) == (model.get_states() is None)
    check_file(case, out, truth_model)
    if case.world_size > 1 or case.interrupt_at is not None:
        # documented: bit-identical to one uninterrupted process (same thread count, same machine)
        kwargs = dict(case.options, layers=case.layers, overwrite=False)
        single = embed_file(tmp_path / "in.txt", tmp_path / "single.hdf5", model, **kwargs)
        with h5py.File(out, "r") as a, h5py.File(single, "r") as b:
            names: List[str] = []
            a.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
            for name in names:
                assert np.array_equal(a[name][()], b[name][()]), f"{name}: not bit-identical"


#: Seeds whose draws between them cover every option: stateful runs with windows (2, 35), a
#: model carrying a state (2, 12, 32, 47, 77), ranks with an interruption (0, 18, 32, 47, 49,
#: 77), --print-config/--config (12, 32, 49, 77), "/" in sentence keys (1, 18, 49), a ScalarMix
#: (1, 2, 12, 18, 49), lines over 256 tokens (12, 36, 80), float16 windows (1, 12, 80), a
#: byte-order mark (18).
FILE_SEEDS = [0, 1, 2, 12, 18, 32, 35, 36, 47, 49, 77, 80]


@pytest.mark.parametrize("seed", FILE_SEEDS)
def test_embed_file_equals_each_sentence_alone(seed, tmp_path, monkeypatch):
    run_file_case(seed, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(set(range(400)) - set(FILE_SEEDS)))
def test_embed_file_equals_each_sentence_alone_sweep(seed, tmp_path, monkeypatch):
    run_file_case(seed, tmp_path, monkeypatch)


def test_every_token_keeps_half_the_overlap_of_context_each_side():
    """The README's promise for windows, on every small case: a token's window gives it at
    least overlap // 2 tokens of context on each side, or all the sentence has."""
    for n in range(0, 50):
        for max_tokens in range(1, 17):
            for overlap in range(max_tokens):
                spans = owners(n, max_tokens, overlap)
                for i, (start, stop) in enumerate(spans):
                    assert stop - start <= max_tokens
                    assert i - start >= min(overlap // 2, i)
                    assert stop - 1 - i >= min(overlap // 2, n - 1 - i)


# ---------------------------------------------------------------------- Embedder and ElmoEmbedder
def draw_sentences(rng: random.Random) -> List[List[str]]:
    sentences: List[List[str]] = []
    for _ in range(rng.randint(1, 12)):
        sentences.append(list(rng.choice(sentences)) if sentences and rng.random() < 0.15
                         else draw_sentence(rng, 60))
    return sentences


def run_embedder_case(seed: int) -> None:
    """``Embedder.embed_sentences`` (stateless, or stateful over two calls) against the truth."""
    rng = random.Random(seed)
    model = draw_model(seed)
    truth_model = copy.deepcopy(model)
    model.lstm.dropout = 0.5
    model.train(rng.random() < 0.3)
    sentences = draw_sentences(rng)
    max_tokens = rng.choice([256, rng.randint(1, 30)])
    overlap = rng.randint(0, max_tokens - 1)
    batch_size = rng.choice([1, 2, 4, 64])
    stateful = rng.random() < 0.3
    model.stateful = stateful
    embedder = Embedder(model, batch_size=batch_size, max_tokens=max_tokens, overlap=overlap,
                        sort_by_length=rng.random() < 0.7)
    if rng.random() < 0.5:
        embedder.build_token_cache(sentences, min_count=rng.choice([1, 2]))
    kind = rng.choice(["all", "top", "average", "mix"])
    weights = tuple(round(rng.uniform(-1, 2), 3) for _ in range(model.num_layers)) if kind == "mix" else None
    layers = "mix:" + ",".join(map(str, weights)) if kind == "mix" else kind
    dtype = rng.choice(["float32", "float16"])
    calls = [sentences, draw_sentences(rng)] if stateful else [sentences]
    if stateful:    # the carried state goes on from one call to the next
        want = _stateful_calls(truth_model, calls, max_tokens, overlap, batch_size)
        expected = [want[:len(calls[0])], want[len(calls[0]):]]
    else:
        expected = [[stateless_truth(truth_model, s, max_tokens, overlap) for s in sentences]]
    for call, wanted in zip(calls, expected):
        got = embedder.embed_sentences(call, layers=layers, dtype=dtype)
        assert len(got) == len(call)
        for i, (array, truth) in enumerate(zip(got, wanted)):
            assert_close(array, select(truth, kind, weights), dtype, f"sentence {i} ({len(call[i])} tokens)",
                         magnitude(truth, weights))
    if not stateful:   # Embedder.run: every token of every sentence in exactly one piece
        covered = [np.zeros(len(x), dtype=int) for x in sentences]
        for batch in embedder.run(sentences, layers=layers, dtype=dtype):
            assert 0 < len(batch) <= batch_size
            for piece in batch:
                covered[piece.sentence][piece.offset:piece.offset + piece.vectors.shape[1]] += 1
        assert all((c == 1).all() for c in covered)
    if not stateful and kind != "all":   # one vector a sentence: the pooled truth
        pooling = rng.choice(["mean", "max"])
        got = sentence_vectors(embedder, sentences, layers=layers, pooling=pooling)
        for i, truth in enumerate(expected[0]):
            vectors = select(truth, kind, weights)
            want = (np.zeros(model.output_dim) if not len(vectors) else
                    vectors.mean(axis=0) if pooling == "mean" else vectors.max(axis=0))
            assert_close(got[i], want, np.float32, f"sentence_vectors {pooling} of sentence {i}",
                         magnitude(truth, weights))


def _stateful_calls(model, calls, max_tokens, overlap, batch_size) -> List[np.ndarray]:
    """The truth of stateful calls made one after another: every call's pieces fill rows from
    row 0 again, each row going on from the state it ended the calls before with."""
    rows: Dict[int, list] = {}
    out = []
    for sentences in calls:
        k = 0
        for tokens in sentences:
            j = len(out)
            out.append(np.zeros((model.num_layers, len(tokens), model.output_dim)))
            for start, stop, kept in pieces_of(len(tokens), max_tokens, overlap):
                rows.setdefault(k % batch_size, []).append((j, tokens, start, stop, kept))
                k += 1
    for row in rows.values():
        replay = copy.deepcopy(model)
        replay.stateful = True
        replay.reset_states()
        for j, tokens, start, stop, kept in row:
            if stop > start:
                layers = truth_layers(replay, tokens[start:stop])
                for i in kept:
                    out[j][:, i] = layers[:, i - start]
    return out


#: Stateless seeds, and stateful ones with windows in batches of 2 and 4 (9, 14, 30).
EMBEDDER_SEEDS = [0, 1, 2, 3, 5, 9, 14, 30]


@pytest.mark.parametrize("seed", EMBEDDER_SEEDS)
def test_embedder_equals_each_sentence_alone(seed):
    run_embedder_case(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(set(range(300)) - set(EMBEDDER_SEEDS)))
def test_embedder_equals_each_sentence_alone_sweep(seed):
    run_embedder_case(seed)


def run_allennlp_case(seed: int, tmp_path) -> None:
    """``ElmoEmbedder``: embed_sentence, embed_batch, embed_sentences and embed_file, (L + 1, n, D)
    arrays (or a selection in the file) against the truth; stateful, embed_batch runs every
    sentence whole in one call, row b going on from row b of the call before."""
    rng = random.Random(seed)
    model = draw_model(seed)
    truth_model = copy.deepcopy(model)
    model.lstm.dropout = 0.5
    model.train(rng.random() < 0.3)
    stateful = rng.random() < 0.35
    max_tokens = rng.choice([256, rng.randint(1, 30)])
    overlap = rng.randint(0, max_tokens - 1)
    ee = ElmoEmbedder(model=model, stateful=stateful, max_tokens=max_tokens, overlap=overlap)
    batches = [draw_sentences(rng) for _ in range(2)]
    whole = 10 ** 9
    chunk = rng.choice([1, 2, 5])
    # the calls made, in order: embed_batch twice, embed_sentence, embed_sentences in chunks
    calls = batches + [[batches[0][0]]] + [batches[1][i:i + chunk] for i in range(0, len(batches[1]), chunk)]
    if stateful:
        flat = _stateful_calls(truth_model, calls, whole, 0, 10 ** 6)
    else:
        flat = [stateless_truth(truth_model, s, max_tokens, overlap) for call in calls for s in call]
    n0, n1 = len(batches[0]), len(batches[1])
    for i, (array, truth) in enumerate(zip(ee.embed_batch(batches[0]), flat[:n0], strict=True)):
        assert_close(array, truth, np.float32, f"embed_batch sentence {i} ({len(batches[0][i])} tokens)")
    for i, (array, truth) in enumerate(zip(ee.embed_batch(batches[1]), flat[n0:n0 + n1], strict=True)):
        assert_close(array, truth, np.float32, f"second embed_batch sentence {i} ({len(batches[1][i])} tokens)")
    assert_close(ee.embed_sentence(batches[0][0]), flat[n0 + n1], np.float32, "embed_sentence")
    lazily = list(ee.embed_sentences(iter(batches[1]), batch_size=chunk))
    for i, (array, truth) in enumerate(zip(lazily, flat[n0 + n1 + 1:], strict=True)):
        assert_close(array, truth, np.float32, f"embed_sentences sentence {i}")
    if not stateful:   # batch_to_embeddings: one call, padded with zeros, a long 0/1 mask
        batch = [s for s in batches[0] if len(s) <= max_tokens] or [["a"]]
        acts, mask = ee.batch_to_embeddings(batch)
        longest = max(len(s) for s in batch)
        assert acts.shape == (len(batch), model.num_layers, longest, model.output_dim) and mask.dtype == torch.long
        for b, sentence in enumerate(batch):
            assert mask[b].tolist() == [1] * len(sentence) + [0] * (longest - len(sentence))
            assert_close(acts[b, :, :len(sentence)].numpy(), truth_layers(truth_model, sentence), np.float32,
                         f"batch_to_embeddings row {b}")
            assert not acts[b, :, len(sentence):].any()
    # embed_file: every line in a file, from the state the model carried before (given back after)
    lines = [" ".join(s) for s in batches[0]]
    keys = seed % 4 == 3   # sentence keys: lines that can each name a dataset (no "/" groups here)
    if keys:
        lines = list(dict.fromkeys(x for x in lines if x and x != "." and "/" not in x and "\0" not in x))
        lines = lines or ["only one"]
    inp = tmp_path / "in.txt"
    inp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    fmt = rng.choice(["all", "top", "average"])
    batch_size = rng.choice([1, 2, 3, 64])
    before = model.get_states()
    out = tmp_path / "out.hdf5"
    forget = rng.random() < 0.3
    sentences = [line.strip() for line in lines]
    options = dict(output_format=fmt, batch_size=batch_size, forget_sentences=forget, use_sentence_keys=keys)
    if rng.random() < 0.5:
        ee.embed_file(str(inp), out, **options)
    elif rng.random() < 0.5:
        ee.embed_file(open(inp, "rb"), out, **options)
    elif any("\r" in line for line in lines):
        # open()'s text mode ends a line at a lone "\r": refused, not numbered otherwise
        with pytest.raises(InputError, match="newline=''"):
            ee.embed_file(open(inp, encoding="utf-8"), out, **options)
        assert not out.exists()
        ee.embed_file(open(inp, encoding="utf-8", newline=""), out, **options)
    else:
        ee.embed_file(open(inp, encoding="utf-8"), out, **options)
    after = model.get_states()   # the state carried before the file, given back
    assert (before is None) == (after is None)
    for (c0, h0), (c1, h1) in zip(before or [], after or []):
        assert torch.equal(c0, c1) and torch.equal(h0, h1)
    tokens = [line.split() for line in lines]
    if stateful:
        layers = stateful_truth(truth_model, tokens, whole, 0, batch_size)
    else:
        layers = [stateless_truth(truth_model, t, max_tokens, overlap) for t in tokens]
    names = sentences if keys else [str(i) for i in range(len(lines))]
    with h5py.File(out, "r") as f:
        assert sorted(f) == sorted(names + ([] if forget or keys else ["sentence_to_index"]))
        if not forget and not keys:
            assert json.loads(f["sentence_to_index"][0]) == {x: str(i) for i, x in enumerate(sentences)}
        for i, (name, truth) in enumerate(zip(names, layers)):
            assert_close(f[name][()], select(truth, fmt), np.float32, f"embed_file line {i}")


#: Stateless seeds, and stateful ones with lines longer than max_tokens (26: 7, 32: 256).
ALLENNLP_SEEDS = [0, 1, 2, 3, 4, 5, 26, 32]


@pytest.mark.parametrize("seed", ALLENNLP_SEEDS)
def test_allennlp_embedder_equals_each_sentence_alone(seed, tmp_path):
    run_allennlp_case(seed, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", sorted(set(range(300)) - set(ALLENNLP_SEEDS)))
def test_allennlp_embedder_equals_each_sentence_alone_sweep(seed, tmp_path):
    run_allennlp_case(seed, tmp_path)


def test_an_open_text_file_with_a_lone_cr_is_refused_not_numbered_otherwise(tmp_path):
    """ElmoEmbedder.embed_file(open(path)): text mode handed over a lone "\\r" as "\\n", so
    the file's line 2 ("e f") was dataset "2" and "1" held half of line 1, where the path gives
    "1" to "e f" (lines end at "\\n" only). Now that is an error naming the way out."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"a b\rc d\ne f\n")
    model = random_bilm(seed=1)
    ee = ElmoEmbedder(model=model)
    ee.embed_file(str(path), tmp_path / "by_path.hdf5")
    with pytest.raises(InputError, match="newline=''"):
        ee.embed_file(open(path, encoding="utf-8"), tmp_path / "text.hdf5")
    assert not (tmp_path / "text.hdf5").exists()
    for i, handle in enumerate([open(path, encoding="utf-8", newline=""), open(path, "rb")]):
        ee.embed_file(handle, tmp_path / f"{i}.hdf5")
        with h5py.File(tmp_path / f"{i}.hdf5", "r") as f, h5py.File(tmp_path / "by_path.hdf5", "r") as g:
            assert sorted(f) == sorted(g) == ["0", "1", "sentence_to_index"]
            assert json.loads(f["sentence_to_index"][0]) == {"a b\rc d": "0", "e f": "1"}
            for name in ("0", "1"):
                assert np.array_equal(f[name][()], g[name][()])
    # "\r\n" line ends, translated too, change no line: still accepted
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"a b\r\nc d\r\n")
    ee.embed_file(open(crlf, encoding="utf-8"), tmp_path / "crlf.hdf5")
    with h5py.File(tmp_path / "crlf.hdf5", "r") as f:
        assert json.loads(f["sentence_to_index"][0]) == {"a b": "0", "c d": "1"}
