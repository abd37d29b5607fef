"""The original layout: options.json beside an HDF5 file of weights (``weights.hdf5``), as
the original bilm-tf wrote it. This module maps a :class:`BiLM` to and from its arrays, and
opens, reads, checks (shape, type, checksum, finite values) and writes its datasets; the
loaders and savers that build a model from them are in :mod:`elmo.weights`.

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

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple, cast

import h5py
import numpy as np
import torch

from .checksums import HDF5_ATTRIBUTE, array_crc32, dataset_checksum_problem
from .checks import shown
from .config import ElmoOptions
from .hdf5_writer import HDF5Writer
from .io import atomic_target, os_error_reason
from .model_dtypes import DTYPES, dtype_name, model_dtype
from .modules.bilm import BiLM
from .native_layout import NATIVE_CONFIG, NATIVE_WEIGHTS, model_options_digest
from .output_checks import writing
from .weight_values import WeightFileError, check_finite


#: A model folder's files in the original layout: its options, and its weights by either name.
ORIGINAL_OPTIONS = "options.json"
ORIGINAL_WEIGHTS = ("weights.hdf5", "lm_weights.hdf5")


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
def assign_original_arrays(bilm: BiLM, arrays: Dict[str, np.ndarray]) -> None:
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
    Datasets outside the layout (a softmax, a step counter) are ignored. A file that records
    the digest of the options it was saved with (:data:`OPTIONS_ATTRIBUTE`) is refused with
    options of another digest, and so are the options of a dictionary model (ELMoForManyLangs),
    which this layout cannot hold.
    """
    path = Path(path)
    if options.char_vocabulary is not None:   # (it failed inside torch: 261 rows for 262)
        raise WeightFileError(f"{path}: the options have a char_vocabulary section (a dictionary "
                              f"model's, ELMoForManyLangs), which the original HDF5 layout cannot "
                              f"hold: such a model is saved as {NATIVE_CONFIG} + {NATIVE_WEIGHTS}")
    arrays = {}
    expected = expected_shapes(options)
    with open_hdf5(path) as h5:
        for name, shape in expected.items():
            arrays[name] = read_dataset(h5, path, name, shape)
        extra = _unexpected_layout_datasets(h5, path, expected)
        recorded = _recorded_options_digest(h5, path)
    if extra:
        raise WeightFileError(f"{path}: dataset '{extra[0]}' is not called for by the options"
                              + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
                              + "; the options describe fewer layers, highway layers or filters "
                              "than the file holds (wrong options.json for these weights?)")
    if recorded is not None and recorded != model_options_digest(options):   # (after the shapes: they say more)
        raise WeightFileError(f"{path}: was saved with other LSTM or CNN options than these (the options "
                              f"file of another save: a save_original interrupted between its two files, "
                              f"or an edited clip or activation); save the model again, or restore the "
                              f"options file saved with it")
    return arrays


def _recorded_options_digest(h5: h5py.File, path: Path) -> Optional[str]:
    """The digest of the options the file was saved with (:data:`OPTIONS_ATTRIBUTE`), None
    where it records none. An attribute that cannot be read or holds no text is a
    WeightFileError naming the file: an array there was numpy's "truth value of an array ...
    is ambiguous" when compared."""
    try:
        recorded = h5.attrs.get(OPTIONS_ATTRIBUTE)
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
        raise WeightFileError(f"{path}: its '{OPTIONS_ATTRIBUTE}' attribute cannot be read, the file is "
                              f"damaged: {_h5_reason(e)}") from None
    if isinstance(recorded, bytes):
        recorded = recorded.decode("utf-8", "replace")
    if recorded is not None and not isinstance(recorded, str):
        raise WeightFileError(f"{path}: its '{OPTIONS_ATTRIBUTE}' attribute holds {shown(recorded)}, not the "
                              f"digest of the options the weights were saved with: the file is damaged; "
                              f"restore it from a copy, or save the model again")
    return recorded


#: The names of the original layout, whatever the options (see the module docstring).
_LAYOUT_NAME = re.compile(r"char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/[Wb]_(carry|transform)"
                          r"|CNN_proj/[Wb]_proj|RNN_\d+/RNN/MultiRNNCell/Cell\d+/LSTMCell/(W_0|B|W_P_0)")


def read_dataset(h5: h5py.File, path: Path, name: str, shape: Tuple[int, ...],
                 source: str = "the options") -> np.ndarray:
    """The values of dataset ``name`` of the open HDF5 file ``path``, checked: there, a dataset
    (not a group), of ``shape`` (which ``source`` calls for), of numbers, every one of them
    written in the file itself (:func:`_values_not_in_file`), readable, the values
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
        elsewhere = _values_not_in_file(h5, dataset)
        # (not read where they are elsewhere: a missing external file fails the read, and its
        # error said only "truncated or corrupt")
        array = None if elsewhere else dataset[...]
        recorded = dataset.attrs.get(HDF5_ATTRIBUTE)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as e:
        raise _corrupt(path, name, shape, e) from None
    if array is None:
        raise WeightFileError(f"{path}: dataset '{name}' {elsewhere}; the weights must be written "
                              f"in the file itself: restore it from a copy, or save the model again")
    check_dataset_checksum(array, dataset.name, recorded, path)
    check_finite(array, f"{path}: dataset '{name}'")
    # (in this machine's byte order: torch.from_numpy refuses a big-endian array, which HDF5
    # files written on such machines or by other tools hold, in an error naming no file)
    return array.astype(array.dtype.newbyteorder("="), copy=False)


def check_dataset_checksum(array: np.ndarray, dataset_path: str, recorded: object, path: Path) -> None:
    """A WeightFileError naming the dataset at ``dataset_path`` (``h5py.Dataset.name``) of the
    file ``path`` where ``array``, read from it, is not what its checksum attribute
    (``recorded``; None: it has none) says was written there."""
    problem = dataset_checksum_problem(array, dataset_path, recorded)
    if problem is not None:
        raise WeightFileError(f"{path}: dataset '{dataset_path.lstrip('/')}' {problem}; the file is damaged: "
                              f"restore it from a copy, or save the model again")


def write_weight_dataset(h5: h5py.Group, name: str, array: np.ndarray) -> None:
    """Dataset ``name`` of the HDF5 file or group ``h5``, holding ``array`` as it is (contiguous,
    unfiltered, as the original layout's readers expect), with the CRC-32 of its path and values
    as an attribute (:mod:`elmo.checksums`), which :func:`read_dataset` checks. Every weight
    dataset the package writes goes through here."""
    dataset = h5.create_dataset(name, data=array)
    dataset.attrs[HDF5_ATTRIBUTE] = array_crc32(array, dataset.name)


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


def _values_not_in_file(h5: h5py.File, dataset: h5py.Dataset) -> str:
    """Why some values of ``dataset`` are not stored in the file ``h5`` ("" where all are).
    HDF5 reads a value that was never written, or one in another file that is missing or
    short, as the dataset's fill value (zero) without an error: a file whose writer died
    between a dataset's creation and its write loaded a model of zero weights, silently. Values
    in other files are refused too: no checksum of this file (its folder's SHA-256 record)
    vouches for them, and a copy of the file alone loses them."""
    if dataset.file.filename != h5.filename:
        return f"is a link to {dataset.file.filename}: its values are in another file"
    plist = dataset.id.get_create_plist()
    if plist.get_layout() == h5py.h5d.VIRTUAL:
        return "is a virtual dataset: its values are in other files (a missing one reads as zeros)"
    if plist.get_external_count():
        return "keeps its values in an external raw file (a missing or short one reads as zeros)"
    if dataset.id.get_space_status() != h5py.h5d.SPACE_STATUS_ALLOCATED:
        return ("holds values that were never written, which read as zeros (a writer stopped "
                "before it wrote them?)")
    return ""


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


#: The HDF5 attribute that records the dtype of a model that was not float32 when it was saved:
#: the original layout stores float32 (numpy has no bfloat16), which loads as float32 otherwise.
DTYPE_ATTRIBUTE = "torch_dtype"


def recorded_dtype(path: Path) -> torch.dtype | None:
    """The dtype :func:`elmo.weights.save_original` recorded in ``path`` (None: float32, or
    not recorded)."""
    with open_hdf5(path) as h5:
        name = h5.attrs.get(DTYPE_ATTRIBUTE)
    name = name.decode() if isinstance(name, bytes) else name
    return DTYPES.get(name) if isinstance(name, str) else None


#: The HDF5 attribute that records the digest of the LSTM and CNN options the weights were saved
#: with (:func:`elmo.native_layout.model_options_digest`, as ``model.safetensors`` records it):
#: the two files of a pair are replaced one after the other, and a save killed between them left
#: new weights beside the old options, which loaded silently where the shapes agree (another
#: clip or activation). Files written before it was kept are not checked.
OPTIONS_ATTRIBUTE = "elmo_options_sha256"


#: The dtypes the original layout's weights may be written in (``save_original(dtype=...)``).
STORAGE_DTYPES = ("float32", "float16")


def write_original_weights(bilm: BiLM, weight_file: Path, dtype: str) -> None:
    """The HDF5 file of :func:`elmo.weights.save_original` (its lock held), its datasets in
    ``dtype`` (one of :data:`STORAGE_DTYPES`)."""
    # Through HDF5Writer: a full disk is one OSError naming the file, with no HDF5 report
    # printed and no temporary file left; the previous file at weight_file stays as it was.
    with writing(weight_file, "weights"):
        out = HDF5Writer(atomic_target(weight_file))
        try:
            for name, array in _to_original_arrays(bilm).items():
                write_weight_dataset(out.file, name, narrowed(array, dtype, f"{weight_file}: dataset '{name}'"))
                out.check()
            if model_dtype(bilm) != torch.float32:   # (it loaded back as float32)
                out.file.attrs[DTYPE_ATTRIBUTE] = dtype_name(model_dtype(bilm))
            out.file.attrs[OPTIONS_ATTRIBUTE] = model_options_digest(bilm.options)
            out.commit(weight_file)
        except BaseException:
            out.abort()
            raise


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
