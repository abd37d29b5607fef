"""TSV and CSV task files: a text field longer than csv's field limit, and double-quoted
fields (csv quoting for a comma-separated file, quotes as text for a tab-separated one)."""
from __future__ import annotations

from pathlib import Path

import pytest

from elmo.tasks.experiment_config import ExperimentConfig
from elmo.tasks.files import TaskDataError, check_format, read_examples
from elmo.tasks.experiment_config import normalise_config
from elmo.tasks.fingerprints import content_digest, run_content, run_fingerprint


def _read(path: Path, data: bytes, fmt: dict, kind: str = "classification"):
    path.write_bytes(data)
    return [(ex.tokens, ex.label) for ex in read_examples(path, kind, check_format(fmt, kind, "t"))]


TSV = {"type": "tsv", "text": "text", "label": "label"}
CSV = dict(TSV, delimiter=",")


@pytest.mark.parametrize("fmt", [TSV, dict(TSV, quoting="csv"), CSV])
def test_a_text_longer_than_csvs_field_limit_is_read_whole(tmp_path, fmt):
    # 150,000 characters: past csv's default field limit (131,072), which stopped the read
    # with a traceback ("field larger than field limit")
    sep = fmt.get("delimiter", "\t")
    words = ["w"] * 75_000
    data = f"text{sep}label\n{' '.join(words)} {sep}long\nshort one{sep}short\n".encode()
    got = _read(tmp_path / "long.tsv", data, fmt)
    assert got == [(words, "long"), (["short", "one"], "short")]


def test_the_field_limit_is_left_as_it_was(tmp_path):
    import csv
    before = csv.field_size_limit()
    _read(tmp_path / "long.csv", b"text,label\n" + b"w " * 70_000 + b",long\n", CSV)
    assert csv.field_size_limit() == before


def test_a_comma_separated_files_quotes_are_csv_quoting(tmp_path):
    data = (b'text,label\n"a, b",pos\n"He said ""hi""",neg\n"two\nlines","pos"\n'
            b'plain text,"neg"\n')
    assert _read(tmp_path / "q.csv", data, CSV) == [
        (["a,", "b"], "pos"), (["He", "said", '"hi"'], "neg"), (["two", "lines"], "pos"),
        (["plain", "text"], "neg")]


def test_a_tab_separated_files_quotes_are_text_unless_quoting_csv_is_given(tmp_path):
    data = b'text\tlabel\n"Hi," he said\tpos\n"a\tb"\tneg\n'
    with pytest.raises(TaskDataError, match=r"q.tsv:3: 3 columns"):
        _read(tmp_path / "q.tsv", data, TSV)
    data = b'text\tlabel\n"Hi," he said\tpos\nx\tneg\n'
    assert _read(tmp_path / "q.tsv", data, TSV)[0] == (['"Hi,"', "he", "said"], "pos")
    data = b'text\tlabel\n"a\tb"\t"neg"\n'
    assert _read(tmp_path / "q.tsv", data, dict(TSV, quoting="csv")) == [(["a", "b"], "neg")]


def test_csv_quoting_numbers_rows_by_their_first_line_and_names_bad_quotes(tmp_path):
    data = b'text,label\n"one\ntwo",a\nx,b,c\n'
    with pytest.raises(TaskDataError, match=r"q.csv:4: 3 columns"):
        _read(tmp_path / "q.csv", data, CSV)
    with pytest.raises(TaskDataError, match=r'q.csv:3: .*quoting'):
        _read(tmp_path / "q.csv", b'text,label\nok,a\n"never closed,b\nx,a\n', CSV)
    with pytest.raises(TaskDataError, match=r"q.csv:2: .*quoting"):
        _read(tmp_path / "q.csv", b'text,label\n"a"b,a\n', CSV)


def test_csv_quoting_reads_tag_lists_too(tmp_path):
    fmt = {"type": "tsv", "text": "text", "label": "tags", "delimiter": ","}
    got = _read(tmp_path / "t.csv", b'text,tags\n"Ann , Bob","B-per O B-per"\n', fmt, "tagging")
    assert got == [(["Ann", ",", "Bob"], ["B-per", "O", "B-per"])]


def test_quoting_is_checked():
    with pytest.raises(TaskDataError, match="format.quoting must be one of none, csv, got 'all'"):
        check_format(dict(TSV, quoting="all"), "classification", "t")
    assert check_format(TSV, "classification", "t")["quoting"] == "none"
    assert check_format(CSV, "classification", "t")["quoting"] == "csv"


def test_runs_of_a_comma_separated_file_read_before_csv_quoting_are_not_reused(tmp_path):
    """Their quotes were read as text; the same config now reads them as quoting, so its
    fingerprint is not the one those runs recorded (the settings' own digest)."""
    def fingerprints(fmt):
        cfg: ExperimentConfig = normalise_config({
            "name": "x", "embeddings": {"random_dim": 4},
            "tasks": [{"task": "classification", "name": "c", "format": fmt,
                       "files": {"train": str(tmp_path / "a"), "test": str(tmp_path / "a")}}]})
        spec, variant = cfg["tasks"][0], cfg.variants[0]
        content = run_content(cfg, spec, variant)
        recorded_before = content_digest({k: v for k, v in content.items() if k != "tsv_quoting"})
        return run_fingerprint(cfg, spec, variant), recorded_before
    now, before = fingerprints(CSV)
    assert now != before
    now, before = fingerprints(dict(CSV, quoting="none"))      # quoting as it was: the same runs
    assert now == before
    now, before = fingerprints(TSV)                             # a tab's quotes are still text
    assert now == before


def test_a_header_name_with_spaces_around_it_names_its_column(tmp_path):
    data = b"text \t label\r\na b\t pos \nc\tneg\n"
    assert _read(tmp_path / "h.tsv", data, TSV) == [(["a", "b"], "pos"), (["c"], "neg")]
    with pytest.raises(TaskDataError, match=r"2 columns named 'label'"):
        _read(tmp_path / "h.tsv", b"text\tlabel\t label \nx\ty\tz\n", TSV)
