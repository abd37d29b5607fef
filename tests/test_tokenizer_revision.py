"""The tokenizer revision (``elmo.tokenize.TOKENIZER_REVISION``) travels with what tokenized
text produced: ``elmo embed --resume`` refuses an output begun under another revision (and
warns about one begun before revisions were recorded), ``elmo experiment --resume`` trains a
``tokenize: true`` task again under another revision, and a saved task model that tokenizes
warns at load when it was trained under another."""
from __future__ import annotations

import json
import warnings

import h5py
import pytest

import elmo.tokenize
from elmo.tokenize import TokenizerRevisionWarning
from elmo import embed_file
from elmo.embedding import SettingsMismatch
from elmo.embedding.output import parts_dir
from elmo.tasks.experiment_config import normalise_config
from elmo.tasks.fingerprints import run_fingerprint
from tests.conftest import random_bilm
from tests.test_embedding import random_sentences
from tests.test_embedding_file import assert_same_datasets, write_lines

KW = dict(batch_size=4, segment_lines=4)


@pytest.fixture
def inp(tmp_path):
    return write_lines(tmp_path / "in.txt", [" ".join(s) for s in random_sentences(12, seed=3)])


def _settings(path):
    with h5py.File(path, "r") as f:
        return json.loads(f.attrs["settings"])


def _drop_revision(path):
    """Make ``path``'s settings as an earlier version wrote them (no revision recorded)."""
    with h5py.File(path, "r+") as f:
        record = json.loads(f.attrs["settings"])
        record.pop("tokenizer_revision", None)
        f.attrs["settings"] = json.dumps(record, sort_keys=True)


def test_embed_resume_under_another_tokenizer_revision_is_refused(tmp_path, inp, monkeypatch):
    bilm = random_bilm(seed=11)
    out = tmp_path / "out.hdf5"
    assert embed_file(inp, out, bilm, tokenize=True, rank=1, world_size=2, **KW) is None   # half done
    done = embed_file(inp, tmp_path / "done.hdf5", bilm, tokenize=True, **KW)
    plain = embed_file(inp, tmp_path / "plain.hdf5", bilm, **KW)
    assert _settings(done)["tokenizer_revision"] == elmo.tokenize.TOKENIZER_REVISION
    assert "tokenizer_revision" not in _settings(plain)     # (split on spaces: no tokenizer)
    monkeypatch.setattr(elmo.tokenize, "TOKENIZER_REVISION", elmo.tokenize.TOKENIZER_REVISION + 1)
    for target in (out, done):
        with pytest.raises(SettingsMismatch, match=r"holds tokens of tokenizer revision \d+, this "
                                                   r"version's --tokenize gives revision \d+ .*--overwrite"):
            embed_file(inp, target, bilm, tokenize=True, **KW)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # an output without --tokenize: no word
        assert embed_file(inp, plain, bilm, **KW) == plain
    embed_file(inp, done, bilm, tokenize=True, overwrite=True, **KW)
    assert _settings(done)["tokenizer_revision"] == elmo.tokenize.TOKENIZER_REVISION


def test_embed_resume_of_an_output_begun_before_revisions_warns_and_goes_on(tmp_path, inp):
    bilm = random_bilm(seed=11)
    reference = embed_file(inp, tmp_path / "reference.hdf5", bilm, tokenize=True, **KW)
    out = tmp_path / "out.hdf5"
    assert embed_file(inp, out, bilm, tokenize=True, rank=1, world_size=2, **KW) is None
    for segment in parts_dir(out).glob("segment-*.hdf5"):
        _drop_revision(segment)
    with pytest.warns(TokenizerRevisionWarning, match=r"out\.hdf5 was begun before the tokenizer revision was "
                                         r"recorded: resuming it.*--overwrite") as seen:
        assert embed_file(inp, out, bilm, tokenize=True, rank=0, world_size=2, wait_timeout=10, **KW) == out
    assert len(seen) == 1
    assert_same_datasets(out, reference)
    assert "tokenizer_revision" not in _settings(out)     # its revision stays unknown
    _drop_revision(reference)                             # a finished output of then: done
    with pytest.warns(TokenizerRevisionWarning, match="before the tokenizer revision was recorded"):
        assert embed_file(inp, reference, bilm, tokenize=True, **KW) == reference


def test_elmo_embed_says_so_in_one_line(tmp_path, inp, capsys):
    from elmo.cli import main as cli_main
    command = ["embed", str(inp), str(tmp_path / "o.hdf5"), "--model", "fixture", "--tokenize", "en", "--quiet"]
    assert cli_main(command) == 0
    _drop_revision(tmp_path / "o.hdf5")
    capsys.readouterr()
    assert cli_main(command) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("elmo embed: warning: ") and "--overwrite" in err[0]


def _config(tmp_path, tokenize: bool):
    (tmp_path / "ints.tsv").write_text("text\tlabel\n" + "".join(
        f"w{i} 3.14pm x\t{lab}\n" for i, lab in enumerate(["0", "1", "1", "0"])), encoding="utf-8")
    return normalise_config({
        "name": "x", "embeddings": {"random_dim": 4}, "variants": [{"name": "baseline"}],
        "tasks": [{"task": "classification", "name": "c", "tokenize": tokenize, "dev_fraction": 0,
                   "format": {"type": "tsv", "text": "text", "label": "label"},
                   "files": {"train": "ints.tsv", "test": "ints.tsv"}}]})


#: The fingerprints the code before tokenizer revisions (1e7a8f0) gave :func:`_config`'s run,
#: printed by ``run_fingerprint`` there with the same files, paths and config.
BEFORE_REVISIONS = {False: "69bb6f4ce0e14acd", True: "bb58fd82cff32719"}


def test_a_tokenize_task_is_trained_again_under_another_revision_and_others_keep_matching(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # (the spec's relative paths are part of the fingerprint)
    now = {}
    for tokenize in (False, True):
        cfg = _config(tmp_path, tokenize)
        now[tokenize] = run_fingerprint(cfg, cfg["tasks"][0], cfg.variants[0])
    assert now[False] == BEFORE_REVISIONS[False]         # split on spaces: old runs still match
    assert now[True] != BEFORE_REVISIONS[True]           # tokenized: trained again
    monkeypatch.setattr(elmo.tokenize, "TOKENIZER_REVISION", elmo.tokenize.TOKENIZER_REVISION + 1)
    for tokenize in (False, True):
        cfg = _config(tmp_path, tokenize)
        changed = run_fingerprint(cfg, cfg["tasks"][0], cfg.variants[0]) != now[tokenize]
        assert changed is tokenize


def test_a_saved_model_that_tokenizes_warns_at_load_under_another_revision(tmp_path, monkeypatch):
    from elmo.tasks.embeddings import build_embeddings
    from elmo.tasks.building import build_model
    from elmo.tasks.saved import load, save
    from tests.test_tasks_models import _settings as model_settings, _tiny_task
    task = _tiny_task("classification")
    vocab, emb, _ = build_embeddings([e.tokens for e in task.splits["train"]], [], {"random_dim": 6})
    settings = model_settings()
    model = build_model(task, emb, settings, None, lam=0.0)
    kw = dict(kind="classification", metric="accuracy", labels=task.labels, vocab=vocab,
              settings=settings.to_dict(), elmo=None, max_chars=50, layer_cache=False)
    tokenizes = save(tmp_path / "tok", model, tokenize=True, **kw)
    plain = save(tmp_path / "plain", model, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # the same revision, or no tokenizer: no word
        load(tokenizes)
        load(plain)
    monkeypatch.setattr(elmo.tokenize, "TOKENIZER_REVISION", elmo.tokenize.TOKENIZER_REVISION + 1)
    with pytest.warns(TokenizerRevisionWarning, match=r"tok/config\.json: this model was trained on texts split by "
                                         r"tokenizer revision \d+; predict splits texts with revision"):
        load(tokenizes)
    config = json.loads((tokenizes / "config.json").read_text())
    del config["tokenizer_revision"]                       # saved before revisions were recorded
    (tokenizes / "config.json").write_text(json.dumps(config))
    with pytest.warns(TokenizerRevisionWarning, match="an unrecorded revision"):
        load(tokenizes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load(plain)


def _fake_jieba(monkeypatch, version):
    """A jieba module (the package is optional) of ``version`` that splits on spaces and
    then between characters of words longer than 3 (another version could split otherwise)."""
    import sys
    import types
    fake = types.ModuleType("jieba")
    fake.__version__ = version
    fake.setLogLevel = lambda level: None
    fake.lcut = lambda text: [w for word in text.split(" ") for w in ([word] if len(word) <= 3 else list(word))]
    monkeypatch.setitem(sys.modules, "jieba", fake)


def test_embed_resume_under_another_jieba_version_is_refused(tmp_path, inp, monkeypatch):
    """--tokenize zh recorded no jieba version: a resume under another jieba went on, and one
    output held lines of two segmentations. The version is recorded, and a resume under
    another is refused naming both."""
    bilm = random_bilm(seed=11)
    _fake_jieba(monkeypatch, "0.42.1")
    out = tmp_path / "out.hdf5"
    assert embed_file(inp, out, bilm, tokenize="zh", rank=1, world_size=2, **KW) is None   # half done
    done = embed_file(inp, tmp_path / "done.hdf5", bilm, tokenize="zh", **KW)
    assert _settings(done)["jieba_version"] == "0.42.1"
    assert "jieba_version" not in _settings(embed_file(inp, tmp_path / "en.hdf5", bilm, tokenize=True, **KW))
    _fake_jieba(monkeypatch, "0.43")
    for target in (out, done):
        with pytest.raises(SettingsMismatch, match=r"holds text segmented by jieba 0\.42\.1, this run's jieba is "
                                                   r"0\.43, which may segment some lines otherwise; install jieba "
                                                   r"0\.42\.1 to resume, or pass --overwrite"):
            embed_file(inp, target, bilm, tokenize="zh", **KW)
    embed_file(inp, done, bilm, tokenize="zh", overwrite=True, **KW)
    assert _settings(done)["jieba_version"] == "0.43"
    _fake_jieba(monkeypatch, "0.42.1")                    # the version it was begun with resumes it
    assert embed_file(inp, out, bilm, tokenize="zh", rank=0, world_size=2, wait_timeout=10, **KW) == out


def test_embed_resume_of_a_zh_output_begun_before_jieba_versions_warns_and_goes_on(tmp_path, inp, monkeypatch):
    bilm = random_bilm(seed=11)
    _fake_jieba(monkeypatch, "0.42.1")
    out = embed_file(inp, tmp_path / "out.hdf5", bilm, tokenize="zh", **KW)
    with h5py.File(out, "r+") as f:                       # as an earlier version wrote it
        record = json.loads(f.attrs["settings"])
        del record["jieba_version"]
        f.attrs["settings"] = json.dumps(record, sort_keys=True)
    with pytest.warns(TokenizerRevisionWarning, match=r"out\.hdf5 was begun before jieba's version was recorded: "
                                                      r"resuming it, .* than jieba 0\.42\.1 segments them; pass "
                                                      r"--overwrite"):
        assert embed_file(inp, out, bilm, tokenize="zh", **KW) == out
