"""A URL's password (or token) that a record holds, or a user argument gives, is shown as
``***`` wherever it is printed, logged or written into a new file.

Records written before biLM URLs with a login were refused (results.json, saved task models,
a model's metadata.json, analysis results) still hold such URLs; every display of them showed
the secret."""
from __future__ import annotations

from elmo.cli import main

#: The secret each URL holds: as a password, and as a token alone.
SECRET = "secret"
URLS = [f"https://user:{SECRET}@host.invalid/m.hdf5", f"https://{SECRET}@host.invalid/m.hdf5"]


def test_error_and_warning_lines_of_the_command_hide_a_password(tmp_path, capsys):
    """Any error line of the command (here a results file named by a URL) and any warning it
    shows give a URL's password as ***."""
    import warnings
    from elmo.cli import _model_name_warnings_as_lines
    for url in URLS:
        assert main(["experiment-table", url]) == 1
        err = capsys.readouterr().err
        assert SECRET not in err and "host.invalid" in err and err.startswith("elmo experiment-table: error: ")
    from elmo import ModelNameWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _model_name_warnings_as_lines("x"):
            warnings.warn(f"fetched {URLS[0]}", UserWarning)       # (shown by Python's own hook)
            warnings.warn(f"{URLS[1]} names both", ModelNameWarning)   # (one line of ours)
    err = capsys.readouterr().err
    assert SECRET not in err and err.startswith("elmo x: warning: https://***@host.invalid")
    assert [str(w.message) for w in caught] == [f"fetched {URLS[0].replace(SECRET, '***')}"]
