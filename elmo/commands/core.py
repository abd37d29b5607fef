"""Core subcommands: ``elmo info``, ``elmo convert`` and ``elmo demo``."""
from __future__ import annotations

import argparse
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Tuple, cast

from . import threads_help

#: Files that describe a model folder's weights and go with them when it is converted: its card,
#: README and licence (``metadata.json``, how it was trained, is rewritten with ``converted_from``).
CARD_FILES = ("MODEL_CARD.md", "README.md", "LICENSE", "LICENSE.txt", "LICENSE.md")


def register(subparsers) -> None:
    p = subparsers.add_parser("info", help="show a model's configuration and size",
                              description="Print the options and parameter count of a model.")
    p.add_argument("model", help="bundled model name (default, fixture), published model name "
                                 "(`elmo models list`), model folder or http(s) URL")
    p.set_defaults(func=info)

    p = subparsers.add_parser(
        "convert", help="convert a model folder between the original HDF5 and safetensors layouts",
        description="Load a model folder in either layout and save it in the other.")
    p.add_argument("model", help="bundled or published model name, model folder or http(s) URL")
    p.add_argument("output", help="folder to write")
    p.add_argument("--to", choices=["original", "safetensors"], default="safetensors",
                   help="layout to write (default: safetensors)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of that layout when OUTPUT already holds them")
    p.set_defaults(func=convert)

    p = subparsers.add_parser(
        "demo", help="embed a few sentences and show how context changes the vectors",
        description="Embed example sentences with a model and print, per layer, how similar the "
                    "vectors of the same word are across contexts.")
    p.add_argument("--model", default=None,
                   help="bundled or published model name, model folder or http(s) URL "
                        "(default: the bundled default)")
    p.add_argument("--threads", type=int, default=1,
                   help=threads_help("1", "; the demo's batches are small, and on a busy machine "
                                          "more threads mostly wait for each other"))
    p.set_defaults(func=demo)


def info(args: argparse.Namespace) -> int:
    import elmo

    from ..model_dtypes import model_dtype

    bilm = elmo.from_pretrained(args.model)
    n_params = sum(p.numel() for p in bilm.parameters())
    print(bilm.options.to_json())
    print(f"parameters: {n_params:,}")
    print(f"layers: {bilm.num_layers} of width {bilm.output_dim}")
    # the dtype it loads in, which the files keep (a bfloat16 model runs in bfloat16 everywhere);
    # it said nothing of it: a bfloat16 model, or one shipped with float16 weights, read like a
    # float32 one
    print(f"dtype: {str(model_dtype(bilm)).removeprefix('torch.')} (as loaded)")
    if elmo.which_model(args.model, warn=False).folder is not None:   # (loading warned)
        from ..folder_checksums import folder_report
        from ..weights import model_files
        folder = elmo.model_path(args.model)
        # whether its files are the ones its writer recorded (the biLM's were checked by the load;
        # a softmax or vocabulary that differs is named here, and the exit status says so)
        verified, whole = folder_report(folder, [p.name for p in model_files(folder)])
        for line in stored_files(folder) + verified + provenance(folder):
            print(line)
        return 0 if whole else 1
    return 0


def stored_files(folder: Path) -> list:
    """A line per weight file of a model folder: its size on disk, the dtype it stores (a
    float16 file loads as float32; the original layout stores a bfloat16 model as float32) and
    whether it records its weights' checksums (:mod:`elmo.checksums`: files saved before they
    were kept, and the released ones, have none; the SHA-256 of the whole file that the folder's
    metadata.json may record is :func:`elmo.folder_checksums.folder_report`'s line)."""
    import torch

    from ..manylangs.folder import ENCODER, TOKEN_EMBEDDER
    from ..training.export import SOFTMAX_FILE
    import h5py

    from ..checksums import HDF5_ATTRIBUTE, METADATA_KEY
    from ..native_layout import NATIVE_WEIGHTS
    from ..original_layout import ORIGINAL_WEIGHTS, open_hdf5

    lines = []
    for name in (NATIVE_WEIGHTS, *ORIGINAL_WEIGHTS, SOFTMAX_FILE, TOKEN_EMBEDDER, ENCODER):
        path = folder / name
        if not path.is_file():
            continue
        if name in (TOKEN_EMBEDDER, ENCODER):   # an ELMoForManyLangs folder's state dicts (loaded already)
            state = torch.load(path, map_location="cpu", weights_only=True)
            kinds = {str(t.dtype).removeprefix("torch.") for t in state.values() if torch.is_tensor(t)}
        elif name == NATIVE_WEIGHTS:
            from safetensors import safe_open
            with safe_open(str(path), "pt") as f:
                kinds = {str(f.get_slice(k).get_dtype()).lower() for k in f.keys()}
                checked = [METADATA_KEY in (f.metadata() or {})]
            kinds = {{"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}.get(k, k)
                     for k in kinds}
        else:
            with open_hdf5(path) as h5:
                datasets: list = []
                h5.visititems(lambda _, obj: datasets.append(obj) if isinstance(obj, h5py.Dataset) else None)
                kinds = {str(d.dtype) for d in datasets}
                checked = [HDF5_ATTRIBUTE in d.attrs for d in datasets]
        line = f"{name}: {path.stat().st_size / 1e6:.2f} MB, stored as {', '.join(sorted(kinds))}"
        if name not in (TOKEN_EMBEDDER, ENCODER):
            line += ", " + _checksum_note(checked)
        lines.append(line)
    return lines


def _checksum_note(checked: list) -> str:
    """What a weight file's checksum records cover, from one flag per record place (a
    safetensors file's one, or each HDF5 dataset's): each, some or none."""
    if checked and all(checked):
        return "CRC-32 recorded"
    if any(checked):
        return f"CRC-32 recorded for {sum(checked)} of its {len(checked)} datasets"
    return "no CRC-32 in the file (see the SHA-256 line)"


def _heldout_perplexities(meta: dict) -> str:
    """``held-out perplexity: B before adapting, A after (N sentences)`` from a finetuned
    model's metadata (its last adaptation), or "" where it records no pair (a model adapted
    before the second was recorded, or none)."""
    from ..checks import is_number
    before, after = meta.get("heldout_ppl_before"), meta.get("heldout_ppl_after")
    if not (isinstance(before, dict) and isinstance(after, dict)
            and is_number(before.get("ppl")) and is_number(after.get("ppl"))):
        return ""
    count = after.get("sentences")
    return (f"held-out perplexity: {before['ppl']:.1f} before adapting, {after['ppl']:.1f} after"
            + (f" ({count:,} sentences)" if isinstance(count, int) and not isinstance(count, bool) else ""))


def provenance(folder: Path) -> list:
    """Lines saying where a model folder's weights come from, read from its ``metadata.json``
    (none without one): the training text, the model a run started from, the texts it was
    adapted on and its held-out perplexity before and after, and the folder it was converted
    from. A URL's password in them is shown as ``***``."""
    from ..training.adaptation import trained_text
    from ..training.export import METADATA_FILE, read_metadata
    if not (folder / METADATA_FILE).is_file():
        return []
    meta = read_metadata(folder)
    lines = []
    if meta.get("trained_on"):
        total = f"; {meta['tokens_total']:,} in all phases" if meta.get("tokens_total") else ""
        lines.append(f"trained on: {', '.join(map(str, meta['trained_on']))} ({meta.get('steps', 0):,} steps, "
                     f"{meta.get('tokens', 0):,} tokens{total})")
    start = (meta.get("warm_start") or {}).get("from")
    if start and not meta.get("adapted_from"):
        lines.append(f"warm start from: {start}")
    if meta.get("adapted_from"):
        lines.append(f"adapted from: {meta['adapted_from']}")
    for record in meta.get("adapted_on") or []:
        files = record.get("files") if isinstance(record, dict) else None
        trained = trained_text(record)   # (how much of it: the steps and tokens trained)
        lines.append(f"adapted on: {', '.join(map(str, files)) if files else record}"
                     + (f" ({trained})" if trained else ""))
    held = _heldout_perplexities(meta)
    if held:
        lines.append(held)
    if meta.get("converted_from"):
        lines.append(f"converted from: {meta['converted_from']}")
    shipped = meta.get("shipped")
    if isinstance(shipped, dict):
        lines.append(f"shipped: biLM {shipped.get('bilm_dtype')}, softmax {shipped.get('softmax_dtype')}")
    from ..redact import redact_url
    return [redact_url(line) for line in lines]     # (a URL it records may hold a login)


def convert(args: argparse.Namespace) -> int:
    from ..folder_swap import writer_lock
    from ..io import no_empty_folder_on_failure
    from ..output_checks import check_output_dir

    from . import refuse_dash
    refuse_dash(args.output, "OUTPUT", "a model is written to a folder: give its name", "folder")
    out = Path(args.output)
    check_output_dir(out, "model folder")
    # One convert at a time writes a folder: two at once both found it empty, and the second's
    # files replaced the first's (without --overwrite) or lay beside them as one model. The
    # lock (OUT.lock) is beside OUT, not in it: a new OUT is written whole beside it and renamed
    # (see _new_folder_whole), which a lock file made inside OUT would have prevented.
    # (writer_lock first puts back an OUT a convert killed in a swap without renameat2 left
    # aside as OUT.replaced: found missing, OUT was checked for nothing and written anew beside it)
    with no_empty_folder_on_failure(out), writer_lock(out):
        return _convert(args, out)


def _convert(args: argparse.Namespace, out: Path) -> int:
    import elmo

    from ..io import copy_file
    from ..output_checks import same_file
    from ..manylangs.folder import ENCODER, TOKEN_EMBEDDER, holds_manylangs_config
    from ..training.export import LM_FILES, METADATA_FILE
    from ..native_layout import NATIVE_CONFIG, NATIVE_WEIGHTS
    from ..original_layout import ORIGINAL_OPTIONS, ORIGINAL_WEIGHTS

    # another model's files there would be replaced without a trace: only when asked
    names: Tuple[str, ...] = (ORIGINAL_OPTIONS, ORIGINAL_WEIGHTS[0]) if args.to == "original" else (NATIVE_CONFIG, NATIVE_WEIGHTS)
    # How the model was trained and what it was adapted on go with it (they were left behind: an
    # experiment with the converted copy of an adapted biLM reported it as not domain-adapted).
    # Only a local folder has them (a bundled one too); a published model has none.
    named = elmo.which_model(args.model, warn=False)     # (loading it warns where a name is both)
    source = elmo.model_path(args.model) if named.folder is not None else None
    into_itself = same_file(source or Path(args.model), out)
    # (a new copy always gets one, for the SHA-256 record of its files at least)
    names += (METADATA_FILE,) if not into_itself else ()
    # The model card, README and licence describe these weights (the default model's card gives
    # its data and licence): a converted copy lost them. They go with it as they are.
    cards = tuple(n for n in CARD_FILES if source is not None and (source / n).is_file()) if not into_itself else ()
    names += cards
    if into_itself and args.to == "safetensors" and holds_manylangs_config(out):
        # (--overwrite replaced it: the folder lost the file that names its model configuration)
        raise ValueError(f"{args.output}: its config.json is the ELMoForManyLangs folder's (it names the model "
                         f"configuration), which the safetensors layout's config.json would replace: "
                         f"convert into another folder")
    present = [n for n in names if (out / n).exists()]
    if present and not args.overwrite:
        raise ValueError(f"{args.output} already holds {' and '.join(present)}: pass --overwrite to replace "
                         f"them, or choose another folder")
    # Files that belong to the weights there but are not replaced (the other layout, a trained
    # language model's softmax and vocabulary) would stay beside another model's weights: the
    # folder loaded as a mix of two models (perplexity with one's biLM and the other's softmax).
    # Converting a folder into itself keeps one model, so it may add the other layout.
    # (an ELMoForManyLangs folder's state dicts too: they stayed beside the new weights)
    model_files = (ORIGINAL_OPTIONS, *ORIGINAL_WEIGHTS, NATIVE_CONFIG, NATIVE_WEIGHTS, *LM_FILES, TOKEN_EMBEDDER, ENCODER)
    # A card, README or licence is another model's only beside that model's files: in a folder
    # without them it is the user's own (a project's README.md), which the convert leaves alone.
    holds_model = any((out / n).exists() for n in model_files)
    kept = [n for n in (*model_files, *(CARD_FILES if holds_model else ()))
            if n not in names and (out / n).exists()]
    if kept and not into_itself:
        raise ValueError(f"{args.output} also holds {', '.join(kept)} of the model there, which would stay "
                         f"beside the new weights: choose another folder")
    bilm = elmo.from_pretrained(args.model)
    if not into_itself:
        _check_dictionaries(bilm, out, args.to, args.overwrite)
    # A new folder is written beside OUT and takes its place once whole: killed half-way, the
    # weights without their config (or metadata) stayed at OUT, and the same command again was
    # refused as replacing them (or, with --overwrite, OUT held a mix of two models).
    with _new_folder_whole(out) as target:
        elmo.save_pretrained(bilm, target, fmt=args.to)
        if source is not None or not into_itself:
            _write_converted_metadata(source, target, into_itself, args.model)
        for name in cards:
            copy_file(cast(Path, source) / name, target / name)
    print(f"wrote {out} ({args.to})")
    return 0


def _write_converted_metadata(source: Optional[Path], target: Path, into_itself: bool, model: str) -> None:
    """The ``metadata.json`` of a converted model in ``target`` (the new folder, holding the
    files just saved): the source's (where the source folder has one; ``source`` None: a
    published ``model``, which has none), with ``converted_from`` and the SHA-256 of the files
    written (:mod:`elmo.folder_checksums`). Converted into itself, a folder with a record keeps
    it for its other files and gets the new files' (a rewritten file's old SHA-256 refused the
    folder's next load); one without a record keeps its metadata.json as it was."""
    from ..folder_checksums import RECORD_KEY, read_record, record_files
    from ..redact import REDACTED_NOTE, redact_record
    from ..training.export import METADATA_FILE, read_metadata, write_metadata

    written = record_files(target, [p.name for p in target.iterdir() if p.is_file()])
    if into_itself:
        assert source is not None   # (only a folder is converted into itself)
        record = read_record(source)
        if record is not None:
            write_metadata(target, {**read_metadata(source), RECORD_KEY: {**record, **written}})
        return
    # (not "shipped": how the source's files were stored, its softmax's too, is not how this
    # copy's are; elmo info showed a float16 softmax for a folder that has none; nor the
    # source's SHA-256 record)
    meta = read_metadata(source) if source is not None else {"adapted_on": []}
    kept_meta = {k: v for k, v in meta.items() if k not in ("shipped", RECORD_KEY)}
    # (a URL with a login that it records is not copied whole: see elmo.redact)
    kept_meta, redacted = redact_record(kept_meta)
    if redacted:
        print(f"elmo convert: warning: {cast(Path, source) / METADATA_FILE}: {REDACTED_NOTE}", file=sys.stderr)
    # (a published model's name or URL, which a login in it is not written with)
    converted_from = str(source.resolve()) if source is not None else redact_record(model)[0]
    write_metadata(target, {**kept_meta, "converted_from": converted_from, RECORD_KEY: written})


@contextmanager
def _new_folder_whole(out: Path) -> Iterator[Path]:
    """The folder to write OUT's files in, which takes OUT's place only once the block ends
    without an error: a kill or an error half-way leaves OUT as it was.

    A new OUT is written in a temporary folder beside it (``.OUT.HOST-PID-RANDOM.converting``,
    deleted by the next run if this one is killed) and renamed. An existing OUT (--overwrite,
    or a folder converted into itself) is written as ``OUT.partial`` (:func:`elmo.folder_swap.atomic_folder`)
    that gets, after the block, links to (or copies of) OUT's other files and folders, which
    convert kept before: then the two folders swap in one step. It wrote the files into OUT one
    by one, and a kill between them left the new weights beside the old model's config."""
    from ..io import give_ordinary_mode, no_empty_folder_on_failure, temporary_folder
    from ..folder_swap import atomic_folder, keep_other_entries, naming_as

    if out.exists():
        folder = out.resolve()   # (a link to a folder: the folder is swapped, the link stays)
        with atomic_folder(folder) as stage:
            yield stage
            keep_other_entries(folder, stage)
        return
    with no_empty_folder_on_failure(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = temporary_folder(out, ".converting")
        try:
            with naming_as(stage, out):
                yield stage
            give_ordinary_mode(stage)   # (made for its owner only: others could not read the model)
            stage.rename(out)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _check_dictionaries(bilm, out: Path, to: str, overwrite: bool) -> None:
    """The character (and word) dictionaries of an ELMoForManyLangs model are files of its
    safetensors layout: a char.dic or word.dic in OUT was replaced without --overwrite, and one
    that the new model does not write stayed beside its weights. Known once the model is loaded."""
    from ..manylangs.vocabulary import CHAR_DIC, WORD_DIC

    if to == "original" and bilm.options.char_vocabulary is not None:
        return   # (refused by save_pretrained: that layout cannot hold the dictionaries)
    scheme = bilm.id_scheme if bilm.options.char_vocabulary is not None else None
    written = () if scheme is None else (CHAR_DIC,) + ((WORD_DIC,) if scheme.words is not None else ())
    present = [n for n in written if (out / n).exists()]
    if present and not overwrite:
        raise ValueError(f"{out} already holds {' and '.join(present)}: pass --overwrite to replace "
                         f"them, or choose another folder")
    kept = [n for n in (CHAR_DIC, WORD_DIC) if n not in written and (out / n).exists()]
    if kept:
        raise ValueError(f"{out} also holds {', '.join(kept)} of the model there, which would stay "
                         f"beside the new weights: choose another folder")


def demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    from . import set_cli_threads
    set_cli_threads(args.threads)   # (a bad count named the library's parameter, threads)
    run_demo(args.model, args.threads)
    return 0
