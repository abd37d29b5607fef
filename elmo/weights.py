"""Weights in the original layout (options.json + HDF5) and in a native safetensors folder.

The original HDF5 names and shapes (F = total filters, d = char dim, P = projection, H = cells)::

    char_embed                                   (261, d)  ids 1..261; id 0 is an added zero row
    CNN/W_cnn_{i}, CNN/b_cnn_{i}                 (1, w_i, d, n_i), (n_i,)
    CNN_high_{k}/W_carry, b_carry                (F, F), (F,)     t = sigmoid(x W_carry + b_carry)
    CNN_high_{k}/W_transform, b_transform        (F, F), (F,)     y = t relu(x W_tr + b_tr) + (1 - t) x
    CNN_proj/W_proj, b_proj                      (F, P), (P,)
    RNN_{d}/RNN/MultiRNNCell/Cell{j}/LSTMCell/W_0   (I + P, 4H)  rows: input then h; gates i, j, f, o
    RNN_{d}/RNN/MultiRNNCell/Cell{j}/LSTMCell/B     (4H,)        forget bias +1 added at run time
    RNN_{d}/RNN/MultiRNNCell/Cell{j}/LSTMCell/W_P_0 (H, P)       no bias
    (d = 0 forward, d = 1 backward)

Our highway keeps the original convention, so W_carry is stored as is (ports that use the
opposite gate convention negate it). Loading then saving gives the same bytes for every array.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple, cast

import h5py
import numpy as np
import torch

from .checks import require_path
from .config import ConfigError, ElmoOptions
from .io import atomic_commit, atomic_target, atomic_write_text, os_error_reason  # noqa: F401 (importable from here)
from .hdf5_writer import HDF5Writer
from .output_checks import writing
from .modules.bilm import BiLM
from .modules.skip_init import init_skipped
from .runtime import resolve_device
from .checksums import HDF5_ATTRIBUTE, METADATA_KEY as CHECKSUMS_KEY, array_crc32, checksum_problem, \
    checksum_record, dataset_checksum_problem


class WeightFileError(ValueError):
    """A weight file that is unreadable, truncated or does not fit the options."""


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_shapes(options: ElmoOptions) -> Dict[str, Tuple[int, ...]]:
    """Every dataset the original layout holds for these options, with its shape."""
    cnn, lstm = options.char_cnn, options.lstm
    f, p, h = cnn.n_filters, lstm.projection_dim, lstm.dim
    shapes: Dict[str, Tuple[int, ...]] = {"char_embed": (261, cnn.embedding_dim)}
    for i, (width, n) in enumerate(cnn.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, cnn.embedding_dim, n)
        shapes[f"CNN/b_cnn_{i}"] = (n,)
    for k in range(cnn.n_highway):
        for name in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{name}"] = (f, f)
            shapes[f"CNN_high_{k}/b_{name}"] = (f,)
    shapes["CNN_proj/W_proj"] = (f, p)
    shapes["CNN_proj/b_proj"] = (p,)
    for d in range(2):
        for j in range(lstm.n_layers):
            prefix = _lstm_prefix(d, j)
            shapes[f"{prefix}/W_0"] = (p + p, 4 * h)
            shapes[f"{prefix}/B"] = (4 * h,)
            shapes[f"{prefix}/W_P_0"] = (h, p)
    return shapes


def _to_original_arrays(bilm: BiLM) -> Dict[str, np.ndarray]:
    """The model's parameters as the original layout's arrays (float32 unless stored otherwise)."""
    enc, opts = bilm.token_encoder, bilm.options
    if opts.char_vocabulary is not None:
        raise WeightFileError("this model reads characters through a dictionary (an ELMoForManyLangs "
                              "model); the original HDF5 layout cannot hold it: save it as safetensors")
    # numpy has no bfloat16 (a bfloat16 model raised numpy's "unsupported ScalarType"):
    # float32 holds every bfloat16 value exactly
    t = lambda x: (x.detach().cpu().float() if x.dtype == torch.bfloat16  # noqa: E731
                   else x.detach().cpu()).numpy()
    arrays = {"char_embed": t(enc.char_embedding.weight[1:])}
    for i, conv in enumerate(enc.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = t(conv.weight.permute(2, 1, 0).unsqueeze(0))  # (1, w, d, n)
        arrays[f"CNN/b_cnn_{i}"] = t(conv.bias)
    f = opts.char_cnn.n_filters
    for k, hw in enumerate(enc.highway.layers):
        arrays[f"CNN_high_{k}/W_carry"] = t(hw.weight[:f].T)
        arrays[f"CNN_high_{k}/b_carry"] = t(hw.bias[:f])
        arrays[f"CNN_high_{k}/W_transform"] = t(hw.weight[f:].T)
        arrays[f"CNN_high_{k}/b_transform"] = t(hw.bias[f:])
    arrays["CNN_proj/W_proj"] = t(enc.projection.weight.T)
    arrays["CNN_proj/b_proj"] = t(enc.projection.bias)
    for j, layer in enumerate(bilm.lstm.layers):
        for d in range(2):
            prefix = _lstm_prefix(d, j)
            arrays[f"{prefix}/W_0"] = t(torch.cat([layer.weight_ih[d], layer.weight_hh[d]], dim=1).T)
            arrays[f"{prefix}/B"] = t(layer.bias[d])
            arrays[f"{prefix}/W_P_0"] = t(layer.weight_proj[d].T)
    return {k: np.ascontiguousarray(v) for k, v in arrays.items()}


@torch.no_grad()
def _assign_original_arrays(bilm: BiLM, arrays: Dict[str, np.ndarray]) -> None:
    """Copy the original layout's ``arrays`` into ``bilm``, dropping each from the dict once
    copied. A model built with its initialisation skipped holds memory not yet written (not yet
    resident), so freeing each array as its weights are written keeps the peak near one copy of
    the weights instead of two (the original model: 375 MB each)."""
    enc, opts = bilm.token_encoder, bilm.options
    dtype = enc.projection.weight.dtype

    def put(param: torch.Tensor, value: np.ndarray) -> None:
        param.copy_(torch.from_numpy(np.asarray(value, dtype=np.float32)).to(dtype))

    embedding = np.zeros((262, opts.char_cnn.embedding_dim), dtype=np.float32)
    embedding[1:] = arrays.pop("char_embed")
    put(enc.char_embedding.weight, embedding)
    for i, conv in enumerate(enc.convolutions):
        put(conv.weight, arrays.pop(f"CNN/W_cnn_{i}")[0].transpose(2, 1, 0))
        put(cast(torch.Tensor, conv.bias), arrays.pop(f"CNN/b_cnn_{i}"))  # Optional in torch: CharCNN's have one
    f = opts.char_cnn.n_filters
    for k, hw in enumerate(enc.highway.layers):
        put(hw.weight[:f], arrays.pop(f"CNN_high_{k}/W_carry").T)
        put(hw.bias[:f], arrays.pop(f"CNN_high_{k}/b_carry"))
        put(hw.weight[f:], arrays.pop(f"CNN_high_{k}/W_transform").T)
        put(hw.bias[f:], arrays.pop(f"CNN_high_{k}/b_transform"))
    put(enc.projection.weight, arrays.pop("CNN_proj/W_proj").T)
    put(enc.projection.bias, arrays.pop("CNN_proj/b_proj"))
    p = opts.lstm.projection_dim
    for j, layer in enumerate(bilm.lstm.layers):
        for d in range(2):
            prefix = _lstm_prefix(d, j)
            kernel = arrays.pop(f"{prefix}/W_0")
            put(layer.weight_ih[d], kernel[:-p].T)
            put(layer.weight_hh[d], kernel[-p:].T)
            put(layer.bias[d], arrays.pop(f"{prefix}/B"))
            put(layer.weight_proj[d], arrays.pop(f"{prefix}/W_P_0").T)
            del kernel   # (the largest arrays: each freed before the next is copied)


@contextmanager
def open_hdf5(path: Path, mode: str = "r") -> Iterator[h5py.File]:
    """``path`` opened with h5py; a missing, truncated or corrupt file is a WeightFileError
    that names it (h5py's own message does not)."""
    if path.is_dir():
        raise WeightFileError(f"{path}: is a directory, expected an HDF5 weight file")
    try:
        handle = h5py.File(path, mode)
    except FileNotFoundError:
        raise WeightFileError(f"{path}: weight file not found") from None
    except OSError as e:
        raise WeightFileError(f"{path}: not a readable HDF5 file (truncated or corrupt?): "
                              f"{os_error_reason(e)}") from None
    with handle:
        yield handle


def read_original_arrays(path: str | Path, options: ElmoOptions) -> Dict[str, np.ndarray]:
    """Read and check every dataset the options call for; errors name the dataset and shape.

    A layout dataset the options do not call for (a third LSTM layer, a second highway layer)
    is an error too: the model would be built without it and give other outputs, silently.
    Datasets outside the layout (a softmax, a step counter) are ignored.
    """
    path = Path(path)
    arrays = {}
    expected = expected_shapes(options)
    with open_hdf5(path) as h5:
        for name, shape in expected.items():
            arrays[name] = read_dataset(h5, path, name, shape)
        extra = _unexpected_layout_datasets(h5, path, expected)
    if extra:
        raise WeightFileError(f"{path}: dataset '{extra[0]}' is not called for by the options"
                              + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
                              + "; the options describe fewer layers, highway layers or filters "
                              "than the file holds (wrong options.json for these weights?)")
    return arrays


#: The names of the original layout, whatever the options (see the module docstring).
_LAYOUT_NAME = re.compile(r"char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/[Wb]_(carry|transform)"
                          r"|CNN_proj/[Wb]_proj|RNN_\d+/RNN/MultiRNNCell/Cell\d+/LSTMCell/(W_0|B|W_P_0)")


def read_dataset(h5: h5py.File, path: Path, name: str, shape: Tuple[int, ...],
                 source: str = "the options") -> np.ndarray:
    """The values of dataset ``name`` of the open HDF5 file ``path``, checked: there, a dataset
    (not a group), of ``shape`` (which ``source`` calls for), of numbers, readable, the values
    its checksum records (where it has one: :func:`write_weight_dataset`) and finite. Each way
    it is not is one WeightFileError naming the file and the dataset."""
    dataset = _hdf5_dataset(h5, path, name, shape)
    if tuple(dataset.shape) != shape:
        raise WeightFileError(f"{path}: dataset '{name}' has shape {tuple(dataset.shape)}, "
                              f"expected {shape} from {source}")
    # Floats only: an integer dataset (one damaged byte of a datatype message turns float32
    # into int32) read each weight's bits as a whole number, and the model loaded silently
    if dataset.dtype.kind != "f":
        raise WeightFileError(f"{path}: dataset '{name}' holds {dataset.dtype} values, "
                              f"expected floating-point numbers (float32 or float16)")
    try:
        array = dataset[...]
        recorded = dataset.attrs.get(HDF5_ATTRIBUTE)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as e:
        raise _corrupt(path, name, shape, e) from None
    check_dataset_checksum(array, recorded, path, name)
    check_finite(array, f"{path}: dataset '{name}'")
    # (in this machine's byte order: torch.from_numpy refuses a big-endian array, which HDF5
    # files written on such machines or by other tools hold, in an error naming no file)
    return array.astype(array.dtype.newbyteorder("="), copy=False)


def check_dataset_checksum(array: np.ndarray, recorded: object, path: Path, name: str) -> None:
    """A WeightFileError naming dataset ``name`` of ``path`` where ``array``, read from it, is not
    what its checksum attribute (``recorded``; None: it has none) says was written."""
    problem = dataset_checksum_problem(array, recorded)
    if problem is not None:
        raise WeightFileError(f"{path}: dataset '{name}' {problem}; the file is damaged: restore it from "
                              f"a copy, or save the model again")


def write_weight_dataset(h5: h5py.Group, name: str, array: np.ndarray) -> None:
    """Dataset ``name`` of the HDF5 file or group ``h5``, holding ``array`` as it is (contiguous,
    unfiltered, as the original layout's readers expect), with its CRC-32 as an attribute
    (:mod:`elmo.checksums`), which :func:`read_dataset` checks. Every weight dataset the package
    writes goes through here."""
    dataset = h5.create_dataset(name, data=array)
    dataset.attrs[HDF5_ATTRIBUTE] = array_crc32(array)


def _hdf5_dataset(h5: h5py.File, path: Path, name: str, shape: Tuple[int, ...]) -> h5py.Dataset:
    """The dataset ``name``, its shape and type readable: a damaged file's errors (h5py raises
    KeyError, RuntimeError or ValueError from deep inside) become one WeightFileError."""
    try:
        if name not in h5:
            raise WeightFileError(f"{path}: dataset '{name}' is missing (expected shape {shape})")
        dataset = h5[name]
        if not isinstance(dataset, h5py.Dataset):
            raise WeightFileError(f"{path}: '{name}' is a group, expected a dataset of shape {shape}")
        dataset.shape, dataset.dtype      # noqa: B018 - reading them decodes the header
    except WeightFileError:
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
        raise _corrupt(path, name, shape, e) from None
    return dataset


def _corrupt(path: Path, name: str, shape: Tuple[int, ...], e: Exception) -> WeightFileError:
    return WeightFileError(f"{path}: dataset '{name}' (expected shape {shape}) cannot be read, "
                           f"the file is truncated or corrupt: {_h5_reason(e)}")


def _h5_reason(e: Exception) -> str:
    """h5py's reason on one line (a KeyError's message without its quotes)."""
    if isinstance(e, OSError):
        return os_error_reason(e)
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return (text.strip().splitlines() or [type(e).__name__])[0]


def _unexpected_layout_datasets(h5: h5py.File, path: Path, expected) -> list:
    names: list = []
    try:
        h5.visititems(lambda name, obj: names.append(name)
                      if isinstance(obj, h5py.Dataset) else None)
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
        raise WeightFileError(f"{path}: the file's index cannot be read, it is truncated or "
                              f"corrupt: {_h5_reason(e)}") from None
    return sorted(n for n in names if n not in expected and _LAYOUT_NAME.fullmatch(n))


#: The exponent bits of the 16-bit floats: all set in NaN and inf, and in no other value.
_EXPONENT_BITS = {torch.bfloat16: 0x7F80, torch.float16: 0x7C00}


def check_finite(array: np.ndarray | torch.Tensor, where: str) -> None:
    """Raise WeightFileError naming ``where`` if ``array`` (numpy or torch) holds NaN or inf:
    such a weight makes every output NaN, silently (:func:`non_finite`)."""
    found = non_finite(array)
    if found is not None:
        count, first = found
        raise WeightFileError(f"{where} holds {count} non-finite values (NaN or inf), "
                              f"the first at index {first}")


def non_finite(array: np.ndarray | torch.Tensor) -> Optional[Tuple[int, Tuple[int, ...]]]:
    """(how many values of ``array`` are NaN or inf, the index of the first) where it holds
    any, else None; an array of no floating type holds none.

    A tensor on the CPU is checked through numpy (a view, no copy): ``torch.isfinite`` took
    about 20 times as long on a CPU, over half a second for a large model's weights
    (*scratch*). The 16-bit floats are checked by their bits (numpy lacks bfloat16, and its
    float16 check is slow): NaN and inf are the values whose exponent bits are all set."""
    if isinstance(array, torch.Tensor) and array.device.type != "cpu":
        if not array.is_floating_point():
            return None
        on_device = ~torch.isfinite(array)
        if not on_device.any():
            return None
        bad = on_device.cpu().numpy()
    elif isinstance(array, torch.Tensor):
        if not array.is_floating_point():
            return None
        tensor = array.detach()
        if tensor.dtype in _EXPONENT_BITS:
            exponent = _EXPONENT_BITS[tensor.dtype]
            bad = (tensor.view(torch.int16).numpy() & exponent) == exponent
        elif tensor.dtype in (torch.float32, torch.float64):
            bad = ~np.isfinite(tensor.numpy())
        else:   # (a float numpy lacks, float8 say: its values as float32)
            bad = ~np.isfinite(tensor.float().numpy())
    else:
        if array.dtype.kind != "f":
            return None
        bad = ~np.isfinite(array)
    bad = np.asarray(bad)   # (of a 0-dim value, numpy gives a scalar)
    if not bad.any():
        return None
    return int(bad.sum()), (tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ())


#: The dtypes a model may be saved in, by name (what the files record of it).
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}
#: The HDF5 attribute that records the dtype of a model that was not float32 when it was saved:
#: the original layout stores float32 (numpy has no bfloat16), which loads as float32 otherwise.
DTYPE_ATTRIBUTE = "torch_dtype"


def model_dtype(bilm: BiLM) -> torch.dtype:
    """The dtype of a model's weights."""
    return bilm.token_encoder.projection.weight.dtype


def _dtype_name(dtype: torch.dtype) -> str:
    return next(name for name, d in DTYPES.items() if d == dtype)


def requested_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """``dtype=`` of a loader as a torch dtype (None: as the model was saved)."""
    if dtype is None or isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.removeprefix("torch.")]
    raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (or None: as saved), got {dtype!r}")


def _restored_dtype(saved: torch.dtype | None) -> torch.dtype | None:
    """The dtype a model saved in ``saved`` loads back in when the loader is given none.

    float16 loads as float32, as it always did: it is how models are stored to halve the file
    (``save_original(dtype="float16")``, ``elmo ship``), and on a CPU a float16 model runs
    several times slower than float32 (4.5x for the default model in one hand-timed comparison) and rounds every product,
    which a round trip must not bring on unasked. ``dtype=torch.float16`` keeps it float16.
    bfloat16 and float64 are restored."""
    return None if saved == torch.float16 else saved


def _recorded_dtype(path: Path) -> torch.dtype | None:
    """The dtype :func:`save_original` recorded in ``path`` (None: float32, or not recorded)."""
    with open_hdf5(path) as h5:
        name = h5.attrs.get(DTYPE_ATTRIBUTE)
    name = name.decode() if isinstance(name, bytes) else name
    return DTYPES.get(name) if isinstance(name, str) else None


def load_original(options_file: str | Path, weight_file: str | Path, *, stateful: bool = False,
                  device: str | torch.device | None = None, dtype: str | torch.dtype | None = None) -> BiLM:
    """Build a :class:`BiLM` from options.json and the original HDF5 weights (paths, or http(s)
    URLs that are downloaded into the cache and checked first, see :mod:`elmo.hub`).

    The model gets the dtype it was saved in (a bfloat16 model's is recorded in the HDF5 file,
    which stores float32), float32 for files without a record or of a float16 model (see
    :func:`_restored_dtype`); ``dtype=`` sets another."""
    from .hub.urls import is_url
    require_path("options_file", options_file)
    require_path("weight_file", weight_file)
    if is_url(options_file) or is_url(weight_file):
        from .hub.resolve import local_pair
        options_file, weight_file = local_pair(options_file, weight_file)
    target = requested_dtype(dtype)
    # a cached download damaged past what a cheap look sees failed at every load, the
    # error naming the cache's file only: it now says how to clear it
    with _cache_hint(options_file, weight_file):
        options = ElmoOptions.from_file(options_file)
        # the file's shapes are checked before the model is built: options that disagree with
        # them by far (an lstm.dim of 2**30) had torch allocate hundreds of GB for it first, and
        # the load ended in a traceback from torch's allocator instead of naming the shape
        arrays = read_original_arrays(weight_file, options)
        with init_skipped():   # (every weight is assigned next: no random draws to throw away)
            bilm = BiLM(options, stateful=stateful)
        _assign_original_arrays(bilm, arrays)
    target = target or _restored_dtype(_recorded_dtype(Path(weight_file)))
    if target is not None and target != torch.float32:
        bilm = bilm.to(target)
    bilm.eval()
    _loaded_from(bilm, (options_file, weight_file))
    return bilm.to(resolve_device(device, None, "device")) if device is not None else bilm


#: The dtypes the original layout's weights may be written in (``save_original(dtype=...)``).
STORAGE_DTYPES = ("float32", "float16")


def _require_bilm(bilm, caller: str) -> None:
    if not isinstance(bilm, BiLM):  # else an AttributeError half way through writing
        raise TypeError(f"{caller} saves a BiLM (elmo.from_pretrained, or Elmo(...).bilm), "
                        f"got {type(bilm).__name__}")
    # Loading refuses NaN and inf (WeightFileError): written, such weights replaced the model
    # saved there before with one that no load gives back, found only at the next load
    for name, tensor in bilm.state_dict().items():
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
    """Write options.json and the HDF5 weights in the original layout (atomically).

    ``dtype="float16"`` halves the file; loading converts back to float32. A model that is not
    float32 (bfloat16, say) is stored as float32 with its dtype recorded, which loading restores
    (a float16 model's too, on request: see :func:`_restored_dtype`).

    One writer at a time, as :func:`save_pretrained`: it holds ``WEIGHTS.lock`` and
    ``OPTIONS.lock`` beside the two files, and raises :class:`elmo.io.OutputBusy` (naming the
    process) while another holds either. Two processes saving to one pair could leave one's
    weights beside the other's options.
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
    # Through HDF5Writer: a full disk is one OSError naming the file, with no HDF5 report
    # printed and no temporary file left; the previous file at weight_file stays as it was.
    with writing(weight_file, "weights"):
        out = HDF5Writer(atomic_target(weight_file))
        try:
            for name, array in _to_original_arrays(bilm).items():
                write_weight_dataset(out.file, name, narrowed(array, dtype, f"{weight_file}: dataset '{name}'"))
                out.check()
            if model_dtype(bilm) != torch.float32:   # (it loaded back as float32)
                out.file.attrs[DTYPE_ATTRIBUTE] = _dtype_name(model_dtype(bilm))
            out.commit(weight_file)
        except BaseException:
            out.abort()
            raise
    with writing(options_file, "options"):
        atomic_write_text(options_file, bilm.options.to_json() + "\n")


def narrowed(array: np.ndarray, dtype: str, where: str) -> np.ndarray:
    """``array`` in ``dtype``; a ValueError naming ``where`` if a finite value does not fit
    (float16 ends at 65504: a larger weight became inf, written without a word, and the file
    was refused as non-finite when it was loaded)."""
    with np.errstate(over="ignore"):   # (numpy's warning; the error below says which value)
        out = array.astype(dtype, copy=False)
    lost = out.dtype.kind == "f" and ~np.isfinite(out) & np.isfinite(array)
    if np.any(lost):
        big = float(np.abs(array[lost]).max())
        raise ValueError(f"{where}: a value of {big:.6g} does not fit {dtype} (largest "
                         f"{float(np.finfo(out.dtype).max):.6g}); save it in float32")
    return out


# ---------------------------------------------------------------------- native format
NATIVE_CONFIG = "config.json"
NATIVE_WEIGHTS = "model.safetensors"
ORIGINAL_OPTIONS = "options.json"
ORIGINAL_WEIGHTS = ("weights.hdf5", "lm_weights.hdf5")


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


def write_safetensors(state: Dict[str, torch.Tensor], path: Path, metadata: Dict[str, str] | None = None) -> None:
    """``safetensors.torch.save_file``, whose write errors (a full disk) are an OSError with
    their errno: safetensors raises its own error, with the OS error only in its text. The
    file's metadata records each tensor's CRC-32 (:mod:`elmo.checksums`), which
    :func:`read_safetensors` checks."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file
    metadata = {**(metadata or {}), CHECKSUMS_KEY: checksum_record(state)}
    try:
        save_file(state, str(path), metadata=metadata)
    except SafetensorError as e:
        code = re.search(r"\(os error (\d+)\)", str(e))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from e
    _sort_metadata_in_place(path)


def _sort_metadata_in_place(path: Path) -> None:
    """Rewrite the JSON header of the safetensors file ``path`` with its ``__metadata__`` keys
    sorted. safetensors keeps the metadata in a hash map whose order changes from one save to
    the next, so two saves of one model differed in bytes (and SHA-256) with equal content.

    The header is ``<u64 little-endian length><JSON, padded with spaces>``; the sorted JSON
    holds the same keys and values, so it fits the same length and the tensor data, whose
    offsets count from the header's end, is not moved."""
    with open(path, "r+b") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        if not isinstance(header.get("__metadata__"), dict):
            return
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(text) > length:   # (not expected: same content, same compact form; the file as
            return               # safetensors wrote it is valid, only its bytes not repeatable)
        f.seek(8)
        f.write(text.ljust(length))   # (spaces: the padding safetensors itself uses)


def save_pretrained(bilm: BiLM, folder: str | Path, fmt: str = "safetensors") -> Path:
    """Save a model folder: ``config.json`` + ``model.safetensors`` (native), or
    ``options.json`` + ``weights.hdf5`` (``fmt="original"``). A dictionary model
    (ELMoForManyLangs) also gets its ``char.dic`` (and ``word.dic``) and is native only.

    The weights' dtype is kept (:func:`load_pretrained` restores it, float16 as float32).
    ``stateful`` is not saved: it is how a caller runs the model (``from_pretrained(...,
    stateful=True)``), not part of it.

    One writer at a time: it holds ``FOLDER.lock`` beside the folder, as ``elmo convert``
    does, and raises :class:`elmo.io.OutputBusy` (naming the process) while another holds it.
    Two processes saving into one folder could leave one's weights beside the other's config.

    ``fmt="original"`` into a folder that holds ``model.safetensors`` is an
    :class:`elmo.io.OutputError`: loading reads the native weights first, so the new files would
    never be read."""
    import shutil

    from .io import OutputError, no_empty_folder_on_failure
    from .output_checks import check_output_dir
    from .output_lock import output_lock

    _require_bilm(bilm, "save_pretrained")  # before the folder is made
    if fmt not in ("safetensors", "original"):
        raise ValueError(f"fmt must be 'safetensors' or 'original', got {fmt!r}")
    folder = require_path("folder", folder)
    _refuse_bundled(folder, "model")
    check_output_dir(folder, "model folder")   # a file there: named, not "File exists"
    # (the folders made above it are removed once it is, after the lock file is deleted)
    with no_empty_folder_on_failure(folder), output_lock(folder, name=folder):
        made = not folder.exists()   # (seen under the lock: another writer's folder is not ours to delete)
        if fmt == "original" and (folder / NATIVE_WEIGHTS).exists():
            # load_pretrained reads a folder's native weights first: the original-layout files
            # written beside them were never loaded, and the folder gave back the older model
            raise OutputError(f"{folder}: holds a model in the native layout ({NATIVE_WEIGHTS}), which "
                              f"from_pretrained would load instead of the one saved in the original "
                              f"layout; remove {NATIVE_WEIGHTS} or save to another folder")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            if fmt == "original":
                save_original(bilm, folder / ORIGINAL_OPTIONS, folder / ORIGINAL_WEIGHTS[0])
                return folder
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
        except BaseException:
            if made:   # (a full disk, say): no half-written folder of this call left, to be taken for a model
                shutil.rmtree(folder, ignore_errors=True)
            raise
    return folder


#: The safetensors metadata key of :func:`model_options_digest` (``save_pretrained``).
MODEL_OPTIONS_KEY = "model_options_sha256"


def model_options_digest(options: ElmoOptions) -> str:
    """SHA-256 of the options that define the computation (the LSTM, the character CNN, a
    dictionary model's vocabulary sizes), not the training keys kept beside them."""
    model = {k: v for k, v in options.to_dict().items() if k in ("lstm", "char_cnn", "char_vocabulary")}
    return hashlib.sha256(json.dumps(model, sort_keys=True).encode("utf-8")).hexdigest()


def read_safetensors(path: Path, what: str = "model") -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """The tensors of the safetensors file ``path`` (never unpickled) and its metadata, read in
    one opening of the file. A folder there, a file that cannot be read (truncated, not
    safetensors), or one whose tensors are not those its checksums record (a damaged byte:
    :mod:`elmo.checksums`; a file without the record is not checked) is one
    WeightFileError naming it, which advises to save the ``what`` again; the values are not
    checked (:func:`check_finite`)."""
    from safetensors import SafetensorError, safe_open

    if path.is_dir():
        raise WeightFileError(f"{path}: is a directory, expected a safetensors file")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            state = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError) as e:
        reason = os_error_reason(e) if isinstance(e, OSError) else str(e)
        raise WeightFileError(f"{path}: unreadable safetensors file: {reason}; restore it from a copy, "
                              f"or save the {what} again") from None
    problem = checksum_problem(state, metadata)
    if problem is not None:
        raise WeightFileError(f"{path}: damaged: {problem}; restore it from a copy, or save the "
                              f"{what} again")
    return state, metadata


def _check_config_belongs(folder: Path, options: ElmoOptions, metadata: Dict[str, str]) -> None:
    """The weights were saved with the options ``config.json`` holds (where the weights record
    them in their file's ``metadata``: files written before the record was kept are not
    checked). ``save_pretrained`` commits ``model.safetensors``, then ``config.json``: a save
    killed between the two, over another model of the same shapes but other clips or
    activation, gave the new weights the old options, silently; so does a hand edit of a clip."""
    recorded = metadata.get(MODEL_OPTIONS_KEY)
    if recorded is not None and recorded != model_options_digest(options):
        raise WeightFileError(f"{folder / NATIVE_CONFIG}: not the model options {NATIVE_WEIGHTS} was saved with "
                              f"(a save interrupted between the two files, or an edited LSTM or CNN "
                              f"setting): save the model again, or restore the config.json saved with it")


def layer_weight_count(options: ElmoOptions) -> int:
    """The weights of the character CNN's filters, highway and projection and of the LSTM that
    these options call for (every layout and model kind holds them; the character and word
    embeddings, whose rows depend on the kind, are left out): ``expected_shapes`` summed
    without ``char_embed``, counted without building a tensor."""
    cnn, lstm = options.char_cnn, options.lstm
    f, p, h, d = cnn.n_filters, lstm.projection_dim, lstm.dim, cnn.embedding_dim
    filters = sum(width * d * n + n for width, n in cnn.filters)
    highway = cnn.n_highway * 2 * (f * f + f)
    per_direction_layer = 2 * p * 4 * h + 4 * h + h * p
    return filters + highway + f * p + p + 2 * lstm.n_layers * per_direction_layer


def _check_weights_fit_the_file(folder: Path, options: ElmoOptions) -> None:
    """Options that call for more weights than ``model.safetensors`` can hold (2 bytes each at
    the least) are refused before the model is built: an edited config.json (an lstm.dim of
    2**30) had torch allocate hundreds of GB first, and the load ended in a traceback from
    torch's allocator instead of naming the file."""
    weights = folder / NATIVE_WEIGHTS
    if not weights.is_file():
        return   # (named by the load that follows)
    needed, size = layer_weight_count(options), weights.stat().st_size
    if 2 * needed > size:
        raise WeightFileError(f"{folder / NATIVE_CONFIG}: describes a model of at least {needed:,} weights, more "
                              f"than {NATIVE_WEIGHTS} ({size:,} bytes) holds; is {NATIVE_CONFIG} the one saved "
                              f"with these weights?")


def _load_native(folder: Path, stateful: bool, dtype: torch.dtype | None = None) -> BiLM:
    options = ElmoOptions.from_file(folder / NATIVE_CONFIG)
    _check_weights_fit_the_file(folder, options)
    id_scheme = None
    if options.char_vocabulary is not None:
        from .manylangs import CharVocabulary
        id_scheme = CharVocabulary.from_folder(folder, options.char_cnn.max_characters_per_token,
                                               with_words=options.char_vocabulary.word_dim > 0)
        if (id_scheme.n_char_rows - 1, id_scheme.n_word_rows - 1 if id_scheme.words else 0) != \
                (options.char_vocabulary.n_characters, options.char_vocabulary.n_words):
            raise WeightFileError(f"{folder}: char.dic / word.dic have {id_scheme.n_char_rows - 1} / "
                                  f"{max(id_scheme.n_word_rows - 1, 0)} entries; {NATIVE_CONFIG} says "
                                  f"{options.char_vocabulary.n_characters} / {options.char_vocabulary.n_words}")
    with init_skipped():   # (load_state_dict below overwrites every weight, strict)
        bilm = BiLM(options, stateful=stateful, id_scheme=id_scheme)
    state, metadata = read_safetensors(folder / NATIVE_WEIGHTS)
    expected = bilm.state_dict()
    for name, tensor in expected.items():
        if name not in state:
            raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{name}' is missing "
                                  f"(expected shape {tuple(tensor.shape)})")
        if state[name].shape != tensor.shape:
            raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{name}' has shape "
                                  f"{tuple(state[name].shape)}, expected {tuple(tensor.shape)}")
        if state[name].is_floating_point() != tensor.is_floating_point():
            # (a header's "F32" edited to "I32": the same bytes read as whole numbers, copied
            # into the model without a word)
            raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{name}' holds {state[name].dtype} "
                                  f"values, expected {tensor.dtype}")
        check_finite(state[name], f"{folder / NATIVE_WEIGHTS}: tensor '{name}'")
    extra = sorted(k for k in state if k not in expected)
    if extra:   # a config.json with fewer layers than the weights: they would be dropped silently
        raise WeightFileError(f"{folder / NATIVE_WEIGHTS}: tensor '{extra[0]}' is not part of the "
                              f"model {NATIVE_CONFIG} describes"
                              + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
                              + f"; is {NATIVE_CONFIG} the one saved with these weights?")
    _check_config_belongs(folder, options, metadata)   # (after the shapes: their messages say more)
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
    target = dtype or _restored_dtype(stored) or torch.float32
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
    as float32, see :func:`_restored_dtype`); ``dtype=`` (``torch.float32``, ``"bfloat16"`` ...)
    sets another."""
    from .manylangs.folder import is_manylangs_folder, load_manylangs

    target = requested_dtype(dtype)
    folder = require_path("path (the model folder)", path)
    if not folder.is_dir():
        raise WeightFileError(f"{folder}: not a model folder")
    _refuse_broken_links(folder)
    if (folder / NATIVE_WEIGHTS).exists() or (not (folder / ORIGINAL_OPTIONS).exists()
                                             and is_manylangs_folder(folder)):
        # (a model unpacked into the cache and damaged since failed at every load: how to
        # clear it, as load_original says of its files)
        with _cache_hint(folder):
            if (folder / NATIVE_WEIGHTS).exists():
                bilm = _load_native(folder, stateful, target)
            else:
                bilm = load_manylangs(folder, stateful=stateful)
                bilm = bilm.to(target) if target is not None else bilm
    else:
        weights = next((folder / n for n in ORIGINAL_WEIGHTS if (folder / n).exists()), None)
        if weights is None or not (folder / ORIGINAL_OPTIONS).exists():
            raise WeightFileError(f"{folder}: expected {NATIVE_CONFIG} + {NATIVE_WEIGHTS}, or "
                                  f"{ORIGINAL_OPTIONS} + one of {', '.join(ORIGINAL_WEIGHTS)}, or an "
                                  f"ELMoForManyLangs folder (config.json, char.dic, *.pkl)")
        bilm = load_original(folder / ORIGINAL_OPTIONS, weights, stateful=stateful, dtype=target)
    bilm.eval()
    _loaded_from(bilm, model_files(folder))
    return bilm.to(resolve_device(device, None, "device")) if device is not None else bilm
