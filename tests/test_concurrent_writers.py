"""Two processes on one output: the second is refused in one line and leaves the first's work alone.

The first writer is played by the test: at the moment the second reaches its lock (a hook on
:func:`elmo.output_lock.output_lock`), the test makes what the first has made by then and holds the lock,
so each interleaving is exact and no test waits on another process's timing."""
from __future__ import annotations

import socket
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

import pytest

import elmo.output_lock
from elmo.io import OutputBusy


def first_writer_at_the_lock(monkeypatch, stack: ExitStack, before: Callable[[Path], None],
                             module=elmo.output_lock) -> None:
    """Make ``module.output_lock`` behave as if another process had started just before this one's lock:
    ``before(path)`` makes what that process has written by then, and the test holds the lock.

    A module first imported while the hook is in place binds it for good (``from ..output_lock import
    output_lock`` at its top), so once ``stack`` closes the hook passes every call on to the
    real lock: later tests in the same process get the real behaviour whatever they import."""
    real = elmo.output_lock.output_lock
    active = [True]

    def hooked(path: Path, *args, **kwargs):
        if not active[0]:
            return real(path, *args, **kwargs)
        before(path)
        stack.enter_context(real(path))                # the first writer's lock, held on
        return real(path, *args, **{**kwargs, "wait": 0.05})   # (refused at once: OutputBusy)

    stack.callback(active.__setitem__, 0, False)
    monkeypatch.setattr(module, "output_lock", hooked)


def test_a_refused_analysis_leaves_the_running_ones_picture_folder(tmp_path, monkeypatch):
    """Two `elmo analyze --out OUT` started together on a new OUT: the first locked OUT and drew
    into OUT/.pictures-*, still empty while its first section ran; the refused second deleted
    the folders made since it started that held no file, that one among them, and the first run
    failed after its sections had run."""
    from elmo.analysis.report import STAGING_PREFIX, AnalysisConfig, run_analysis

    out = tmp_path / "analysis"
    stage = out / f"{STAGING_PREFIX}first"
    with ExitStack() as first:
        first_writer_at_the_lock(monkeypatch, first, lambda path: stage.mkdir(parents=True))
        with pytest.raises(OutputBusy, match=f"{out} is already being written by PID"):
            run_analysis("fixture", out, AnalysisConfig(untrained_control=False), only=["contrast"], log=lambda s: None)
        assert stage.is_dir(), "the refused run deleted the running one's folder"


def test_a_refused_embed_leaves_the_running_ones_folder_of_parts(tmp_path, monkeypatch):
    """The same for `elmo embed IN OUT` twice: the first's OUT.parts, empty until its first
    segment is written, was deleted by the second, and the first's segment had nowhere to go."""
    import elmo.embedding.run
    from elmo.embedding import embed_file
    from elmo.embedding.output import parts_dir

    inp = tmp_path / "in.txt"
    inp.write_text("a b c\nd e\n")
    out = tmp_path / "new" / "out.hdf5"

    def first_has_begun(path: Path) -> None:
        parts_dir(out).mkdir(parents=True)

    with ExitStack() as first:
        first_writer_at_the_lock(monkeypatch, first, first_has_begun, elmo.embedding.run)
        with pytest.raises(OutputBusy, match=f"{out} is already being written by PID"):
            embed_file(inp, out, "fixture", token_cache=False)
        assert parts_dir(out).is_dir(), "the refused run deleted the running one's folder of parts"


def first_writer_fails_while_waited_for(monkeypatch, first: ExitStack, folder: Path) -> None:
    """At the second writer's first try for a lock in ``folder`` (held by the first writer),
    the first writer fails: it lets go of its lock and removes the empty folder it had made
    (:func:`elmo.io.no_empty_folder_on_failure`), as it does once it has let go."""
    import filelock

    real = filelock.FileLock._acquire
    done = []

    def first_fails_meanwhile(lock) -> None:
        if not done and Path(lock.lock_file).parent == folder:
            done.append(True)
            first.close()
            folder.rmdir()
        real(lock)

    monkeypatch.setattr(filelock.FileLock, "_acquire", first_fails_meanwhile)


def test_a_writer_waiting_for_a_lock_whose_folder_is_removed_gets_it(tmp_path, monkeypatch):
    """Two `elmo vocab build -o NEW/vocab.txt` (or train, experiment, data build-corpus into a
    new folder) a moment apart: the first, failing, removed NEW while the second waited for its
    lock there, and the second stopped with "NEW/vocab.txt: cannot write in NEW: No such file
    or directory" (nothing wrong with NEW). Now the second writes NEW/vocab.txt."""
    from elmo.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\nthe dog ran\n")
    out = tmp_path / "new"
    out.mkdir()
    with ExitStack() as first:
        first.enter_context(elmo.output_lock.output_lock(out / "vocab.txt"))
        first_writer_fails_while_waited_for(monkeypatch, first, out)
        assert main(["vocab", "build", str(corpus), "--output", str(out / "vocab.txt")]) == 0
    assert (out / "vocab.txt").read_text().split("\n")[3:5] == ["the", "cat"]


def test_experiment_table_of_a_folder_an_experiment_writes_says_so(tmp_path, capsys):
    """`elmo experiment-table RES` while `elmo experiment --out RES` runs: the experiment
    rewrites RES/results.json after each run, and the table was of the runs finished so far
    (13 of 40 seeds, say) without a word. It says so now, naming the writer; a lock file that
    a killed experiment left names none."""
    import json
    import os

    from elmo.cli import main
    from test_tasks_compare import OLD

    results = tmp_path / "res" / "results.json"
    results.parent.mkdir()
    results.write_text(json.dumps(OLD))
    with elmo.output_lock.output_lock(results, name=results.parent):    # the experiment's, while it runs
        assert main(["experiment-table", str(results.parent)]) == 0
    captured = capsys.readouterr()
    assert "| two-tasks | pos |" in captured.out
    assert (f"elmo experiment-table: warning: {results} is being written by PID {os.getpid()}"
            f" on {socket.gethostname()} (an experiment runs there)") in captured.err
    elmo.output_lock.lock_path(results).write_text(f"{2 ** 22 + 1} {socket.gethostname()}\n")   # (no such process)
    assert main(["experiment-table", str(results)]) == 0
    assert capsys.readouterr().err == ""


def test_a_convert_of_a_runs_model_while_the_run_exports_it_is_refused(tmp_path, monkeypatch, capsys):
    """`elmo convert RUN/model RUN/model --to safetensors` while `elmo train -o RUN` exported
    RUN/model: both staged in RUN/model.partial, the convert deleted the export's files there,
    and the export then put in place a folder of its metadata.json alone. The convert is now
    refused (the export holds RUN/model.lock, as convert does) and the export is whole."""
    import torch

    import elmo.training.export as export
    from elmo.cli import main
    from elmo.config import ElmoOptions
    from elmo.training.export import export_model, load_language_model
    from elmo.training.model import LanguageModel
    from elmo.vocab import Vocabulary
    from training_helpers import tiny_model_options, write_toy_corpus

    _, _, vocab_path = write_toy_corpus(tmp_path / "corpus", n_train=50, n_heldout=5)
    vocab = Vocabulary.load(vocab_path)
    torch.manual_seed(0)
    model = LanguageModel(ElmoOptions.from_dict(tiny_model_options()), len(vocab), vocab.bos, vocab.eos, 0.0)
    folder = export_model(model, vocab, tmp_path / "run" / "model")   # an earlier export (a resumed run)
    real, codes = export.write_metadata, []

    def convert_meanwhile(target: Path, meta) -> None:   # the export's last file
        codes.append(main(["convert", str(folder), str(folder), "--to", "safetensors"]))
        real(target, meta)

    monkeypatch.setattr(export, "write_metadata", convert_meanwhile)
    export_model(model, vocab, folder)
    assert codes == [1]
    assert f"{folder} is already being written by PID" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["metadata.json", "options.json", "softmax.hdf5",
                                                         "vocab.txt", "weights.hdf5"]
    load_language_model(folder)


@pytest.mark.parametrize("command", ["plot-curve", "experiment-table"])
def test_a_picture_or_table_onto_an_output_another_command_writes_is_refused(tmp_path, capsys, command):
    """`elmo plot-curve LOG -o OUT` (or `experiment-table RES -o OUT`) while another command
    wrote OUT (an `elmo embed`, holding OUT.lock): they took no lock, checked OUT before the
    other had put its file there, and replaced that file with the picture. They hold the lock
    now, as every writer of a file does, and are refused while another holds it."""
    import json

    from elmo.cli import main
    from test_tasks_compare import OLD

    if command == "plot-curve":
        pytest.importorskip("matplotlib")
        source = tmp_path / "log.jsonl"
        source.write_text(json.dumps({"event": "train", "step": 2, "tokens": 160, "loss": 4.0,
                                      "train_ppl": 54.6}) + "\n", encoding="utf-8")
    else:
        source = tmp_path / "results.json"
        source.write_text(json.dumps(OLD), encoding="utf-8")
    out = tmp_path / "vectors.hdf5"
    with elmo.output_lock.output_lock(out):     # the other command's, until its file is in place
        assert main([command, str(source), "-o", str(out)]) == 1
    assert f"{out} is already being written by PID" in capsys.readouterr().err
    assert not out.exists()
