"""Ship a trained model folder (``elmo train``'s ``OUTPUT/model``) as a bundled model.

    python -m elmo.training.ship runs/default/run/model elmo/resources/default \\
        --bilm-dtype float32 --softmax-dtype float16

Writes, as one folder that replaces DEST whole: ``options.json`` + ``weights.hdf5`` (the original layout, in
``--bilm-dtype``), ``softmax.hdf5`` (``softmax/W`` and ``softmax/b`` in ``--softmax-dtype``),
``vocab.txt`` (and ``vocab_counts.tsv`` when the model has
it) and ``metadata.json`` (the training metadata, home folder written as ``~``,
plus a ``shipped`` entry: the dtypes and the SHA-256 of every source file, and ``files_sha256``:
the SHA-256 of each shipped file, checked by every load, see :mod:`elmo.folder_checksums`). Loading converts
float16 back to float32, so a float16 file costs only its rounding, which
:mod:`elmo.training.precision` measures. Refuses to write more than ``--max-mb`` in all: the
files are written in a folder beside DEST first (``DEST.partial``), which takes DEST's place in one
step once all are written and allowed: a reader or a killed ship finds the old folder or the new one.
Other files of DEST (a model card) go into the new folder (hard links, or copies).
A DEST holding model files that shipping does not write (``model.safetensors``, ``config.json``,
``lm_weights.hdf5``, another model's ``vocab_counts.tsv``) is refused before any work.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable, Dict, Tuple

import h5py
import torch

from ..io import atomic_write_text, no_empty_folder_on_failure, remove_dead_temporaries, shipping_into
from ..folder_swap import atomic_folder, keep_other_entries, writer_lock
from ..hdf5_writer import new_hdf5
from ..output_checks import check_output_dir
from .. import strict_json
from ..user_paths import expand_args
from ..checksums import HDF5_ATTRIBUTE
from ..folder_checksums import RECORD_KEY, LoadChecks, current_sha256, record_files
from ..native_layout import NATIVE_CONFIG, NATIVE_WEIGHTS
from ..original_layout import ORIGINAL_WEIGHTS, STORAGE_DTYPES, check_dataset_checksum, narrowed, write_weight_dataset
from ..weights import load_original, save_original
from .export import COUNTS_FILE, METADATA_FILE, SOFTMAX_FILE, VOCAB_FILE, load_vocabulary, read_metadata

DTYPES = STORAGE_DTYPES
SHIPPED_FILES = ("options.json", "weights.hdf5", SOFTMAX_FILE, VOCAB_FILE, METADATA_FILE)
#: Files of a model folder that shipping does not write: refused in DEST (see :func:`ship`).
STALE_FILES = (NATIVE_CONFIG, NATIVE_WEIGHTS, *ORIGINAL_WEIGHTS[1:], COUNTS_FILE)
#: The lock file earlier versions held inside DEST (a killed one's is not carried over).
OLD_LOCK = "ship.lock"


def _home_as_tilde(value):
    home = str(Path.home())
    if isinstance(value, str):
        return "~" + value[len(home):] if value.startswith(home + "/") else value
    if isinstance(value, list):
        return [_home_as_tilde(v) for v in value]
    if isinstance(value, dict):
        return {k: _home_as_tilde(v) for k, v in value.items()}
    return value


def write_softmax(src: Path, dest: Path, dtype: str) -> None:
    with h5py.File(src, "r") as h5_in, new_hdf5(dest, "softmax") as h5_out:   # (a full disk: one line naming dest)
        for name in ("softmax/W", "softmax/b"):
            values = h5_in[name][...]
            check_dataset_checksum(values, h5_in[name].name, h5_in[name].attrs.get(HDF5_ATTRIBUTE),
                                   src)   # (damage not shipped)
            write_weight_dataset(h5_out, name, narrowed(values, dtype, f"{src}: dataset '{name}'"))


def ship(src: str | Path, dest: str | Path, bilm_dtype: str = "float32", softmax_dtype: str = "float32",
         max_mb: float = 50.0) -> Dict[str, int]:
    """Write the bundled copy of ``src`` into ``dest``; returns the size of each file in bytes."""
    src, dest = Path(src), Path(dest)
    for dtype in (bilm_dtype, softmax_dtype):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    # (a NaN limit let any size through, since no size is more than NaN; a negative one was
    # refused only after every file had been written)
    if isinstance(max_mb, bool) or not isinstance(max_mb, (int, float)) or not 0 < max_mb < math.inf:
        raise ValueError(f"--max-mb must be a positive number of megabytes, got {max_mb!r}")
    sources = {name: current_sha256(src / name)
               for name in ("options.json", "weights.hdf5", SOFTMAX_FILE, VOCAB_FILE)}
    # the source as its metadata.json records it, where it does: a damaged file is not shipped
    # (hashed once: current_sha256 keeps the digests), and still so once read (confirmed
    # before the shipped folder takes DEST's place)
    checks = LoadChecks()
    checked = checks.verify([*(src / name for name in sources), src / COUNTS_FILE])
    # the vocabulary's counts go with it when the model has them (they were left behind)
    names = SHIPPED_FILES + ((COUNTS_FILE,) if (src / COUNTS_FILE).is_file() else ())
    # and must list vocab.txt's words: loading refuses a folder where they differ, so it was
    # shipped, and then refused where it was bundled
    load_vocabulary(src)
    # Shipping is how a bundled model's folder (elmo/resources/default) is written: the one
    # writer the package lets into it (every other output there is refused: elmo.io.refuse_bundled)
    with shipping_into(dest):
        check_output_dir(dest, "shipped folder")   # (before the lock file is made in it)
        # One copy at a time writes DEST: two at once moved their files in side by side, and the
        # folder held one source's weights beside the other's softmax. The lock file is beside DEST
        # (DEST.lock), not in it: the folder is replaced whole, and its lock file with it.
        # (writer_lock first puts back a DEST a killed swap without renameat2 left aside: found
        # missing, the checks below passed it; the swap then put it back and carried its files over)
        with no_empty_folder_on_failure(dest), writer_lock(dest):
            return _ship_locked(src, dest, bilm_dtype, softmax_dtype, max_mb, sources, names,
                                lambda: checks.confirm(checked))


def _ship_locked(src: Path, dest: Path, bilm_dtype: str, softmax_dtype: str, max_mb: float,
                 sources: Dict[str, str], names: Tuple[str, ...], confirm: Callable[[], None]) -> Dict[str, int]:
    """:func:`ship` once it holds DEST's lock; ``confirm`` raises where a source file read
    was not the one checked (:meth:`elmo.folder_checksums.LoadChecks.confirm`)."""
    # Files of a model there that shipping does not replace stayed beside the new weights: a
    # model.safetensors is what elmo.from_pretrained (elmo embed) loads first, so the folder
    # embedded with the old model and measured perplexity with the new one.
    stale = [n for n in STALE_FILES if n not in names and (dest / n).exists()]
    if stale:
        raise ValueError(f"{dest} also holds {', '.join(stale)} of the model there, which would stay beside "
                         f"the shipped files ({NATIVE_WEIGHTS} is loaded before weights.hdf5): remove "
                         f"them or choose another folder; nothing was written")
    # The new folder is written whole beside DEST (DEST.partial) and takes its place in one step
    # (atomic_folder): moved in one file at a time, a reader loading DEST meanwhile saw new
    # weights beside the old vocabulary and options, and a ship killed between two moves left
    # a folder of two models that loaded as one that never existed. Refused for its size (or
    # stopped by an error half-way), the new folder is deleted and DEST stays as it was.
    # (the caller holds no_empty_folder_on_failure(dest) and DEST's lock)
    remove_dead_temporaries(dest, ".shipping")   # (staging folders of killed earlier versions)
    with atomic_folder(dest) as stage:
        sizes = _write_shipped(src, stage, bilm_dtype, softmax_dtype, sources, names)
        total = sum(sizes.values())
        if total > max_mb * 1e6:
            raise ValueError(f"{dest}: {total / 1e6:.1f} MB to write, more than the {max_mb} MB allowed; "
                             f"nothing was written")
        confirm()   # (raised here, the new folder is deleted and DEST stays as it was)
        if dest.is_dir():   # DEST's files that shipping does not write (a model card) stay in it
            keep_other_entries(dest, stage)
            (stage / OLD_LOCK).unlink(missing_ok=True)   # (a killed earlier version's, no file of the model)
    return sizes


def _write_shipped(src: Path, dest: Path, bilm_dtype: str, softmax_dtype: str,
                   sources: Dict[str, str], names: Tuple[str, ...] = SHIPPED_FILES) -> Dict[str, int]:
    # float32 (exact for every stored dtype), so the shipped files load as their dtypes say:
    # a source saved from a bfloat16 model recorded that, and the record went with it
    bilm = load_original(src / "options.json", src / "weights.hdf5", dtype=torch.float32)
    save_original(bilm, dest / "options.json", dest / "weights.hdf5", dtype=bilm_dtype)
    write_softmax(src / SOFTMAX_FILE, dest / SOFTMAX_FILE, softmax_dtype)
    for name in (VOCAB_FILE, COUNTS_FILE):
        if name in names:
            atomic_write_text(dest / name, (src / name).read_text(encoding="utf-8"))
    meta = _home_as_tilde(read_metadata(src))
    # a URL with a login that the metadata records is not copied whole (see elmo.redact)
    from ..redact import REDACTED_NOTE, redact_record
    meta, redacted = redact_record(meta)
    if redacted:
        print(f"ship: warning: {src / METADATA_FILE}: {REDACTED_NOTE}", file=sys.stderr)
    meta["shipped"] = {"bilm_dtype": bilm_dtype, "softmax_dtype": softmax_dtype,
                       "source_sha256": sources}
    # the shipped files' own SHA-256, which every load of the bundled model checks (the source's
    # differ: its weights were stored in other dtypes)
    meta[RECORD_KEY] = record_files(dest, [n for n in names if n != METADATA_FILE])
    atomic_write_text(dest / METADATA_FILE, strict_json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return {name: (dest / name).stat().st_size for name in names}


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m elmo.training.ship`` (its path arguments'
    destinations are among :data:`elmo.user_paths.PATH_SETTINGS`)."""
    p = argparse.ArgumentParser(prog="python -m elmo.training.ship", description=__doc__.split("\n")[0],
                                allow_abbrev=False)
    p.add_argument("src", type=Path, help="trained model folder (options.json, weights.hdf5, softmax.hdf5, vocab.txt)")
    p.add_argument("dest", type=Path, help="folder to write, e.g. elmo/resources/default")
    p.add_argument("--bilm-dtype", choices=DTYPES, default="float32")
    p.add_argument("--softmax-dtype", choices=DTYPES, default="float32")
    p.add_argument("--max-mb", type=float, default=50.0, help="size limit of the written files (MB)")
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    try:   # (a quoted "~/m" made a folder named "~", as in the elmo command: see elmo.user_paths)
        expand_args(args)
        sizes = ship(args.src, args.dest, args.bilm_dtype, args.softmax_dtype, args.max_mb)
    except (ValueError, OSError) as e:   # (a traceback, for a refused size or a missing file)
        from ..cli import one_line
        print(f"{p.prog}: error: {one_line(e)}", file=sys.stderr)
        return 1
    for name, size in sizes.items():
        print(f"{args.dest / name}: {size / 1e6:.2f} MB")
    print(f"total {sum(sizes.values()) / 1e6:.2f} MB (biLM {args.bilm_dtype}, softmax {args.softmax_dtype})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
