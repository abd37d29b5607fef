"""The dtypes a model is saved and loaded in: their names (:data:`DTYPES`), a loader's
``dtype=`` (:func:`requested_dtype`), and the dtype a saved model comes back in when none is
asked for (:func:`restored_dtype`)."""
from __future__ import annotations

import torch

from .modules.bilm import BiLM


#: The dtypes a model may be saved in, by name (what the files record of it).
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}


def model_dtype(bilm: BiLM) -> torch.dtype:
    """The dtype of a model's weights."""
    return bilm.token_encoder.projection.weight.dtype


def dtype_name(dtype: torch.dtype) -> str:
    """The name :data:`DTYPES` gives ``dtype`` (what a file records of it)."""
    return next(name for name, d in DTYPES.items() if d == dtype)


def requested_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """``dtype=`` of a loader as a torch dtype (None: as the model was saved)."""
    if dtype is None or isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.removeprefix("torch.")]
    raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (or None: as saved), got {dtype!r}")


def restored_dtype(saved: torch.dtype | None) -> torch.dtype | None:
    """The dtype a model saved in ``saved`` loads back in when the loader is given none.

    float16 loads as float32, as it always did: it is how models are stored to halve the file
    (``save_original(dtype="float16")``, ``elmo ship``), and on a CPU a float16 model runs
    several times slower than float32 (4.5x for the default model in one hand-timed comparison) and rounds every product,
    which a round trip must not bring on unasked. ``dtype=torch.float16`` keeps it float16.
    bfloat16 and float64 are restored."""
    return None if saved == torch.float16 else saved
