"""One line of unusual text through every reader of tokenized text gives the same tokens.

The readers are separate code (``elmo embed``'s, the language-model corpus's, a task file's),
each splitting a line on whitespace: one that split on ``" "`` only, or ended lines at
``str.splitlines``'s extra line breaks, would give the model other tokens for the same text
through one entry point than through another (see README, Command line)."""
from __future__ import annotations

from elmo.data.corpus import iter_file_sentences
from elmo.embedding.reader import decode_line, split_tokens
from elmo.tasks.datasets import load_task

#: Every kind of whitespace ``str.isspace`` knows between words (control characters,
#: NEL, line and paragraph separators, no-break and ideographic spaces), and words of a
#: byte-order mark inside, a combining accent, a 4-byte emoji and a 300-letter run.
LINE = ("the\x0bdog\x0cbarks\x1cat\x1dthe\x1ecat\x1fnow\x85and\u2028then\u2029a\u00a0bird"
        "\u3000sings bark\ufeffs cafe\u0301 \U0001F600 " + "a" * 300)
EXPECTED = LINE.split()


def test_every_reader_of_tokenized_text_splits_a_line_alike(tmp_path):
    assert len(EXPECTED) == 16 and "bark\ufeffs" in EXPECTED
    path = tmp_path / "line.txt"
    path.write_bytes(f"{LINE}\n".encode("utf-8"))
    assert split_tokens(decode_line(path.read_bytes().rstrip(b"\n"), 0, path)) == EXPECTED   # elmo embed
    assert list(iter_file_sentences([path])) == [EXPECTED]          # train, finetune, perplexity, vocab
    (tmp_path / "t.tsv").write_text(f"label\ttext\nx\t{LINE}\ny\tthe cat\n", encoding="utf-8")
    task = load_task({"task": "classification", "name": "t", "format": {"type": "tsv", "text": "text", "label": "label"},
                      "files": {"train": str(tmp_path / "t.tsv"), "test": str(tmp_path / "t.tsv")},
                      "dev_fraction": 0})
    assert task.splits["train"][0].tokens == EXPECTED                # elmo experiment task files

