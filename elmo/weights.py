"""Loading and saving a :class:`BiLM`: the entry points, whichever layout a model is in.

:func:`load_pretrained` reads a model folder in the layout it finds there (native safetensors,
the original HDF5 layout, or an ELMoForManyLangs folder), :func:`load_original` an options.json
and HDF5 pair; :func:`save_pretrained` and :func:`save_original` write them, one writer at a
time (a folder that holds files already is replaced whole: :mod:`elmo.model_replace`). Each
loader builds the model (its initialisation skipped: the file overwrites every weight), gives
it the dtype and device it should have, and records the files it was read from
(:func:`model_files`). The layouts themselves are in :mod:`elmo.original_layout` (HDF5: names,
shapes, datasets and their checks) and :mod:`elmo.native_layout` (safetensors); the checks of
weight values both share in :mod:`elmo.weight_values`, dtypes in :mod:`elmo.model_dtypes`.
Their public names stay importable from here.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Tuple

import torch

from .checks import require_path
from .folder_checksums import checked_reads, file_identity, replaced_while_read, replacing_recorded
from .config import ConfigError, ElmoOptions
from .modules.bilm import BiLM
from .modules.skip_init import init_skipped
from .output_checks import writing
from .runtime import resolve_device
# The names each loader and saver below calls, and those of the layouts' modules that were
# defined here before the split, importable from here (``elmo.weights.read_dataset``)
from .io import atomic_commit, atomic_target, atomic_write_text, os_error_reason  # noqa: F401
from .model_dtypes import DTYPES, model_dtype, requested_dtype, restored_dtype  # noqa: F401
from .native_layout import (  # noqa: F401
    MODEL_OPTIONS_KEY, NATIVE_CONFIG, NATIVE_WEIGHTS, check_config_belongs, check_tensors_fit,
    check_weights_fit_the_file, dictionary_id_scheme, layer_weight_count, model_options_digest,
    read_safetensors, write_safetensors)
from .original_layout import (  # noqa: F401
    DTYPE_ATTRIBUTE, ORIGINAL_OPTIONS, ORIGINAL_WEIGHTS, STORAGE_DTYPES, assign_original_arrays,
    check_dataset_checksum, expected_shapes, narrowed, open_hdf5, read_dataset, read_original_arrays,
    recorded_dtype, write_original_weights, write_weight_dataset)
from .weight_values import WeightFileError, check_finite, non_finite  # noqa: F401


def load_original(options_file: str | Path, weight_file: str | Path, *, stateful: bool = False,
                  device: str | torch.device | None = None, dtype: str | torch.dtype | None = None) -> BiLM:
    """Build a :class:`BiLM` from options.json and the original HDF5 weights (paths, or http(s)
    URLs that are downloaded into the cache and checked first, see :mod:`elmo.hub`).

    The model gets the dtype it was saved in (a bfloat16 model's is recorded in the HDF5 file,
    which stores float32), float32 for files without a record or of a float16 model (see
    :func:`elmo.model_dtypes.restored_dtype`); ``dtype=`` sets another."""
    from .hub.urls import is_url
    require_path("options_file", options_file)
    require_path("weight_file", weight_file)
    if is_url(options_file) or is_url(weight_file):
        from .hub.resolve import local_pair
        options_file, weight_file = local_pair(options_file, weight_file)
    target = requested_dtype(dtype)
    # _cache_hint: a cached download damaged past what a cheap look sees failed at every load,
    # the error naming the cache's file only; it now says how to clear it.
    # checked_reads: both files against the SHA-256 their folder's metadata.json records, where
    # it has one, before they are read (an edited options.json is named as edited, not as
    # options that do not fit the weights), and confirmed unchanged once read
    with _cache_hint(options_file, weight_file), checked_reads((Path(options_file), Path(weight_file))):
        options = ElmoOptions.from_file(options_file)
        # (the file is opened twice, for its arrays and for the dtype it records: a save over it
        # between the two had the arrays read given the other file's dtype, bfloat16 say)
        before = file_identity(Path(weight_file))
        # the file's shapes are checked before the model is built: options that disagree with
        # them by far (an lstm.dim of 2**30) had torch allocate hundreds of GB for it first, and
        # the load ended in a traceback from torch's allocator instead of naming the shape
        arrays = read_original_arrays(weight_file, options)
        with init_skipped():   # (every weight is assigned next: no random draws to throw away)
            bilm = BiLM(options, stateful=stateful)
        assign_original_arrays(bilm, arrays)
        target = target or restored_dtype(recorded_dtype(Path(weight_file)))
        if file_identity(Path(weight_file)) != before:
            raise replaced_while_read(Path(weight_file))
    if target is not None and target != torch.float32:
        bilm = bilm.to(target)
    bilm.eval()
    _loaded_from(bilm, (options_file, weight_file))
    return bilm.to(resolve_device(device, None, "device")) if device is not None else bilm


def _require_bilm(bilm, caller: str) -> None:
    if not isinstance(bilm, BiLM):  # else an AttributeError half way through writing
        raise TypeError(f"{caller} saves a BiLM (elmo.from_pretrained, or Elmo(...).bilm), "
                        f"got {type(bilm).__name__}")
    # Loading refuses NaN and inf (WeightFileError): written, such weights replaced the model
    # saved there before with one that no load gives back, found only at the next load
    for name, tensor in bilm.state_dict().items():
        if tensor.is_meta:  # (the check below failed inside PyTorch: "Tensor.item() cannot be called on meta tensors")
            raise ValueError(f"{caller}: the model's {name} is on the meta device, which holds no values; "
                             f"nothing was written (load the weights first: elmo.from_pretrained, or "
                             f"module.to_empty(device='cpu') and load_state_dict)")
        if tensor.is_floating_point() and tensor.dtype not in DTYPES.values():
            # (a float8 model failed inside PyTorch, in the checksums' view of its bytes:
            # "unsupported ScalarType")
            raise ValueError(f"{caller}: the model's {name} is {str(tensor.dtype).removeprefix('torch.')}, "
                             f"which no load reads; nothing was written (a model is saved in one of "
                             f"{', '.join(DTYPES)}: bilm.float() first)")
        found = non_finite(tensor)
        if found is not None:
            count = found[0]
            raise ValueError(f"{caller}: the model's {name} holds {count} non-finite values (NaN or inf), "
                             f"which no load accepts; nothing was written (torch.save(bilm.state_dict(), "
                             f"path) keeps them for a look)")


def _refuse_bundled(path: Path, what: str) -> None:
    """OutputError where ``path`` lies in the folder of a model bundled with the package
    (``from_pretrained("default")``): saved there, it replaced (or, native beside the original
    layout, shadowed) the bundled model for every later load by every program of this
    installation, without a word. The check is every writer's: :func:`elmo.io.refuse_bundled`."""
    from .io import refuse_bundled

    refuse_bundled(path, what)


def save_original(bilm: BiLM, options_file: str | Path, weight_file: str | Path,
                  dtype: str = "float32") -> None:
    """Write options.json and the HDF5 weights in the original layout, each file atomically.

    ``dtype="float16"`` halves the file; loading converts back to float32. A model that is not
    float32 (bfloat16, say) is stored as float32 with its dtype recorded, which loading restores
    (a float16 model's too, on request: see :func:`elmo.model_dtypes.restored_dtype`).

    One writer at a time, as :func:`save_pretrained`: it holds ``WEIGHTS.lock`` and
    ``OPTIONS.lock`` beside the two files, and raises :class:`elmo.io.OutputBusy` (naming the
    process) while another holds either. Two processes saving to one pair could leave one's
    weights beside the other's options.

    The two files are not replaced as one: they are any two paths, maybe in two folders, and
    no rename replaces two files at once (:func:`save_pretrained` into a folder swaps the whole
    folder instead, which two paths of a caller's choosing do not allow). The weights are
    written first, then the options. A save killed between the two leaves the new weights
    beside the old options: the weights record the digest of the LSTM and CNN options they
    were saved with, and the next load refuses options of another one, naming the weights
    file (:func:`elmo.original_layout.read_original_arrays`); where the two options agree in
    those settings, it loads the new model. Where their folder's ``metadata.json`` records its
    files' SHA-256, their entries leave the record before the first file is written and come
    back once both are (:func:`elmo.folder_checksums.replacing_recorded`): a kill between
    leaves them unrecorded, loaded unchecked until the next save, rather than refused as
    damaged.
    """
    from contextlib import ExitStack

    from .io import no_empty_folder_on_failure
    from .output_checks import check_output_file, same_file
    from .output_lock import output_lock

    _require_bilm(bilm, "save_original")
    # (checked before anything is written: "int8" truncated every weight to an integer, a file
    # that loaded back without a word; "complex64" replaced the old file with one that is refused)
    if not isinstance(dtype, str) or dtype not in STORAGE_DTYPES:
        raise ValueError(f"save_original: dtype must be one of {', '.join(STORAGE_DTYPES)} (the original "
                         f"layout stores floats; the model's own dtype is recorded), got {dtype!r}")
    weight_file, options_file = require_path("weight_file", weight_file), require_path("options_file", options_file)
    _refuse_bundled(weight_file, "weights")
    _refuse_bundled(options_file, "options")
    if same_file(weight_file, options_file):   # (the options were written over the weights)
        raise ValueError(f"save_original: options_file and weight_file are one file ({weight_file})")
    with ExitStack() as locks:
        for path, what in ((weight_file, "weights"), (options_file, "options")):
            check_output_file(path, what)   # (before its lock file is made beside it)
            locks.enter_context(no_empty_folder_on_failure(path.parent))   # (made for the lock file)
            locks.enter_context(output_lock(path))
        _write_original(bilm, options_file, weight_file, dtype)


def _write_original(bilm: BiLM, options_file: Path, weight_file: Path, dtype: str) -> None:
    """:func:`save_original` once its two files are locked."""
    # (where their folder's metadata.json records its files: a kill between the two leaves
    # them unrecorded, see save_original; the new ones' SHA-256 once written)
    with replacing_recorded((options_file, weight_file)):
        write_original_weights(bilm, weight_file, dtype)
        with writing(options_file, "options"):
            atomic_write_text(options_file, bilm.options.to_json() + "\n")


def model_files(folder: str | Path) -> Tuple[Path, ...]:
    """The files of the model folder ``folder`` that are part of the model and are there: its
    weights and options in either layout, an ELMoForManyLangs folder's dictionaries and .pkl
    files, a trained language model's softmax, vocabulary and metadata. An output written over
    one of them (``elmo embed --model M IN M/model.safetensors``) destroys the model."""
    from .manylangs.folder import ENCODER, TOKEN_EMBEDDER
    from .manylangs.vocabulary import CHAR_DIC, WORD_DIC
    from .training.export import LM_FILES

    folder = Path(folder)
    names = (NATIVE_CONFIG, NATIVE_WEIGHTS, ORIGINAL_OPTIONS, *ORIGINAL_WEIGHTS, CHAR_DIC, WORD_DIC,
             TOKEN_EMBEDDER, ENCODER, *LM_FILES)
    return tuple(folder / name for name in names if os.path.lexists(folder / name))


def _loaded_from(bilm: BiLM, files) -> BiLM:
    """Record on ``bilm`` the files it was read from (:attr:`BiLM.source_files`), resolved when
    loaded: a later write (``embed_file``'s output) refuses to replace them."""
    bilm.source_files = tuple(Path(f).resolve() for f in files)
    return bilm


def save_pretrained(bilm: BiLM, folder: str | Path, fmt: str = "safetensors") -> Path:
    """Save a model folder: ``config.json`` + ``model.safetensors`` (native), or
    ``options.json`` + ``weights.hdf5`` (``fmt="original"``). A dictionary model
    (ELMoForManyLangs) also gets its ``char.dic`` (and ``word.dic``) and is native only.

    The weights' dtype is kept (:func:`load_pretrained` restores it, float16 as float32).
    ``stateful`` is not saved: it is how a caller runs the model (``from_pretrained(...,
    stateful=True)``), not part of it.

    Into a folder that holds files already, the model is saved whole or not at all: a new folder
    is written beside it (``FOLDER.partial``) with the new files, the folder's other entries
    (a model card, notes, task models below it) and its ``metadata.json``, whose SHA-256 record
    (where it has one) gets the new files' digests; then the two folders swap in one step
    (:mod:`elmo.model_replace`). A kill at any point leaves the old folder or the new one,
    whole. A model file that was a link to a file elsewhere (a shared cache) becomes a file of
    its own, and the file it named keeps the old model. Where the folder cannot be swapped (a mount point, or a mount point inside it; a
    sticky folder above it, as /tmp, where this process may not move it), the files are
    replaced one by one, as in a new folder, and a kill between them leaves a folder the next
    load refuses, naming the file that does not belong (see :func:`save_original`).

    One writer at a time: it holds ``FOLDER.lock`` beside the folder, as ``elmo convert``
    does, and raises :class:`elmo.io.OutputBusy` (naming the process) while another holds it.
    Two processes saving into one folder could leave one's weights beside the other's config.

    ``fmt="original"`` into a folder that holds ``model.safetensors`` is an
    :class:`elmo.io.OutputError`: loading reads the native weights first, so the new files would
    never be read."""
    import shutil

    from .folder_swap import writer_lock
    from .io import OutputError, no_empty_folder_on_failure
    from .model_replace import swappable
    from .output_checks import check_output_dir

    _require_bilm(bilm, "save_pretrained")  # before the folder is made
    if fmt not in ("safetensors", "original"):
        raise ValueError(f"fmt must be 'safetensors' or 'original', got {fmt!r}")
    folder = require_path("folder", folder)
    _refuse_bundled(folder, "model")
    check_output_dir(folder, "model folder")   # a file there: named, not "File exists"
    # (the folders made above it are removed once it is, after the lock file is deleted)
    # (writer_lock first puts back a FOLDER a save killed in a swap without renameat2 left aside
    # as FOLDER.replaced: found missing, a new folder was written without its other entries, and
    # the next swap deleted them as what a kill while deleting left)
    with no_empty_folder_on_failure(folder), writer_lock(folder):
        made = not folder.exists()   # (seen under the lock: another writer's folder is not ours to delete)
        if fmt == "original" and (folder / NATIVE_WEIGHTS).exists():
            # load_pretrained reads a folder's native weights first: the original-layout files
            # written beside them were never loaded, and the folder gave back the older model
            raise OutputError(f"{folder}: holds a model in the native layout ({NATIVE_WEIGHTS}), which "
                              f"from_pretrained would load instead of the one saved in the original "
                              f"layout; remove {NATIVE_WEIGHTS} or save to another folder")
        if not made and _holds_entries(folder) and swappable(folder):
            _save_whole(bilm, folder, fmt)   # (an empty folder, as a new one, holds nothing to keep whole)
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        try:
            _save_files(bilm, folder, fmt)
        except BaseException:
            if made:   # (a full disk, say): no half-written folder of this call left, to be taken for a model
                shutil.rmtree(folder, ignore_errors=True)
            raise
    return folder


def _holds_entries(folder: Path) -> bool:
    """Whether the existing ``folder`` holds anything (one that cannot be listed: as if empty,
    its files written in place, whose errors name them)."""
    try:
        return any(True for _ in folder.iterdir())
    except OSError:
        return False


def _model_file_names(bilm: BiLM, fmt: str) -> Tuple[str, ...]:
    """The files :func:`save_pretrained` writes for ``bilm`` in layout ``fmt``."""
    from .manylangs.vocabulary import CHAR_DIC, WORD_DIC

    if fmt == "original":
        return (ORIGINAL_OPTIONS, ORIGINAL_WEIGHTS[0])
    dictionaries = (CHAR_DIC, WORD_DIC) if bilm.options.char_vocabulary is not None else ()
    return (NATIVE_WEIGHTS, NATIVE_CONFIG, *dictionaries)


def _save_whole(bilm: BiLM, folder: Path, fmt: str) -> None:
    """:func:`save_pretrained` into the existing ``folder`` (its lock held): the files written
    into a new folder that replaces it whole (:func:`elmo.model_replace.replacing_model_folder`).
    The original layout's pair keeps the locks a :func:`save_original` into the folder takes."""
    from contextlib import ExitStack

    from .model_replace import replacing_model_folder
    from .output_checks import check_output_file
    from .output_lock import output_lock

    names = _model_file_names(bilm, fmt)
    with ExitStack() as locks:
        if fmt == "original":   # (in save_original's order)
            for name, what in ((ORIGINAL_WEIGHTS[0], "weights"), (ORIGINAL_OPTIONS, "options")):
                check_output_file(folder / name, what)
                locks.enter_context(output_lock(folder / name))
        with replacing_model_folder(folder, names) as stage:
            _save_files(bilm, stage, fmt)


def _save_files(bilm: BiLM, folder: Path, fmt: str) -> None:
    """Write ``bilm``'s files in layout ``fmt`` into ``folder`` one by one, then their entries of
    the record of its ``metadata.json`` (where it has one)."""
    if fmt == "original":
        save_original(bilm, folder / ORIGINAL_OPTIONS, folder / ORIGINAL_WEIGHTS[0])
        return
    # (where the folder's metadata.json records its files: as save_original's)
    with replacing_recorded(folder / n for n in _model_file_names(bilm, fmt)):
        if bilm.options.char_vocabulary is not None:
            bilm.token_encoder.require_id_scheme().save(folder)
        state = {k: v.detach().contiguous().cpu() for k, v in bilm.state_dict().items()}
        tmp = atomic_target(folder / NATIVE_WEIGHTS)
        try:
            with writing(folder / NATIVE_WEIGHTS, "model weights"):
                write_safetensors(state, tmp, metadata={"format": "elmo-native-1",
                                                        MODEL_OPTIONS_KEY: model_options_digest(bilm.options)})
                atomic_commit(tmp, folder / NATIVE_WEIGHTS)   # (its flush may find the disk full)
        finally:
            tmp.unlink(missing_ok=True)
        with writing(folder / NATIVE_CONFIG, "model options"):   # (as the weights: named where it was going)
            atomic_write_text(folder / NATIVE_CONFIG, bilm.options.to_json() + "\n")


def _load_native(folder: Path, stateful: bool, dtype: torch.dtype | None = None) -> BiLM:
    options = ElmoOptions.from_file(folder / NATIVE_CONFIG)
    check_weights_fit_the_file(folder, options)
    id_scheme = dictionary_id_scheme(folder, options)
    with init_skipped():   # (load_state_dict below overwrites every weight, strict)
        bilm = BiLM(options, stateful=stateful, id_scheme=id_scheme)
    state, metadata = read_safetensors(folder / NATIVE_WEIGHTS)
    check_tensors_fit(folder, state, bilm.state_dict())
    check_config_belongs(folder, options, metadata)   # (after the shapes: their messages say more)
    # The file holds each tensor in the model's dtype when it was saved; the model was built in
    # float32 (a bfloat16 model loaded back as float32): it gets that dtype back. The weights are
    # read into a model of the saved dtype, then converted: read into float32 first, a float64
    # model came back float64 with every weight rounded to float32 on the way.
    saved = {t.dtype for t in state.values() if t.is_floating_point()}
    stored = saved.pop() if len(saved) == 1 else None
    if stored is not None and stored != torch.float32:
        bilm = bilm.to(stored)
    # (copied, not load_state_dict(assign=True): safetensors' tensors are a private map of the
    # file, and a model holding them would read a file changed in place, or die of SIGBUS if
    # it was truncated)
    bilm.load_state_dict(state)
    target = dtype or restored_dtype(stored) or torch.float32
    return bilm.to(target) if model_dtype(bilm) != target else bilm


def _refuse_broken_links(folder: Path) -> None:
    """A model file that is a symbolic link to nothing (a moved or deleted target, a loop) is
    named: it counted as absent, so the folder was said to lack the file it shows, or loaded
    from its other layout's files instead. An ELMoForManyLangs folder's dictionaries and
    .pkl state dicts too (each was said to be "not found")."""
    from .manylangs.folder import ENCODER, TOKEN_EMBEDDER
    from .manylangs.vocabulary import CHAR_DIC, WORD_DIC

    for name in (NATIVE_CONFIG, NATIVE_WEIGHTS, ORIGINAL_OPTIONS, *ORIGINAL_WEIGHTS, CHAR_DIC, WORD_DIC,
                 TOKEN_EMBEDDER, ENCODER):
        path = folder / name
        if path.is_symlink() and not path.exists():
            raise WeightFileError(f"{path}: is a symbolic link to {os.readlink(path)}, which does not "
                                  f"exist (or links back to itself); restore its target or remove the link")


@contextmanager
def _cache_hint(*paths) -> Iterator[None]:
    """A ConfigError or WeightFileError in the block that names one of ``paths`` in the model
    cache says how to clear it (:func:`elmo.hub.resolve.with_cache_hint`)."""
    try:
        yield
    except (ConfigError, WeightFileError) as e:
        from .hub.resolve import with_cache_hint
        hinted = with_cache_hint(str(e), *paths)
        if hinted == str(e):
            raise
        raise type(e)(hinted) from None


def load_pretrained(path: str | Path, *, stateful: bool = False,
                    device: str | torch.device | None = None, dtype: str | torch.dtype | None = None) -> BiLM:
    """Load a model folder: native safetensors, the original HDF5 layout, or an ELMoForManyLangs
    folder (config.json naming a model configuration, char.dic, word.dic, *.pkl).

    The model gets the dtype it was saved in (see :func:`save_pretrained`; a float16 model loads
    as float32, see :func:`elmo.model_dtypes.restored_dtype`); ``dtype=`` (``torch.float32``,
    ``"bfloat16"`` ...) sets another."""
    from .manylangs.folder import ENCODER, TOKEN_EMBEDDER, is_manylangs_folder, load_manylangs
    from .manylangs.vocabulary import CHAR_DIC, WORD_DIC

    target = requested_dtype(dtype)
    folder = require_path("path (the model folder)", path)
    if not folder.is_dir():
        raise WeightFileError(f"{folder}: not a model folder")
    _refuse_broken_links(folder)
    if (folder / NATIVE_WEIGHTS).exists() or (not (folder / ORIGINAL_OPTIONS).exists()
                                             and is_manylangs_folder(folder)):
        # (a model unpacked into the cache and damaged since failed at every load: how to
        # clear it, as load_original says of its files)
        # (the files either reads, against the SHA-256 its metadata.json records, if any)
        read = [folder / n for n in (NATIVE_CONFIG, NATIVE_WEIGHTS, CHAR_DIC, WORD_DIC, TOKEN_EMBEDDER, ENCODER)]
        with _cache_hint(folder), checked_reads(read):
            if (folder / NATIVE_WEIGHTS).exists():
                bilm = _load_native(folder, stateful, target)
            else:
                bilm = load_manylangs(folder, stateful=stateful)
                bilm = bilm.to(target) if target is not None else bilm
    else:
        weights = next((folder / n for n in ORIGINAL_WEIGHTS if (folder / n).exists()), None)
        if weights is None or not (folder / ORIGINAL_OPTIONS).exists():
            # (a run folder of elmo train was refused as if damaged: its model is a folder down)
            run = (f"; {folder} is a run folder: its trained model is {folder / 'model'}"
                   if (folder / "model" / ORIGINAL_OPTIONS).is_file() else "")
            raise WeightFileError(f"{folder}: expected {NATIVE_CONFIG} + {NATIVE_WEIGHTS}, or "
                                  f"{ORIGINAL_OPTIONS} + one of {', '.join(ORIGINAL_WEIGHTS)}, or an "
                                  f"ELMoForManyLangs folder (config.json, char.dic, *.pkl){run}")
        bilm = load_original(folder / ORIGINAL_OPTIONS, weights, stateful=stateful, dtype=target)
    bilm.eval()
    _loaded_from(bilm, model_files(folder))
    return bilm.to(resolve_device(device, None, "device")) if device is not None else bilm
