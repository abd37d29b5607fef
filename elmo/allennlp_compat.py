"""AllenNLP's other ELMo entry points, on this library's model.

    from elmo import ElmoEmbedder, ElmoTokenEmbedder

    embedder = ElmoEmbedder(options_file, weight_file)           # AllenNLP 0.9's commands.elmo
    vectors = embedder.embed_sentence(["The", "bank", "."])      # numpy (L + 1, 3, D)
    embedder.embed_file("sentences.txt", "vectors.hdf5", output_format="top")

    token_embedder = ElmoTokenEmbedder(options_file, weight_file, projection_dim=64)
    reps = token_embedder(batch_to_ids(sentences))                # (B, T, 64)

Both keep AllenNLP's argument names and outputs. The differences (stateless by default, the
bundled model as the default, windows for very long sentences, empty lines allowed) are listed
in the README ("Differences from AllenNLP"). Nothing here is new computation:
:class:`ElmoEmbedder` runs :class:`elmo.Embedder` and :func:`elmo.embed_file`, and
:class:`ElmoTokenEmbedder` is an :class:`elmo.Elmo` with one mix and an optional projection.
"""
from __future__ import annotations

import copy
import os
import shutil
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import torch
from torch import nn

from .embedding import Embedder, InputError, embed_file
from .embedding.embedder import DEFAULT_BATCH_SIZE
from .embedding.output import NonFiniteOutput
from .embedding.windows import DEFAULT_MAX_TOKENS
from .checks import integer_or_none, require_count, require_path, require_switch, shown
from .chars import check_sentence, check_tokenized, tokenized
from .io import OutputError, no_empty_folder_on_failure, temporary_folder
from .output_checks import check_output_file, writing
from .output_lock import output_lock
from .modules import BiLM, Elmo
from .modules.bilm import stateful_calls
from .modules.dropout_off import dropout_off

#: What ``embed_file``'s ``output_format`` may be, as in AllenNLP.
OUTPUT_FORMATS = ("all", "top", "average")

#: Characters (or bytes) of an open file read at a time by :meth:`ElmoEmbedder.embed_file`.
COPY_CHUNK = 1 << 20

#: The ``max_tokens`` of a stateful :meth:`ElmoEmbedder.embed_file`: no line is cut into windows.
WHOLE_SENTENCES = 2 ** 31 - 1


class ElmoTokenEmbedder(nn.Module):
    """AllenNLP's ``ElmoTokenEmbedder``: one ELMo mix per token, optionally projected.

    Args:
        options_file, weight_file: the original options.json and HDF5 weights (or pass a
            loaded BiLM as ``module=`` and leave both None).
        do_layer_norm, dropout, requires_grad, vocab_to_cache, scalar_mix_parameters: as for
            :class:`elmo.Elmo` (fixed ``scalar_mix_parameters`` are not trained, nor is gamma).
        projection_dim: if given, a trainable linear layer maps each vector to this width.
        module, stateful: passed to :class:`elmo.Elmo` (not in AllenNLP's signature); stateful
            None keeps a given ``module``'s own setting.
    """

    def __init__(self, options_file: Optional[str] = None, weight_file: Optional[str] = None,
                 do_layer_norm: bool = False, dropout: float = 0.5, requires_grad: bool = False,
                 projection_dim: Optional[int] = None, vocab_to_cache: Optional[Sequence[str]] = None,
                 scalar_mix_parameters: Optional[Sequence[float]] = None, *,
                 module: Optional[BiLM] = None, stateful: Optional[bool] = None):
        super().__init__()
        self._elmo = Elmo(options_file, weight_file, 1, requires_grad=requires_grad,
                          do_layer_norm=do_layer_norm, dropout=dropout, vocab_to_cache=vocab_to_cache,
                          scalar_mix_parameters=scalar_mix_parameters, module=module, stateful=stateful)
        if projection_dim is not None:
            projection_dim = require_count("projection_dim", projection_dim)  # 2.5 fails deep in nn.Linear
        self._projection = (nn.Linear(self._elmo.get_output_dim(), projection_dim)
                            if projection_dim is not None else None)
        self.output_dim = projection_dim if projection_dim is not None else self._elmo.get_output_dim()

    @property
    def elmo(self) -> Elmo:
        return self._elmo

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(self, elmo_tokens: torch.Tensor, word_inputs: Optional[torch.Tensor] = None) -> torch.Tensor:
        """elmo_tokens: (..., T, C) character ids; word_inputs: optional (..., T) word ids
        (checked for shape, values unused: see :meth:`elmo.Elmo.forward`).

        Returns (..., T, output_dim): the mix after dropout, projected if ``projection_dim``.
        The mix has the biLM's dtype; projected, it has the projection's (float32 unless
        converted), whatever the biLM's: a bfloat16 or float16 biLM feeds a float32 layer.
        """
        vectors = self._elmo(elmo_tokens, word_inputs)["elmo_representations"][0]
        if self._projection is not None:  # nn.Linear acts on the last dim of any shape
            # (a biLM loaded in another dtype than the layer's failed inside nn.Linear: "mat1 and
            # mat2 must have the same dtype"); the layer keeps its own, float32 to be trained
            vectors = self._projection(vectors.to(self._projection.weight.dtype))
        return vectors

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward


class ElmoEmbedder:
    """AllenNLP 0.9's ``ElmoEmbedder`` (``allennlp.commands.elmo``): sentences to numpy arrays.

    Every sentence gives (L + 1, n_tokens, D): layer 0 the token vector twice, then each
    LSTM layer's [forward; backward] (3 layers of 1024 for the original model).

    Args:
        options_file, weight_file: the original options.json and HDF5 weights. Both None (the
            default) loads the bundled ``default`` model; AllenNLP downloaded its original one.
        cuda_device: GPU index, or -1 for the CPU.
        model: instead of the two files, a :class:`~elmo.BiLM`, a bundled model name or a
            model folder.
        stateful: carry each batch row's LSTM state into the next call like AllenNLP did
            (its vectors then depend on what was embedded before). Default: stateless, so a
            sentence always gets the same vectors; None keeps a given ``model``'s own setting.
        max_tokens, overlap: sentences longer than ``max_tokens`` run as overlapping windows
            (see :mod:`elmo.embedding.windows`; overlap None is ``min(64, max_tokens // 2)``);
            AllenNLP always ran them whole, as :meth:`embed_batch` and :meth:`embed_file` do
            in stateful mode.
    """

    def __init__(self, options_file: Optional[str] = None, weight_file: Optional[str] = None,
                 cuda_device: int = -1, *, model: Union[BiLM, str, Path, None] = None,
                 stateful: Optional[bool] = None, max_tokens: int = DEFAULT_MAX_TOKENS,
                 overlap: Optional[int] = None):
        if integer_or_none(cuda_device) is None:
            raise TypeError(f"cuda_device must be a GPU index or -1 for the CPU, got {cuda_device!r}")
        cuda_device = int(cuda_device)
        if cuda_device >= 0 and cuda_device >= torch.cuda.device_count():
            raise ValueError(f"cuda_device={cuda_device}, but this machine has "
                             f"{torch.cuda.device_count()} CUDA devices (use -1 for the CPU)")
        device = torch.device("cpu") if cuda_device < 0 else torch.device("cuda", cuda_device)
        given_files = options_file is not None or weight_file is not None
        if model is not None and given_files:
            raise ValueError("pass either model= or options_file/weight_file, not both")
        if given_files:
            if options_file is None or weight_file is None:
                raise ValueError("pass both options_file and weight_file (or neither, for the "
                                 "bundled default model)")
            # Through Elmo, so that the two strings are resolved as Elmo(options_file, weight_file) does.
            model = Elmo(options_file, weight_file, 0, stateful=stateful).bilm
        elif not isinstance(model, BiLM):
            from . import DEFAULT_MODEL, from_pretrained
            model = from_pretrained(model if model is not None else DEFAULT_MODEL)
        if stateful is not None:  # None: a given BiLM keeps its own setting (a loaded one is stateless)
            model.stateful = stateful
        # not .eval(): a given model keeps its mode (each call runs without dropout, as Embedder's)
        self.elmo_bilm: BiLM = model.to(device)
        self.cuda_device = cuda_device
        # One biLM call per batch (a copy with batch_size set per call), as AllenNLP's embed_batch.
        self._embedder = Embedder(self.elmo_bilm, max_tokens=max_tokens, overlap=overlap)

    @property
    def device(self) -> torch.device:
        return next(self.elmo_bilm.parameters()).device

    def batch_to_embeddings(self, batch: List[List[str]]) -> Tuple[torch.Tensor, torch.Tensor]:
        """One biLM call on ``batch`` (no windows): activations (B, L + 1, T, D) and mask (B, T).

        The mask is a long tensor of 0 and 1, as AllenNLP 0.9 gave it (code written for it does
        ``1 - mask``, which a bool mask refuses); to select tokens with it, index with
        ``mask.bool()`` (a long mask indexes rows 0 and 1 instead)."""
        _check_batch(batch, "batch_to_embeddings")
        ids = self.elmo_bilm.token_ids(batch)       # the model's own ids (batch_to_ids for bytes)
        with torch.no_grad(), stateful_calls(self.elmo_bilm), dropout_off():
            out = self.elmo_bilm(ids.to(self.device))
        return torch.stack(out["activations"], dim=1), out["mask"].long()

    def embed_sentence(self, sentence: List[str]) -> np.ndarray:
        """One tokenized sentence -> float32 (L + 1, n_tokens, D)."""
        if isinstance(sentence, str):
            raise TypeError("expected a tokenized sentence (a list of strings), got a string; "
                            "split it first, e.g. sentence.split()")
        # (its errors named embed_batch and a "sentence 0")
        check_sentence(sentence, "ElmoEmbedder.embed_sentence", "embed_batch")
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> List[np.ndarray]:
        """Tokenized sentences -> one float32 (L + 1, n_tokens, D) each, in input order (an
        empty sentence gives (L + 1, 0, D)). Stateless (the default), the batch is one biLM
        call sorted by length, sentences longer than ``max_tokens`` as windows. In stateful
        mode it is one biLM call in input order with every sentence whole, so that row b
        carries its state to row b of the next call, as in AllenNLP."""
        _check_batch(batch, "embed_batch")
        if len(batch) == 0:   # (not "not batch": a numpy array of rows has no truth value)
            return []
        if self.elmo_bilm.stateful:
            # Windows would be rows of their own: a long sentence's pieces moved the sentences
            # after it to other rows and calls, each starting from a window's state
            longest = max(1, max(len(sentence) for sentence in batch))
            whole = Embedder(self.elmo_bilm, batch_size=len(batch), max_tokens=longest, overlap=0)
            return whole.embed_sentences(batch, layers="all")
        # a copy sized to this batch: setting the shared Embedder's batch_size let a call from
        # another thread, between the setting and the planning, split this batch into calls
        embedder = copy.copy(self._embedder)
        embedder.batch_size = len(batch)
        return embedder.embed_sentences(batch, layers="all")

    def embed_sentences(self, sentences: Iterable[Sequence[str]],
                        batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[np.ndarray]:
        """Lazily embed an iterable of tokenized sentences, ``batch_size`` at a time; yields one
        float32 array (L + 1, n_tokens, D) per sentence, in order (see :meth:`embed_batch`)."""
        batch_size = require_count("batch_size", batch_size)
        # (checked here, so that an error counts the sentences from the start, not the batch's)
        it = tokenized(sentences, "ElmoEmbedder.embed_sentences")
        while True:
            batch = list(islice(it, batch_size))
            if not batch:
                return
            yield from self.embed_batch(batch)

    def embed_file(self, input_file: Union[str, os.PathLike, IO], output_file_path: Union[str, os.PathLike],
                   output_format: str = "all", batch_size: int = DEFAULT_BATCH_SIZE,
                   forget_sentences: bool = False, use_sentence_keys: bool = False) -> None:
        """Embed every line (split on whitespace) into an HDF5 file in AllenNLP's layout.

        Datasets ``"0"``, ``"1"``, ... by line, each (L + 1, n, D) for ``all`` or (n, D) for
        ``top`` / ``average``; the ``sentence_to_index`` JSON dataset unless
        ``forget_sentences``; with ``use_sentence_keys`` datasets are named by sentence (they
        must be unique). ``input_file`` is a path or an open file (closed afterwards, as in
        AllenNLP; an output another process is writing is refused, :class:`elmo.io.OutputBusy`,
        before the file is read, so a stream such as stdin is still whole); lines end at ``"\\n"`` only, so a text-mode file that turned a lone ``"\\r"``
        into a line end is an InputError (open it with ``newline=""`` or ``"rb"``), and so are
        the bytes a handle with ``errors="surrogateescape"`` could not decode. The output
        is replaced if it exists (not the input file, path or open file: an OutputError) and
        written atomically; the run is :func:`elmo.embed_file`
        (its other features, such as resuming, are there).
        """
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"output_format must be one of {', '.join(OUTPUT_FORMATS)}; "
                             f"got {output_format!r}")
        batch_size = require_count("batch_size", batch_size)
        # (both before a handle is read: a wrong one was a bare AttributeError or pathlib's
        # TypeError, and a wrong output named embed_file's output_path)
        output_file_path = require_path("output_file_path", output_file_path)
        _require_input(input_file)
        # (embed_file's own check came after an open file was read and closed, naming sentence_keys)
        forget_sentences = require_switch("forget_sentences", forget_sentences)
        use_sentence_keys = require_switch("use_sentence_keys", use_sentence_keys)
        # Stateful, every line runs whole, as in embed_batch: a long line's windows took rows
        # of their own and moved the lines after it to other rows
        max_tokens = WHOLE_SENTENCES if self.elmo_bilm.stateful else self._embedder.max_tokens
        kwargs: Dict[str, Any] = dict(layers=output_format, batch_size=batch_size, forget_sentences=forget_sentences,
                      sentence_keys=use_sentence_keys, max_tokens=max_tokens,
                      overlap=self._embedder.overlap, stateful=self.elmo_bilm.stateful,
                      device=self.device, overwrite=True,
                      command_line="ElmoEmbedder.embed_file")
        if isinstance(input_file, (str, os.PathLike)):
            try:
                # (embed_file takes any str or os.PathLike, through require_path; its
                # annotation names only str and Path)
                embed_file(cast(Union[str, Path], input_file), cast(Union[str, Path], output_file_path),
                           self.elmo_bilm, **kwargs)
            except InputError as e:
                raise type(e)(python_spelling(str(e))) from None
            return
        self._embed_handle(input_file, Path(output_file_path), kwargs)

    def _embed_handle(self, input_file: IO, output: Path, kwargs: Dict[str, Any]) -> None:
        """:meth:`embed_file` of an open file: its text is copied next to the output, so that
        :func:`elmo.embed_file` can index it."""
        source = str(getattr(input_file, "name", None) or f"the {type(input_file).__name__} given")
        if _reads_from(input_file, output):
            # (as for a path: the text was read, then replaced by the vectors, and lost)
            raise OutputError(f"{output}: is the input file; write the vectors to another file")
        # The output's checks come first, as for a path (a folder that is a file was a bare
        # FileExistsError), and the folder is made, as embed_file makes it for a path (mkstemp
        # into a folder not there yet raised FileNotFoundError naming the temporary file); it
        # is removed again if the run fails and it holds nothing.
        check_output_file(output, "output")
        out_dir = output.resolve().parent
        # The output's lock is taken before the handle is read: an output another process
        # writes was refused (OutputBusy) only after a stream such as stdin was read and closed,
        # and its text was lost. embed_file's own lock of the output is this one (reentrant).
        with no_empty_folder_on_failure(out_dir), output_lock(output, reentrant=True):
            try:
                with writing(output, "copy of the input text (beside the output)"):
                    out_dir.mkdir(parents=True, exist_ok=True)
                    # named for this process and output: a killed run's copy (the whole text) was
                    # left for ever; the next run for this output deletes it
                    folder = temporary_folder(out_dir / output.name, ".input")
            except BaseException:
                input_file.close()   # (as AllenNLP closes it, read or not)
                raise
            tmp = str(folder / "input.txt")
            try:
                with writing(output, "copy of the input text (beside the output)"), open(tmp, "wb") as f:
                    self._copy_handle(input_file, source, f)
                embed_file(tmp, output, self.elmo_bilm, **kwargs)
            except (InputError, NonFiniteOutput) as e:
                # (they named the line in the temporary copy, deleted by now)
                raise type(e)(python_spelling(str(e).replace(tmp, source))) from None
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    @staticmethod
    def _copy_handle(input_file: IO, source: str, out: IO[bytes]) -> None:
        """Copy the open file ``input_file`` (``source`` in messages) into ``out`` as UTF-8,
        :data:`COPY_CHUNK` characters or bytes at a time, and close it. (It was read whole
        into memory first, and a text handle's str encoded whole beside it: a large stdin
        took several times its size.)"""
        text = kept_cr = False
        lines = 0
        try:
            while chunk := input_file.read(COPY_CHUNK):
                if isinstance(chunk, str):
                    text, kept_cr = True, kept_cr or "\r" in chunk
                    out.write(_text_bytes(chunk, source, lines))
                    lines += chunk.count("\n")
                else:
                    out.write(chunk)
            # A file opened in text mode with universal newlines (open()'s default) hands over
            # its lone "\r" as "\n": every line after one got the next line's number (a
            # dataset "2" for the file's line 2), where a path ends lines at "\n" only
            translated = _translated_newlines(input_file) if text and not kept_cr else ()
        finally:
            input_file.close()
        if "\r" in translated:
            raise InputError(f"{source}: opened in text mode, which ends a line at a lone '\\r' "
                             f"(here lines end at '\\n' only); open it with newline='' or 'rb', "
                             f"or pass its path")


#: The command-line spellings in :func:`elmo.embed_file`'s input errors, and what a caller of
#: :meth:`ElmoEmbedder.embed_file` passes instead (it has no ``errors``, and always overwrites).
_PYTHON_SPELLINGS = (
    ("drop --sentence-keys", "pass use_sentence_keys=False"),
    ("--sentence-keys", "use_sentence_keys=True"),
    ("pass --errors replace to replace such bytes with U+FFFD",
     "elmo.embed_file(..., errors='replace') replaces such bytes with U+FFFD"),
    ("run again with --overwrite", "run again"),
)


def python_spelling(message: str) -> str:
    """``message`` with the options of ``elmo embed`` it names spelled as the parameters of
    :meth:`ElmoEmbedder.embed_file`: its caller passed ``use_sentence_keys``, not
    ``--sentence-keys``."""
    for cli, python in _PYTHON_SPELLINGS:
        message = message.replace(cli, python)
    return message


def _translated_newlines(handle) -> Tuple[str, ...]:
    """The line ends that text handle ``handle`` turned into ``"\\n"`` while it was read,
    which kept no ``"\\r"`` in its text (so none with ``newline=""``, which keeps every one):
    those it saw (``newlines``: None, one string or a tuple)."""
    seen = getattr(handle, "newlines", None)
    if isinstance(seen, str):
        return (seen,)
    return tuple(seen) if isinstance(seen, tuple) else ()


def _require_input(input_file) -> None:
    """Refuse an ``input_file`` of :meth:`ElmoEmbedder.embed_file` that is neither a path
    nor a file open for reading (a list of lines, bytes, None ...), naming it."""
    if isinstance(input_file, (str, os.PathLike)) or callable(getattr(input_file, "read", None)):
        return
    raise TypeError(f"input_file must be a path (a string or os.PathLike) or a file open for "
                    f"reading, got {type(input_file).__name__}: {shown(input_file)}")


def _text_bytes(text: str, source: str, lines_before: int = 0) -> bytes:
    """The UTF-8 bytes of ``text``, read from the text handle ``source`` after
    ``lines_before`` line ends.

    A handle opened with ``errors="surrogateescape"`` (``sys.stdin``'s under a POSIX locale)
    holds each byte it could not decode as a lone surrogate: they become those bytes again,
    so the run names them as for a path (line, byte offset). Any other lone surrogate has no
    UTF-8 encoding (it was a bare UnicodeEncodeError): an InputError naming its line."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        line = lines_before + text.count("\n", 0, e.start) + 1
        raise InputError(f"{source}: line {line}: character U+{ord(text[e.start]):04X} is a lone "
                         f"surrogate, which UTF-8 cannot encode; fix the text or pass the "
                         f"file's path") from None


def _reads_from(handle, path: Path) -> bool:
    """Whether the open file ``handle`` reads the file at ``path`` (by device and inode, so a
    link or another name for it counts); False for a handle without a file (``io.StringIO``)."""
    try:
        opened = os.fstat(handle.fileno())
        there = os.stat(path)
    except (AttributeError, OSError, ValueError):  # (no fileno, not a file, no such path)
        return False
    return (opened.st_dev, opened.st_ino) == (there.st_dev, there.st_ino)


def _check_batch(batch, caller: str) -> None:
    """A clear error for what is not a list of token lists: a string (the usual mistake), a
    generator (used up by a check, then "has no len()"), a dict, None, a sentence that is a
    string or a set. (A numpy array of rows passes, as a list would.)"""
    if isinstance(batch, str):
        raise TypeError("expected tokenized sentences (lists of strings), got a string; "
                        "split it first, e.g. sentence.split()")
    check_tokenized(batch, f"ElmoEmbedder.{caller}")
