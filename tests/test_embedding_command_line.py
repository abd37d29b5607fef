"""The ``command_line`` attribute of ``elmo embed``'s output: it is stored whatever the paths'
bytes, and a shell runs it again with the same arguments."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import h5py
import pytest

from elmo.cli import main
from elmo.shell import shell_join


def _not_utf8_name(folder, name: bytes):
    """``folder / name`` as Python spells a file name that is not UTF-8 (surrogates), or a
    skip where the file system refuses such names."""
    path = folder / os.fsdecode(name)
    try:
        path.touch()
        path.unlink()
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses file names that are not UTF-8")
    return path


def test_an_output_path_that_is_not_utf8_is_written_with_its_command_line(tmp_path):
    # A Latin-1 file name reached the HDF5 attribute as surrogates: every segment was computed,
    # then the merge stopped with "'utf-8' codec can't encode character '\udce9'", every time
    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\n\nby the river\n", encoding="utf-8")
    out = _not_utf8_name(tmp_path, b"caf\xe9.hdf5")
    assert main(["embed", str(inp), str(out), "--model", "fixture", "--quiet", "--batch-size", "2"]) == 0
    with h5py.File(out, "r") as f:
        stored = f.attrs["command_line"]
        assert sorted(k for k in f if k != "sentence_to_index") == ["0", "1", "2"]
    assert "caf\\xe9.hdf5'" in stored
    assert not os.path.exists(str(out) + ".parts")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_shell_join_gives_bash_the_same_bytes():
    words = ["elmo", "plain.txt", os.fsdecode(b"caf\xe9 d'\\x.txt"), "it's", "-o", "tab\there", "\u00e9t\u00e9"]
    line = shell_join(words)
    line.encode("utf-8")   # (storable as UTF-8 text)
    got = subprocess.run(["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True, check=True).stdout
    assert got.split(b"\0")[:-1] == [os.fsencode(w) for w in words]


def test_a_command_line_given_from_python_is_stored_whatever_it_holds(tmp_path):
    from elmo.embedding import embed_file

    inp = tmp_path / "in.txt"
    inp.write_text("the bank .\n", encoding="utf-8")
    out = embed_file(inp, tmp_path / "o.hdf5", "fixture", command_line="run " + os.fsdecode(b"\xe9"))
    with h5py.File(out, "r") as f:
        assert f.attrs["command_line"] == "run \\udce9"


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_progress_bar_is_drawn_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    """Written to a log file or a pipe, the bar was a line redrawn ten times a second (megabytes
    of carriage returns in a long run's log). It is now drawn only where stderr is a terminal;
    the note of what was written stays, and --quiet silences both."""
    inp = tmp_path / "in.txt"
    inp.write_text("a b\nc\n")
    assert main(["embed", str(inp), str(tmp_path / "a.hdf5"), "--model", "fixture"]) == 0
    assert capsys.readouterr().err == f"wrote {tmp_path / 'a.hdf5'}\n"     # (capsys: no terminal)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["embed", str(inp), str(tmp_path / "b.hdf5"), "--model", "fixture"]) == 0
    assert "2/2" in terminal.getvalue() and terminal.getvalue().endswith(f"wrote {tmp_path / 'b.hdf5'}\n")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["embed", str(inp), str(tmp_path / "c.hdf5"), "--model", "fixture", "--quiet"]) == 0
    assert terminal.getvalue() == ""


def test_a_finished_output_run_again_is_said_to_be_complete_not_written(tmp_path, capsys):
    """The same `elmo embed` command run again on its finished OUTPUT wrote nothing (the file
    is complete, with the same settings) yet said "wrote OUTPUT" a second time, as if the
    vectors had been computed again. It now says the file was complete already, and how to
    write it again."""
    inp, out = tmp_path / "in.txt", tmp_path / "a.hdf5"
    inp.write_text("a b\nc\n")
    assert main(["embed", str(inp), str(out), "--model", "fixture"]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"
    written = out.stat().st_mtime_ns
    assert main(["embed", str(inp), str(out), "--model", "fixture"]) == 0
    assert out.stat().st_mtime_ns == written
    assert capsys.readouterr().err == (f"{out} is complete already (written by this command): nothing "
                                       f"to do; --overwrite writes it again\n")
    assert main(["embed", str(inp), str(out), "--model", "fixture", "--overwrite"]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"
