"""``elmo predict`` labels its input a part at a time: the output of a file of several parts is
byte for byte that of one part, at most one part's examples are held, and a run that fails in a
later part leaves no output (an earlier file kept, nothing on stdout)."""
from __future__ import annotations

import gc
import io
import sys
import weakref

import pytest

import elmo.commands.predict as predict_command
import elmo.tasks.saved as saved_module
from elmo.cli import main
from tests.test_tasks_files import _cut_copy, _saved_baseline

#: Lines of the input file: empty ones (lines 3, 9 and 22) in different parts, long ones cut.
LINES = ["the big cat sat", "a dog", "", "big big big big big big cat on the mat", "the cat",
         "a small dog ran", "big", "the mat", "   ", "cat dog cat dog cat dog cat dog", "the",
         "a big dog sat on the mat", "dog", "cat", "the small cat", "big dog", "the the the",
         "a cat sat on a big mat today", "dog cat", "the dog ran", "big cat", "", "the end"]


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """A classifier and a tagger (without ELMo), each as saved and cut to 5 tokens a text."""
    root = tmp_path_factory.mktemp("parts")
    (root / "c").mkdir()
    (root / "t").mkdir()
    classifier = _saved_baseline(root / "c", "classification")
    tagger = _saved_baseline(root / "t", "tagging")
    return {"classifier": classifier, "tagger": tagger,
            "cut classifier": _cut_copy(classifier, root / "c", 5), "cut tagger": _cut_copy(tagger, root / "t", 5)}


class _Spy:
    """predict_examples, counting its calls and the examples of each."""

    def __init__(self, monkeypatch):
        self.sizes: list = []
        self.real = saved_module.predict_examples
        monkeypatch.setattr(saved_module, "predict_examples", self)

    def __call__(self, model, examples, *args, **kwargs):
        self.sizes.append(len(examples))
        return self.real(model, examples, *args, **kwargs)


@pytest.mark.parametrize("model, fmt", [("classifier", "tsv"), ("cut classifier", "jsonl"),
                                        ("tagger", "conll"), ("cut tagger", "conll"), ("cut tagger", "jsonl")])
def test_a_file_of_several_parts_gets_the_output_of_one_part(saved_models, tmp_path, monkeypatch, capsys,
                                                             model, fmt):
    """Parts of 4 lines (batches of 2) give the bytes and the notes (line numbers counted over
    the whole file) that one part of the whole file gives."""
    text = tmp_path / "in.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    argv = ["predict", str(saved_models[model]), str(text), "--quiet", "--format", fmt, "--batch-size", "2"]
    monkeypatch.setattr(predict_command, "PART_LINES", 10 ** 6, raising=False)
    assert main(argv) == 0
    whole = capsys.readouterr()
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(predict_command, "PART_LINES", 4, raising=False)
    assert main(argv) == 0
    parts = capsys.readouterr()
    assert spy.sizes == [4] * 5 + [3]
    assert parts.out == whole.out and parts.err == whole.err
    assert f"{text}: lines 3, 9, 22 without tokens" in parts.err
    if model.startswith("cut"):
        assert f"{text}: lines 4, 10, 12, 18 longer than the model reads (max_tokens 5" in parts.err
    target = tmp_path / "out.txt"    # (-o: the same bytes, written in parts)
    assert main(argv + ["-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == whole.out


def test_a_part_is_rounded_to_whole_batches(saved_models, tmp_path, monkeypatch, capsys):
    """A part cut in the middle of a batch would make batches a whole-file run does not (a
    biLM's float32 results differ in the last bits with the batch)."""
    text = tmp_path / "in.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(predict_command, "PART_LINES", 7, raising=False)
    assert main(["predict", str(saved_models["classifier"]), str(text), "--quiet", "--batch-size", "3"]) == 0
    assert spy.sizes == [6, 6, 6, 5]
    monkeypatch.setattr(predict_command, "PART_LINES", 2, raising=False)   # (at least one batch)
    spy.sizes.clear()
    assert main(["predict", str(saved_models["classifier"]), str(text), "--quiet", "--batch-size", "3"]) == 0
    assert spy.sizes == [3] * 7 + [2]


def test_predict_reads_and_holds_one_part_at_a_time(saved_models, monkeypatch, capsys):
    """The whole input, its examples and its output were held at once (about 2 KB a line: a
    file of ten million lines could not be labelled): the input is read a part ahead at most,
    and no earlier part's examples live while a part is labelled."""
    lines_read = []
    real_lines = predict_command._input_lines

    def counted(path):
        for line in real_lines(path):
            lines_read.append(line)
            yield line

    earlier: list = []
    seen = []

    def spy(model, examples, *args, **kwargs):
        gc.collect()
        seen.append((len(lines_read), sum(ref() is not None for ref in earlier)))
        earlier.extend(weakref.ref(ex) for ex in examples)
        return real(model, examples, *args, **kwargs)

    real = saved_module.predict_examples
    monkeypatch.setattr(predict_command, "_input_lines", counted)
    monkeypatch.setattr(saved_module, "predict_examples", spy)
    monkeypatch.setattr(predict_command, "PART_LINES", 4)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(LINES * 3) + "\n").encode())))
    # the objects made before the run (a test run's torch, its modules) are set aside from the
    # collections: each of the 18 collections then scans what the run made, not the whole heap
    # (they took about 1 s each late in the default test run)
    gc.collect()
    gc.freeze()
    try:
        assert main(["predict", str(saved_models["classifier"]), "--quiet", "--batch-size", "2"]) == 0
    finally:
        gc.unfreeze()
    assert len(capsys.readouterr().out.splitlines()) == 3 * len(LINES)
    assert len(seen) == 18
    # part i (from 0) is labelled once lines 4i+1..4i+4 are read: not the whole input
    assert [read for read, _ in seen] == [min(4 * (i + 1), 3 * len(LINES)) for i in range(18)]
    assert [alive for _, alive in seen] == [0] * 18


@pytest.mark.parametrize("output", ["file", "stdout"])
def test_a_bad_line_in_a_later_part_of_stdin_leaves_no_output(saved_models, tmp_path, monkeypatch, capsys, output):
    """stdin is read once: a bad line (a tab) in its third part fails the run after two parts
    were labelled; -o keeps its earlier file and has no temporary beside it, and stdout gets
    nothing, as when predict held the whole output."""
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(predict_command, "PART_LINES", 4, raising=False)
    data = "\n".join(LINES[:9] + ["the cat\tbig"] + LINES[10:]) + "\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    target = tmp_path / "out" / "pred.tsv"
    target.parent.mkdir()
    target.write_text("earlier predictions\n")
    argv = ["predict", str(saved_models["classifier"]), "--quiet", "--batch-size", "2"]
    argv += ["-o", str(target), "--overwrite"] if output == "file" else ["-o", "-"]
    assert main(argv) == 1
    got = capsys.readouterr()
    assert "elmo predict: error: stdin:10: a tab; a classification model reads one text a line" in got.err
    assert spy.sizes == [4, 4]      # (the run failed after labelling)
    assert got.out == ""
    assert [p.name for p in target.parent.iterdir()] == ["pred.tsv"]
    assert target.read_text() == "earlier predictions\n"


def test_a_bad_line_of_a_file_is_found_before_any_is_labelled(saved_models, tmp_path, monkeypatch, capsys):
    """A file is read through once first: its last line's error comes before the model labels
    the lines before it (and the progress bar knows its length)."""
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(predict_command, "PART_LINES", 4, raising=False)
    text = tmp_path / "in.txt"
    text.write_bytes(("\n".join(LINES) + "\n").encode() + b"a \xff\n")
    assert main(["predict", str(saved_models["classifier"]), str(text), "--quiet"]) == 1
    assert f"{text}: line {len(LINES) + 1}: byte 0xff at byte offset" in capsys.readouterr().err
    assert spy.sizes == []


def test_a_named_pipe_input_is_read_once(saved_models, tmp_path, capsys):
    """A pipe (a FIFO, ``<(command)``) cannot be read twice: reading it through first for its bad
    lines would leave no line to label (an empty output, exit 0)."""
    import os
    import threading
    pipe = tmp_path / "in.fifo"
    os.mkfifo(pipe)
    data = ("\n".join(LINES) + "\n").encode()

    done = threading.Event()

    def feed():
        with open(pipe, "wb") as f:
            f.write(data)
        while not done.is_set():    # (a second reader gets an end of file, not a hang)
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:         # (no reader now)
                pass
            done.wait(0.01)
    writer = threading.Thread(target=feed)
    writer.start()
    try:
        assert main(["predict", str(saved_models["classifier"]), str(pipe), "--quiet"]) == 0
    finally:
        done.set()
        writer.join(timeout=60)
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == LINES


class _FullDisk(io.RawIOBase):
    """A file on a full disk: every write fails with ENOSPC, naming no file (as the OS says it)."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        import errno
        import os
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _full(*args, **kwargs):
    return io.TextIOWrapper(io.BufferedWriter(_FullDisk()), encoding="utf-8")


@pytest.mark.parametrize("output", ["file", "stdout"])
def test_a_full_disk_under_the_output_is_named_and_loses_nothing(saved_models, tmp_path, monkeypatch, capsys, output):
    """The output written in parts fills the disk: -o's file is named and its earlier content
    kept; for stdout, the temporary folder that holds its output until the end is named, and
    stdout gets nothing."""
    import tempfile

    import elmo.io as io_module
    text = tmp_path / "in.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    target = tmp_path / "out" / "pred.tsv"
    target.parent.mkdir()
    target.write_text("earlier predictions\n")
    argv = ["predict", str(saved_models["classifier"]), str(text), "--quiet"]
    if output == "file":
        monkeypatch.setattr(io_module, "open", _full, raising=False)
        argv += ["-o", str(target), "--overwrite"]
        named = str(target)
    else:
        monkeypatch.setattr(tempfile, "TemporaryFile", _full)
        named = tempfile.gettempdir()
    assert main(argv) == 1
    got = capsys.readouterr()
    assert f"elmo predict: error: {named}: No space left on device\n" in got.err and got.out == ""
    assert [p.name for p in target.parent.iterdir()] == ["pred.tsv"]
    assert target.read_text() == "earlier predictions\n"
