"""``embed_file``: a text file in, one HDF5 file of vectors out; resumable and shardable.

The run, for each process (rank r of W; a single process is rank 0 of 1):

  1. read the input once (:func:`~elmo.embedding.reader.index_input`): segment offsets,
     encoding check, content digest;
  2. if OUTPUT already exists with the same settings, stop: the job is done;
  3. take the segments k with k % W == r; skip those already complete in ``OUTPUT.parts/``
     (written by an earlier, killed run with the same settings);
  4. optionally cache the character-CNN vectors of the frequent words of the first lines;
  5. embed each remaining segment and write it as a segment file (atomically);
  6. rank 0 then waits for every segment, merges them in line order into OUTPUT (atomically)
     and deletes ``OUTPUT.parts/``.

Because a segment's batches depend only on its own lines (and, when stateful, the state is reset
at the start of each segment), the result does not depend on the number of ranks or on where
a run was interrupted.
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ..checks import require_count, require_path, require_switch
from ..folder_checksums import file_identity
from ..io import atomic_write_text, no_empty_folder_on_failure, remove_temporaries
from ..model_digest import model_digest, recorded_digest
from ..output_checks import check_output_dir, check_output_file, refuse_replacing_inputs, writing
from ..output_lock import output_lock
from ..modules import BiLM
from ..modules.autocast import autocast_dtype
from .config import EmbedConfig
from .embedder import Embedder, output_dtype
from .layers import LayerSelection
from .output import (NonFiniteOutput, SegmentWriter, SettingsMismatch, differing_settings, merge_segments,
                     output_complete, parts_dir, recorded_model_digests, recorded_settings, remove_parts, same_settings,
                     segment_done, segment_path, segment_ready, value_settings)
from .reader import index_input, indexed_sentences, read_segment, read_sentences, split_tokens
from ..runtime import launch_env, resolve_device
from ..shell import shell_join
from .. import tokenize as tokenizer
from ..tokenize import get_tokenizer

FORMAT_VERSION = 1


def distributed_rank() -> tuple[int, int, int]:
    """(rank, world size, local rank) from the environment torchrun sets; (0, 1, 0) otherwise."""
    return launch_env()


def model_precision(bilm: BiLM) -> str:
    """The precision the model computes its vectors in, as the output records it: its weights'
    dtype ("float32", "bfloat16", ...), then ", int8 recurrent weights" where
    :meth:`~elmo.modules.lstm.BiLSTMStack.use_int8` is on and ", bfloat16 autocast" (the
    autocast dtype) where this thread runs under autocast on the model's device.

    The model digest sees the weights' dtype but neither of the others: an int8 run, or one
    under autocast, finished or resumed a float32 run's output (or segments) as its own."""
    weights = next(bilm.parameters())
    parts = [str(weights.dtype).replace("torch.", "")]
    if bilm.lstm.int8_enabled:
        parts.append("int8 recurrent weights")
    cast = autocast_dtype(weights.device.type)
    if cast is not None:
        parts.append(f"{str(cast).replace('torch.', '')} autocast")
    return ", ".join(parts)


def _digest_to_record(bilm: BiLM, output_path: Path, overwrite: bool) -> str:
    """The model digest of this run: :func:`~elmo.model_digest.model_digest`, unless OUTPUT
    or its segments were written by an earlier version, whose digest had another form
    (:func:`~elmo.model_digest.legacy_embed_digest`), and that digest is this model's: then the
    run keeps it, so the same command resumes those segments, or finds that finished file done,
    instead of refusing them as another model's (with --overwrite the new digest is recorded)."""
    digest = model_digest(bilm)
    if overwrite:
        return digest
    recorded = recorded_model_digests(output_path)
    return (recorded_digest(bilm, recorded, digest) if recorded else None) or digest


def _tokenizer_record(output_path: Path, tokenize: Union[bool, str, None], overwrite: bool,
                      rank: int) -> Dict[str, Any]:
    """What this run records of its tokenizer's version: the English tokenizer's revision
    (``tokenizer_revision``, :data:`elmo.tokenize.TOKENIZER_REVISION`), jieba's version with
    ``--tokenize zh`` (``jieba_version``; another version can segment a line otherwise, and a
    resume under it mixed two segmentations in one output); nothing without a tokenizer. OUTPUT
    or its segments written before it was recorded keep none, with one warning: their tokens
    are of an unknown version, and every such output was refused if a resume required one."""
    value: Union[int, str]
    if tokenize is True:
        key, value = "tokenizer_revision", tokenizer.TOKENIZER_REVISION
        what, now = "the tokenizer revision", f"this version's --tokenize en splits them (revision {value})"
    elif tokenize == "zh":
        key, value = "jieba_version", tokenizer.jieba_version()
        what, now = "jieba's version", f"jieba {value} segments them"
    else:
        return {}
    if not overwrite and any(r.get("tokenize") == tokenize and key not in r
                             for r in recorded_settings(output_path)):
        if rank == 0:
            warnings.warn(f"{output_path} was begun before {what} was recorded: resuming it, though its "
                          f"earlier lines may be split otherwise than {now}; pass --overwrite to embed every "
                          f"line again", tokenizer.TokenizerRevisionWarning, stacklevel=2)
        return {}
    return {key: value}


def embed_file(input_path: Union[str, Path], output_path: Union[str, Path],
               model: Union[BiLM, str, Path, None] = None, config: Optional[EmbedConfig] = None, *,
               rank: Optional[int] = None, world_size: Optional[int] = None,
               command_line: Optional[str] = None, **settings: Any) -> Optional[Path]:
    """Embed every line of ``input_path`` into ``output_path`` (HDF5, the original layout).

    Args:
        model: a BiLM, or a bundled model name or folder (default: ``config.model``, else
            ``elmo.DEFAULT_MODEL``).
        config: the job's settings (:class:`~elmo.embedding.config.EmbedConfig`; default: its
            defaults).
        settings: any field of :class:`EmbedConfig` by name, overriding ``config``'s
            (an unknown name is a TypeError):

            * layers, gamma: ``all`` | ``top`` | ``average`` | ``mix:w0,w1,...``, or a
              trained :class:`elmo.ScalarMix` (not one with ``do_layer_norm``; see
              :mod:`elmo.embedding.layers`).
            * dtype: ``float32`` or ``float16`` (half the file), by name or as a numpy or torch dtype.
            * batch_size, max_tokens, overlap, sort_by_length: see :class:`Embedder`.
            * stateful: carry LSTM state across batches like the original (reset at each
              segment); None keeps the model's own setting (stateless when loaded by name).
              A BiLM passed in gets back the state it carried before the call.
            * token_cache: cache the CNN vectors of words seen ``cache_min_count`` times in the
              first ``cache_sample_lines`` lines (at most ``cache_max_words``); faster, the same
              vectors up to float rounding (the CNN runs over other groups of words).
            * tokenize: split raw text with :func:`elmo.tokenize.tokenize` (True or ``"en"``) or
              segment Chinese with jieba (``"zh"``, :func:`elmo.tokenize.tokenize_zh`) instead
              of splitting on whitespace (False or None: pre-segmented text is taken as is).
            * errors: ``strict`` (non-UTF-8 bytes are an error naming the line) or ``replace``.
            * sentence_keys: name datasets by sentence instead of line number.
            * forget_sentences: leave out ``sentence_to_index``.
            * segment_lines: lines per segment (the unit of sorting, resuming and sharding).
            * overwrite: ignore and replace earlier output and parts instead of resuming them;
              the same call again after an --overwrite run was stopped resumes that run.
            * device: a torch device, or ``auto``: ``cuda:LOCAL_RANK`` when CUDA is present,
              else the CPU. Default: a BiLM passed in runs where it is; a model by name as auto. A
              BiLM passed in and run on another device is moved back when the call returns.
            * progress: show a tqdm bar (sentences/s and tokens/s).
            * wait_timeout: rank 0, once done with its own segments, gives up with an error
              when no other rank has finished a segment for this many seconds (a rank that died
              would otherwise leave it waiting forever); the finished segments are kept.
        rank, world_size: this process's shard; default from torchrun's environment.
        command_line: stored as an attribute; default ``sys.argv``.

    Returns:
        the output path on rank 0 once the merged file is complete; None on other ranks.
    """
    cfg = job_config(config, settings)
    input_path, output_path = require_path("input_path", input_path), require_path("output_path", output_path)
    env_rank, env_world, local_rank = distributed_rank()
    rank = env_rank if rank is None else rank
    world_size = env_world if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, {world_size})")
    try:   # (numpy's dtype('float16') passed the check, then stopped json.dumps of the settings)
        dtype_name = output_dtype(cfg.dtype).name
    except (TypeError, ValueError):
        dtype_name = None
    if dtype_name not in ("float32", "float16"):
        raise ValueError(f"dtype must be float32 or float16, got {cfg.dtype!r}")
    cfg = replace(cfg, dtype=dtype_name)   # (recorded by name, as the command line gives it)
    if cfg.errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {cfg.errors!r}")
    # Switches as bools and counts as ints: numpy's (a config read by numpy or pandas) stopped
    # json.dumps of the settings once the model was loaded, and a string such as "false" was true
    switches = ("sentence_keys", "forget_sentences", "sort_by_length", "token_cache", "overwrite", "progress")
    as_bools: Dict[str, Any] = {name: require_switch(name, getattr(cfg, name)) for name in switches}
    cfg = replace(cfg, **as_bools)
    if cfg.stateful is not None:
        cfg = replace(cfg, stateful=require_switch("stateful", cfg.stateful))
    if cfg.token_cache:  # (a negative sample or limit silently cached nothing)
        as_counts: Dict[str, Any] = {name: require_count(name, getattr(cfg, name),
                                                         hint=" (--no-token-cache turns the cache off)")
                                     for name in ("cache_min_count", "cache_max_words", "cache_sample_lines")}
        cfg = replace(cfg, **as_counts)
    if not cfg.wait_timeout > 0:  # (NaN too: it would never time out)
        raise ValueError(f"wait_timeout must be a positive number of seconds (inf: wait forever), "
                         f"got {cfg.wait_timeout}")
    selection = LayerSelection.parse(cfg.layers, cfg.gamma)
    get_tokenizer(cfg.tokenize)  # an unknown name or a missing package: stop before any work
    # settings store True for the English tokenizer, as earlier versions did (runs still resume)
    cfg = replace(cfg, tokenize=False if cfg.tokenize is None else True if cfg.tokenize == "en" else cfg.tokenize)
    model = model if model is not None else cfg.model
    device = _ranks_device(cfg.device, model, local_rank)
    # The output must be writable before anything is computed; rank 0 (which merges and cleans
    # up) holds OUTPUT.lock for the whole run, so a second run on the same output stops here.
    # Nothing the run reads may be what it writes: --overwrite replaced the text, or the model's
    # weights, with the vectors
    refuse_replacing_inputs(output_path, [("the input file", input_path), *_model_inputs(model)], "vectors")
    check_output_file(output_path, "output")
    check_output_dir(parts_dir(output_path), "folder of parts (OUTPUT.parts)")
    # A run that fails before it has a finished segment (a model that is not one, a first
    # segment that is not finite) leaves no empty OUTPUT.parts, nor the output's folder if made
    with no_empty_folder_on_failure(output_path.parent), no_empty_folder_on_failure(parts_dir(output_path)), \
            output_lock(output_path) if rank == 0 else _no_lock():
        return _embed_file_locked(input_path, output_path, model, selection, cfg, rank=rank, world_size=world_size, device=device,
                                  command_line=command_line)


def _ranks_device(device: Union[str, torch.device, None], model: Union[BiLM, str, Path, None],
                  local_rank: int) -> Union[str, torch.device, None]:
    """The device this rank embeds on: ``auto``, a bare ``cuda`` and the default (None, except
    for a caller's BiLM, which stays where it is: it stayed on the GPU after the call) are this
    rank's own GPU, ``cuda:LOCAL_RANK``, as train takes them (a bare ``cuda`` was torch's
    current GPU, the same one for every rank of a torchrun job). A local rank past the GPUs is
    a ValueError, as in train (it wrapped round them: two ranks shared a GPU without a word).
    Other devices, and all without CUDA, are handed on as given (checked where used)."""
    bare_cuda = isinstance(device, (str, torch.device)) and str(device) == "cuda"
    if (device == "auto" or bare_cuda or device is None and not isinstance(model, BiLM)) \
            and torch.cuda.is_available():
        return resolve_device("auto" if device is None else device, local_rank, "device")
    return device


def _model_inputs(model: Union[BiLM, str, Path, None]) -> List[Tuple[str, Path]]:
    """What an output must not replace of the model, as :func:`elmo.output_checks.refuse_replacing_inputs`
    takes it: a loaded model's files, or a bundled model's or a local folder's folder and files
    (found before the model loads); a published model's name gives none until it is loaded."""
    from .. import BUNDLED_MODELS, DEFAULT_MODEL, model_path
    from ..weights import model_files

    if isinstance(model, BiLM):
        return [("a file of the model", f) for f in model.source_files]
    model = DEFAULT_MODEL if model is None else model
    if not isinstance(model, (str, os.PathLike)) or not (model in BUNDLED_MODELS or Path(model).is_dir()):
        return []
    folder = model_path(model)   # (no download: a bundled name or a local folder)
    return [("the model folder", folder), *(("a file of the model", f) for f in model_files(folder))]


def job_config(config: Optional[EmbedConfig], settings: Dict[str, Any]) -> EmbedConfig:
    """``config`` (default: every default) with ``settings`` set, as :func:`embed_file` takes
    them; an unknown name is a TypeError, as for any keyword argument."""
    if config is not None and not isinstance(config, EmbedConfig):
        # (a dict of settings was "replace() should be called on dataclass instances")
        raise TypeError(f"config must be an EmbedConfig (elmo.embedding.EmbedConfig), got "
                        f"{type(config).__name__}; pass settings as keywords: embed_file(..., batch_size=32)")
    known = {f.name for f in fields(EmbedConfig)}
    for name in settings:
        if name not in known:
            raise TypeError(f"embed_file() got an unexpected keyword argument {name!r}")
    return replace(config if config is not None else EmbedConfig(), **settings)


@contextmanager
def _no_lock():
    yield None


def _embed_file_locked(input_path: Path, output_path: Path, model, selection: LayerSelection,
                       cfg: EmbedConfig, *, rank: int, world_size: int, device,
                       command_line: Optional[str]) -> Optional[Path]:
    """:func:`embed_file` once the arguments are checked and the output is ours to write."""
    # Rank 0 of an --overwrite run notes the other ranks' marks before it (or they) load the
    # model: a mark of other settings that is not one of these was written by a rank of this run
    marks_before = _marks_found(parts_dir(output_path), world_size) if rank == 0 and cfg.overwrite else {}
    index = index_input(input_path, cfg.segment_lines, cfg.errors, check_unique=cfg.sentence_keys)
    # A model passed in goes back where it was (Embedder moves it to ``device`` in place)
    home = next(model.parameters()).device if isinstance(model, BiLM) else None
    try:
        embedder = Embedder(model, batch_size=cfg.batch_size, max_tokens=cfg.max_tokens, overlap=cfg.overlap,
                            sort_by_length=cfg.sort_by_length, device=device)
        bilm = embedder.bilm
        # (a published model's files are known once it is loaded: they are in the cache)
        refuse_replacing_inputs(output_path, _model_inputs(bilm), "vectors")
        model_was_stateful = bilm.stateful
        if cfg.stateful is not None:
            bilm.stateful = cfg.stateful
        # Leave a model that was passed in as it was: its own token cache too (one built for
        # Elmo's vocab_to_cache was replaced by this file's words, then cleared), and its
        # carried LSTM state (a stateful model kept the file's last one: the caller's next
        # call was conditioned on this file's text)
        try:
            with bilm.token_encoder.token_cache_kept(), bilm.states_kept():
                return _embed_and_merge(embedder, index, selection, input_path, output_path, cfg, rank=rank,
                                        world_size=world_size, command_line=command_line,
                                        marks_before=marks_before)
        finally:
            bilm.stateful = model_was_stateful
    finally:
        if isinstance(model, BiLM) and home is not None:   # (a no-op where it stayed)
            model.to(home)


def _run_settings(embedder: Embedder, index, selection: LayerSelection, output_path: Path,
                  cfg: EmbedConfig, rank: int) -> Dict[str, Any]:
    """What this run records and compares (:func:`~elmo.embedding.output.value_settings`):
    everything that determines the vectors under the run's mode."""
    bilm, cache = embedder.bilm, (cfg.cache_min_count, cfg.cache_max_words, cfg.cache_sample_lines)
    settings = {
        "format": FORMAT_VERSION, "input_digest": index.digest, "input_lines": index.n_lines,
        "model_digest": _digest_to_record(bilm, output_path, cfg.overwrite), "layers": str(selection),
        "gamma": selection.gamma, "dtype": cfg.dtype, "stateful": bool(bilm.stateful),
        "batch_size": embedder.batch_size, "max_tokens": embedder.max_tokens, "overlap": embedder.overlap,
        "sort_by_length": embedder.sort_by_length, "token_cache": list(cache) if cfg.token_cache else None,
        "tokenize": cfg.tokenize, "errors": cfg.errors, "sentence_keys": cfg.sentence_keys,
        "forget_sentences": cfg.forget_sentences, "segment_lines": index.segment_lines,
    }
    precision = model_precision(bilm)
    if "," in precision:   # int8 or autocast, which the model digest cannot see (a plain run records
        settings["precision"] = precision   # none, as earlier versions did: their runs still resume)
    # (not without a tokenizer: what tokenize-off runs recorded is unchanged)
    settings.update(_tokenizer_record(output_path, cfg.tokenize, cfg.overwrite, rank))
    return value_settings(settings)   # (a stateful run records no sort_by_length)


def _embed_and_merge(embedder: Embedder, index, selection: LayerSelection, input_path: Path,
                     output_path: Path, cfg: EmbedConfig, *, rank: int, world_size: int,
                     command_line: Optional[str], marks_before: Optional[Dict[int, Any]] = None) -> Optional[Path]:
    """Steps 2-6 of the module doc, once the input is indexed and the model loaded (``marks_before``: :func:`_marks_found`)."""
    bilm = embedder.bilm
    dtype, tokenize, errors, overwrite, progress = cfg.dtype, cfg.tokenize, cfg.errors, cfg.overwrite, cfg.progress
    token_cache, cache = cfg.token_cache, (cfg.cache_min_count, cfg.cache_max_words, cfg.cache_sample_lines)
    selection.check(bilm.num_layers)
    settings = _run_settings(embedder, index, selection, output_path, cfg, rank)
    settings_json = json.dumps(settings, sort_keys=True)

    if not overwrite and output_complete(output_path, settings):
        if rank == 0:   # (holding OUTPUT.lock: what is left is a dead run's)
            remove_parts(parts_dir(output_path))
            remove_temporaries(output_path)   # a --overwrite run killed while merging left its file
        return output_path if rank == 0 else None
    parts = parts_dir(output_path)
    with writing(output_path, f"folder of parts {parts}"):
        parts.mkdir(parents=True, exist_ok=True)
    resume_hint = ("the finished segments are kept: fix it (free space, permissions) and run the "
                   "same command again to resume")

    # --overwrite deletes this rank's earlier segments, then marks its share of the parts as started
    # afresh; run again after a kill it finds the mark, resumes and marks again (rank 0 knows it new).
    mark = _overwrite_mark(parts, rank, world_size)
    restart = overwrite and not _overwrite_under_way(mark, settings)
    todo = []
    for k in range(rank, index.n_segments, world_size):
        path = segment_path(parts, k)
        first, stop = index.segment_range(k)
        if restart:
            path.unlink(missing_ok=True)
        elif segment_done(path, first, stop, settings):
            continue
        todo.append(k)
    if overwrite:
        with writing(output_path, f"mark of an --overwrite run {mark}", hint=resume_hint):
            atomic_write_text(mark, settings_json)

    if todo and token_cache:
        sample = (split_tokens(s, tokenize) for s in read_sentences(input_path, errors, cache[2]))
        embedder.build_token_cache(sample, cache[0], cache[1])

    total = sum(index.segment_range(k)[1] - index.segment_range(k)[0] for k in todo)
    bar = _progress_bar(total, progress, rank)
    started, n_tokens = time.perf_counter(), 0
    np_dtype = np.dtype(dtype)
    for k in todo:
        first, stop = index.segment_range(k)
        tokens = [split_tokens(s, tokenize) for s in read_segment(index, k, errors)]
        if bilm.stateful:
            bilm.reset_states()
        path = segment_path(parts, k)
        # The segment's lock keeps another run's rank off this segment and its temporary file.
        with output_lock(path, name=output_path), \
                writing(output_path, f"segment file {path}", hint=resume_hint):
            writer = SegmentWriter(path, first, stop, settings_json)
            try:
                for i, sentence in enumerate(tokens):
                    writer.create(first + i, selection.shape(len(sentence), bilm.num_layers, bilm.output_dim), np_dtype)
                for batch in embedder.run(tokens, selection, np_dtype):
                    finished = 0
                    for out in batch:
                        vectors = out.vectors if selection.keeps_all else out.vectors[0]
                        _check_finite(vectors, input_path, first + out.sentence, dtype, selection.kind == "mix")
                        writer.write(first + out.sentence, out.offset, vectors)
                        n_tokens += vectors.shape[-2]
                        finished += out.offset + vectors.shape[-2] == len(tokens[out.sentence])
                    if bar is not None:
                        bar.update(finished)
                        bar.set_postfix_str(f"{n_tokens / (time.perf_counter() - started):.0f} tok/s", refresh=False)
                writer.commit()
            except BaseException:
                writer.abort()
                raise
    if bar is not None:
        bar.close()

    if rank != 0:
        return None
    _wait_for_segments(parts, index.n_segments, settings, progress, cfg.wait_timeout,
                       world_size=world_size if overwrite else 0, marks_before=marks_before)
    attrs = {
        "model_config": bilm.options.to_json(), "command_line": _stored_command_line(command_line),
        "layers": str(selection), "stateful": bool(bilm.stateful), "precision": model_precision(bilm),
        "settings": settings_json,
    }
    with writing(output_path, "merged output", hint=resume_hint):
        merge_segments(parts, index.n_segments, output_path, indexed_sentences(index, errors),
                       sentence_keys=cfg.sentence_keys, forget_sentences=cfg.forget_sentences, attrs=attrs)
    remove_parts(parts)
    return output_path


def _stored_command_line(command_line: Optional[str]) -> str:
    """The output's ``command_line`` attribute: the one given, or this process's own, as UTF-8
    text (a path that is not UTF-8, as ``sys.argv`` holds it, stopped the merge in h5py). A
    model URL's password is stored as ``***`` (the file is shared; it was stored as given)."""
    from ..redact import redact_url
    if command_line is not None:
        return redact_url(str(command_line).encode("utf-8", "backslashreplace").decode("utf-8"))
    return redact_url(shell_join(sys.argv))


def _overwrite_mark(parts: Path, rank: int, world_size: int) -> Path:
    """The file by which an --overwrite run's rank says that its segments in ``parts`` are its
    own (the earlier ones deleted). It goes with the parts folder when the output is merged, so
    an --overwrite run that finished leaves nothing to resume."""
    return parts / f"overwrite-rank-{rank}-of-{world_size}.json"


def _marks_found(parts: Path, world_size: int) -> Dict[int, Any]:
    """The :func:`~elmo.folder_checksums.file_identity` of each other rank's --overwrite mark
    in ``parts``, by rank, as rank 0 finds them when it starts (see :func:`_refuse_a_rank_of_other_settings`)."""
    return {r: file_identity(_overwrite_mark(parts, r, world_size)) for r in range(1, world_size)}


def _refuse_a_rank_of_other_settings(parts: Path, rank: int, world_size: int, settings: Dict,
                                     marks_before: Dict[int, Any]) -> None:
    """Raise SettingsMismatch where ``rank``'s --overwrite mark records other settings than
    rank 0's and is not the one rank 0 found when it started (``marks_before``, from
    :func:`_marks_found`): every rank writes its mark at its start, so that rank is of this run,
    started with other options or another model, and none of its segments will ever count.

    A mark that rank 0 found may be a killed earlier run's, which its rank replaces when it
    starts: that one is waited for, as before."""
    mark = _overwrite_mark(parts, rank, world_size)
    state = file_identity(mark)
    if state is None or state == marks_before.get(rank):
        return
    try:
        found = json.loads(mark.read_text(encoding="utf-8"))
    except (OSError, ValueError):   # (replaced meanwhile, or not a mark of ours: wait on)
        return
    differing = differing_settings(found, settings) if isinstance(found, dict) else []
    if differing:
        raise SettingsMismatch(f"{mark}: rank {rank} of this run was started with other settings than rank 0 "
                               f"(it differs in: {', '.join(differing)}), so its segments cannot be merged; "
                               f"start every rank with the same command")


def _overwrite_under_way(mark: Path, settings: Dict) -> bool:
    """Whether an --overwrite run with these settings and ranks started on these parts and did
    not finish: its segments are this command's to resume."""
    try:
        return same_settings(mark.read_text(encoding="utf-8"), settings)
    except (OSError, UnicodeDecodeError):   # none (the usual case), or unreadable: start afresh
        return False


def _check_finite(vectors: np.ndarray, input_path: Path, line: int, dtype: str, mixed: bool) -> None:
    """Refuse NaN or inf in a line's vectors (a broken model, or float16 overflow): a file of
    NaN must not look like a finished run. One pass over the output: 0.06% of the model's time
    for the small configuration (benchmarks/output_checks.py)."""
    if not np.isfinite(vectors).all():
        hint = (" (float16 holds at most 65504 in magnitude: use --dtype float32)"
                if dtype == "float16" else " (check the model's weights, and --gamma)" if mixed
                else " (check the model's weights)")
        raise NonFiniteOutput(f"{input_path}: line {line + 1}: the model gave non-finite values "
                              f"(NaN or inf){hint}; nothing was written for it")


def _progress_bar(total: int, enabled: bool, rank: int):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="sent", desc=f"rank {rank}" if rank else "embed", position=rank,
                dynamic_ncols=True, smoothing=0.1)


def _wait_for_segments(parts: Path, n_segments: int, settings: Dict, progress: bool,
                       timeout_s: float, poll_s: float = 0.5, *, world_size: int = 0,
                       marks_before: Optional[Dict[int, Any]] = None) -> None:
    """Block until every segment is on disk with this run's settings (other ranks write theirs).
    Raises TimeoutError when ``timeout_s`` pass without a new segment.

    Under --overwrite (``world_size`` ranks; 0 otherwise), a rank's segments count only once
    its mark is there: until then they may be an earlier run's, which that rank is about to
    delete. Merged before, that rank would delete them under the merge, or make OUTPUT.parts
    again after it and leave it behind. A rank whose mark says that it runs with other
    settings is refused at once (:func:`_refuse_a_rank_of_other_settings`; ``marks_before``):
    its segments would never count, and the wait ran out its whole timeout."""
    missing, said = set(range(n_segments)), False
    last_progress = time.monotonic()
    while True:
        started = {r for r in range(world_size) if _overwrite_under_way(_overwrite_mark(parts, r, world_size), settings)}
        for r in set(range(1, min(world_size, n_segments))) - started:   # (ranks with segments)
            _refuse_a_rank_of_other_settings(parts, r, world_size, settings, marks_before or {})
        # (under --overwrite a rank's earlier segments, of other settings, wait for it to delete them)
        still = {k for k in missing if (world_size and k % world_size not in started)
                 or not segment_ready(segment_path(parts, k), settings, refuse_other=not world_size)}
        if len(still) < len(missing):
            last_progress = time.monotonic()
        missing = still
        if not missing:
            return
        if time.monotonic() - last_progress > timeout_s:
            shown = ", ".join(str(k) for k in sorted(missing)[:10])
            raise TimeoutError(
                f"no new segment in {timeout_s:.0f} s; still missing {len(missing)} "
                f"(segments {shown}{', ...' if len(missing) > 10 else ''}) in {parts}. Did a rank "
                f"stop? Finished segments are kept: run the same command again to finish.")
        if progress and not said:
            print(f"waiting for {len(missing)} segments from other ranks", file=sys.stderr)
            said = True
        time.sleep(poll_s)
