"""The README stays true: its Python snippets run, and its `elmo ...` command lines parse.

1. Every fenced ```python block of README.md runs here, offline, each in its own namespace and
   in a fresh working folder, unless it is listed in ``NOT_RUN`` with the reason. A block is
   named by one of its lines (the code before any comment), not by its position, so blocks may
   move; a block that is neither run nor listed, and an entry whose block is gone, fail
   ``test_every_python_block_is_run_or_listed``. What a snippet leaves to the reader (its own
   files, ``task_loss``) is supplied per block by ``setup``; ``replace`` swaps README text for
   what runs here (each piece must still be in the block); ``check`` holds the block's comments
   to what the code gives (shapes, counts, types).
2. Every `elmo` command line of the bash/console blocks, and every inline code span that is
   an `elmo` command, is parsed by the CLI's own parser (``elmo.cli.build_parser``) without
   running it. Code-block lines must parse completely. Inline spans often only name a command
   or a flag (`elmo train`, `elmo train --from`): they may leave out required arguments and
   option values, but everything they do write must exist. ``...`` in a command stands for
   arguments left out and is read the same way. Flags must be spelled in full (the CLI takes
   no abbreviations), so a renamed flag is caught even where the old name is a prefix of the new.
3. The experiment config of "Your own data" loads.
4. The pages of docs/: their Python blocks run (``DOCS_RUN``) and their `elmo` commands parse.
5. The relative links and `../` paths of these pages and experiments/README.md lead to files of
   the repository, and the `elmo experiment-table ... -o` commands of experiments/README.md
   write the committed summaries.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shlex
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FIXTURES = ROOT / "tests" / "fixtures"


# ---------------------------------------------------------------------------------------------
# Reading the README
# ---------------------------------------------------------------------------------------------

@dataclass
class Block:
    line: int            # README line of the block's first code line (1-based)
    lang: str
    lines: List[str]

    @property
    def code(self) -> str:
        """The block's source; a ``pycon`` session gives its ``>>>`` / ``...`` lines (output
        lines become blank lines, so line numbers stay the README's)."""
        if self.lang != "pycon":
            return "\n".join(self.lines) + "\n"
        return "\n".join(line[4:] if line[:4] in (">>> ", "... ") else "" for line in self.lines) + "\n"


_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([^`\s]*)")


def fenced_blocks(text: str) -> List[Block]:
    """The fenced code blocks (CommonMark's rules, enough for this README): a fence of 3+
    backticks or tildes opens a block, a fence of the same character at least as long closes it.
    A block indented in a list item loses its fence's indentation."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, j = len(m.group(1)), m.group(2), i + 1
        closing = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{%d,}[ \t]*$" % len(fence))
        while j < len(lines) and not closing.match(lines[j]):
            j += 1
        body = [line[min(indent, len(line) - len(line.lstrip())):] for line in lines[i + 1:j]]
        blocks.append(Block(i + 2, m.group(3).lower(), body))
        i = j + 1
    return blocks


def inline_spans(text: str) -> Iterator[Tuple[int, str]]:
    """(line, content) of each inline code span outside code blocks. A span may run over line
    breaks within a paragraph (they read as spaces), never over a blank line."""
    lines = text.splitlines()
    in_block: set = set()
    for b in fenced_blocks(text):
        in_block.update(range(b.line - 1, b.line + len(b.lines) + 1))
    paragraphs: List[List[Tuple[int, str]]] = [[]]
    for number, line in enumerate(lines, 1):
        if number in in_block or not line.strip():
            paragraphs.append([])
        else:
            paragraphs[-1].append((number, line))
    for para in filter(None, paragraphs):
        joined, starts = "", []
        for number, line in para:
            starts.append((len(joined), number))
            joined += line + "\n"
        for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", joined, re.S):
            number = max(s for s in starts if s[0] <= m.start())[1]
            yield number, " ".join(m.group(2).split())


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def assert_phrases_in(text: str, expected: List[str]) -> None:
    """Fail naming every phrase of ``expected`` that ``text`` does not hold (all at once, so
    that one run shows every figure a page has drifted from)."""
    missing = [phrase for phrase in expected if phrase not in text]
    assert not missing, missing


def code_key(line: str) -> str:
    """A line as it names a block: its code before any comment, spaces collapsed."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote and line[i - 1] != "\\":
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            line = line[:i]
            break
    return " ".join(line.split())


def python_blocks(text: Optional[str] = None) -> List[Block]:
    return [b for b in fenced_blocks(text if text is not None else readme_text())
            if b.lang in ("python", "py", "python3", "pycon")]


def blocks_named(key: str, blocks: List[Block]) -> List[Block]:
    return [b for b in blocks if any(code_key(line) == key for line in b.code.splitlines())]


# ---------------------------------------------------------------------------------------------
# 1. Python blocks
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    """How one README block runs here.

    setup(ctx) returns the names the snippet uses without defining them (and may write the
    files it reads into ctx.tmp, the working folder). replace: (README text, what runs here)
    pairs, each of which must be in the block. check(namespace, ctx) asserts what the block's
    comments say."""
    setup: Callable[["Context"], dict] = lambda ctx: {}
    replace: Tuple[Tuple[str, str], ...] = ()
    check: Optional[Callable[[dict, "Context"], None]] = None
    slow: bool = False
    task_model: bool = False        # runs in a folder holding a saved task model (see below)


@dataclass
class Context:
    tmp: Path          # the working folder the block runs in
    code: str          # the block's code as run


def _shape(x) -> tuple:
    return tuple(x.shape)


# --- "Use it from Python" ---------------------------------------------------------------------

def _use_setup(ctx):
    import torch
    return {"task_loss": torch.tensor(1.0)}          # the user's own task loss


def _use_check(ns, ctx):
    import torch
    bilm, out, reps = ns["bilm"], ns["out"], ns["reps"]
    layers, width = bilm.options.lstm.n_layers, bilm.output_dim      # L, 2P
    assert width == 2 * bilm.options.lstm.projection_dim
    assert len(out["activations"]) == layers + 1                # "L + 1 tensors (B, T, 2P)"
    assert all(_shape(a) == (2, 4, width) for a in out["activations"])
    assert _shape(out["mask"]) == (2, 4) and out["mask"].dtype == torch.bool
    assert len(reps) == 2 and all(_shape(r) == (2, 4, width) for r in reps)
    assert _shape(ns["loss"]) == ()                             # a scalar to backpropagate


# --- "AllenNLP's ELMo API" --------------------------------------------------------------------

def _allennlp_setup(ctx):
    from elmo import batch_to_ids
    (ctx.tmp / "in.txt").write_text("The bank closed .\nHi\n", encoding="utf-8")
    words = [["The", "bank", "closed"], ["Hi"], ["a", "b"], ["c", "d", "e"], ["f"], ["g", "h"]]
    char_ids = batch_to_ids(words).view(2, 3, 3, 50)              # (2, 3, T, 50), T = 3
    import torch
    return {"options_file": str(FIXTURES / "allennlp-elmo" / "options.json"),
            "weight_file": str(FIXTURES / "allennlp-elmo" / "lm_weights.hdf5"),
            "char_ids": char_ids, "word_ids": torch.zeros(2, 3, 3, dtype=torch.long),
            "sentences": [["The", "bank", "closed", "."], ["Hi"]],
            "iter_of_token_lists": iter([["a", "b"], ["c"]])}


def _allennlp_check(ns, ctx):
    import h5py
    import numpy as np
    out, ee = ns["out"], ns["ee"]
    dim = ns["elmo"].get_output_dim()
    assert _shape(out["elmo_representations"][0]) == (2, 3, 3, dim)          # (2, 3, T, D)
    assert _shape(out["mask"]) == (2, 3, 3)
    assert _shape(ns["ids"]) == (2, 4, 50)                                     # (B, T, 50)
    te = ns["token_embedder"]
    assert _shape(te(ns["ids"])) == (2, 4, 64) and te.get_output_dim() == 64
    n_layers = ee.embed_sentence(["x"]).shape[0]
    one = ee.embed_sentence(["The", "bank", "."])
    assert isinstance(one, np.ndarray) and one.shape == (n_layers, 3, dim)     # numpy (L + 1, 3, D)
    assert [a.shape for a in ee.embed_batch([["a", "b"], ["c"]])] == [(n_layers, 2, dim),
                                                                       (n_layers, 1, dim)]
    assert isinstance(ee.embed_sentences(iter([["a"]]), batch_size=64), types.GeneratorType)
    with h5py.File(ctx.tmp / "out.hdf5", "r") as f:                           # "all": (L + 1, n, D)
        assert set(f) == {"0", "1", "sentence_to_index"}
        assert f["0"].shape == (n_layers, 4, dim) and f["1"].shape == (n_layers, 1, dim)


# --- "ELMoForManyLangs models" ----------------------------------------------------------------

def _manylangs_check(ns, ctx):
    ids, layers, vectors = ns["ids"], ns["layers"], ns["vectors"]
    assert _shape(ids) == (2, 3, 51)                        # the model's own ids: (B, T, 51)
    assert len(layers) == 3                                 # 3 tensors (B, T, D)
    dim = layers[0].shape[-1]
    assert all(_shape(x) == (2, 3, dim) for x in layers)
    assert len(vectors) == 1 and vectors[0].shape == (3, dim)     # layers="average": (n, D)


# --- "Embedding" ------------------------------------------------------------------------------

def _embedding_setup(ctx):
    (ctx.tmp / "sentences.txt").write_text("The bank closed .\n\nHi there\n", encoding="utf-8")
    return {}


def _embedding_check(ns, ctx):
    import h5py
    arrays = ns["arrays"]
    layers, dim = arrays[0].shape[0], arrays[0].shape[2]
    assert [a.shape for a in arrays] == [(layers, 3, dim), (layers, 0, dim)]  # [(L+1, 3, D), (L+1, 0, D)]
    assert _shape(ns["vectors"]) == (1, dim)                                   # (1, D)
    outputs = re.findall(r'embed_file\("[^"]*",\s*"([^"]+)"', ctx.code)
    assert outputs, "the block's embed_file calls were not found: update _embedding_check"
    for name in outputs:
        with h5py.File(ctx.tmp / name, "r") as f:                              # "top": (n_tokens, D)
            assert f["0"].ndim == 2 and f["0"].shape[0] == 4 and f["1"].shape[0] == 0
    assert ns["first_line"].shape == (4, dim)                                   # (n_tokens, D)


# --- "Your own data": a saved task model ------------------------------------------------------

def _task_model_check(ns, ctx):
    tags = ns["tagger"].predict([["Ada", "lives", "in", "Paris"], "split on spaces as in training"])
    assert [len(t) for t in tags] == [4, 6]                 # one tag per token, strings split on spaces
    assert all(isinstance(tag, str) for t in tags for tag in t)


# --- "spaCy" ----------------------------------------------------------------------------------

def _spacy_setup(ctx):
    pytest.importorskip("spacy")
    return {"texts": ["The bank closed .", "Hi", "A river bank ."]}


def _spacy_check(ns, ctx):
    doc, nlp = ns["doc"], ns["nlp"]
    assert _shape(doc.tensor) == (4, 256) and doc[1].vector.shape == (256,)   # (4, 256), (256,)
    assert doc.vector.shape == (256,)
    assert [len(d) for d in ns["docs"]] == [4, 1, 4]
    tagged = nlp("the cat sat on a mat")                   # elmo_task: token.tag_, BIO spans -> ents
    assert all(t.tag_ for t in tagged)
    assert ns["read"] == {"elmo_task": 3}                  # {"elmo_task": 3}


# --- "Analysis" -------------------------------------------------------------------------------

def _contrast_check(ns, ctx):
    accuracy = ns["res"]["categories"]["role"]["probe"][2]["accuracy"]
    assert 0.0 <= accuracy <= 1.0
    rho = ns["sim"]["sets"]["mine"]["layers"]           # layer 0 and the fixture's 2 LSTM layers
    assert len(rho) == 3 and all(-1.0 <= r <= 1.0 for r in rho)


#: The Python blocks that run, by a line of each (its code, comment left out).
RUN: Dict[str, Case] = {
    'bilm = elmo.from_pretrained("default")': Case(setup=_use_setup, check=_use_check),
    "from elmo import Elmo, ElmoEmbedder, ElmoTokenEmbedder, batch_to_ids": Case(
        setup=_allennlp_setup, check=_allennlp_check),
    'bilm = elmo.from_pretrained("zh.model")': Case(
        # the released Chinese model is a download; the fixture's tiny model of the same
        # structure (a word embedding beside the characters) stands in for its folder
        setup=lambda ctx: {"elmo": importlib.import_module("elmo")},   # imported in an earlier block
        replace=(('"zh.model"', repr(str(FIXTURES / "elmoformanylangs" / "model_word"))),),
        check=_manylangs_check),
    'embedder = Embedder("default")': Case(setup=_embedding_setup, check=_embedding_check),
    'tagger = TaskModel.load("experiments/results/mine/models/my-ner/elmo/seed-1")': Case(
        task_model=True, check=_task_model_check),
    "import spacy": Case(setup=_spacy_setup, task_model=True, check=_spacy_check),
    'res = contrast.contrast_eval("fixture", contrast.load_pairs())': Case(check=_contrast_check),
}

#: The Python blocks that cannot run offline on a CPU here, by a line of each, with the reason.
NOT_RUN: Dict[str, str] = {
    'bilm = elmo.from_pretrained("original")':
        "downloads the published models (by name, by URL, model_path); their transfer, resume and "
        "checks are tested against a local server in tests/test_hub.py",
    "from elmo.spacy_component import set_vector_hooks":
        "forks worker processes, which the test process should not; tests/test_spacy_component.py "
        "(test_several_processes_give_the_vectors_of_one) runs the same lines in a subprocess",
}


def _select(key: str) -> Block:
    found = blocks_named(key, python_blocks())
    assert found, (f"no ```python block of README.md has the line {key!r} any more: update RUN "
                   f"in {Path(__file__).name} to the block that replaced it (or remove the entry)")
    assert len(found) == 1, f"{key!r} names {len(found)} README blocks (lines {[b.line for b in found]})"
    return found[0]


@pytest.fixture(scope="module")
def task_model_root(tmp_path_factory):
    """A folder holding experiments/results/mine/models/my-ner/elmo/seed-1, the saved tagger the
    README's snippets load: trained for one epoch on tiny CoNLL files over the fixture biLM."""
    from elmo.tasks.experiment_config import load_config
    from elmo.tasks.runner import run_experiment
    from test_tasks_files import write_config, write_task     # (tests/ is on the path, as for conftest)
    root = tmp_path_factory.mktemp("readme-task-model")
    spec = dict(write_task(root, "tagging"), name="my-ner")
    config = write_config(root, [spec], train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=root / "experiments/results/mine", log=lambda s: None,
                   save_models=True)
    assert (root / "experiments/results/mine/models/my-ner/elmo/seed-1").is_dir()
    return root


def _run_params():
    for key, case in RUN.items():
        marks = [pytest.mark.slow] if case.slow else []
        yield pytest.param(key, marks=marks, id=re.sub(r"\W+", "-", key)[:50].strip("-"))


@pytest.mark.parametrize("key", list(_run_params()))
def test_python_block_runs(key, tmp_path, monkeypatch, request):
    case, block = RUN[key], _select(key)
    code = block.code
    for old, new in case.replace:
        assert old in code, f"README block at line {block.line} no longer has {old!r}: update RUN[{key!r}]"
        code = code.replace(old, new)
    folder = request.getfixturevalue("task_model_root") if case.task_model else tmp_path
    monkeypatch.chdir(folder)
    ctx = Context(folder, code)
    namespace = {"__name__": "readme_block"}
    namespace.update(case.setup(ctx))
    # compiled at the README's own line numbers, so a traceback points at the README line
    compiled = compile("\n" * (block.line - 1) + code, str(README), "exec")
    exec(compiled, namespace)
    if case.check:
        case.check(namespace, ctx)


def test_every_python_block_is_run_or_listed():
    blocks = python_blocks()
    problems = []
    for table in (RUN, NOT_RUN):
        for key in table:
            found = blocks_named(key, blocks)
            if len(found) != 1:
                problems.append(f"{key!r} names {len(found)} README python blocks, not 1")
    for b in blocks:
        run = [k for k in RUN if blocks_named(k, [b])]
        listed = [k for k in NOT_RUN if blocks_named(k, [b])]
        if len(run) + len(listed) != 1:
            first = next((line for line in b.code.splitlines() if line.strip()), "")
            problems.append(f"README.md:{b.line} ({first.strip()!r}) is named by {run + listed}: "
                            "a python block must be run (RUN) or listed with its reason (NOT_RUN), once")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# 2. `elmo` command lines
# ---------------------------------------------------------------------------------------------

#: README commands parsed in another form, with the reason: {README text: (parsed text, why)}.
COMMAND_SUBSTITUTIONS: Dict[str, Tuple[str, str]] = {
    "elmo --debug CMD ...": ("elmo --debug embed ...", "CMD stands for any subcommand"),
}

#: README text that starts like an `elmo` command but is not one, with the reason.
NOT_PARSED: Dict[str, str] = {
    "elmo CMD: error: ...": "the form of an error message the command prints",
    "elmo embed: stopped by SIGTERM": "a message the command prints",
}

_SHELL_LANGS = ("bash", "sh", "shell", "console", "zsh")
_OPERATORS = {"|", "||", "&&", ";", "&", "(", ")"}
_PREFIXES = {"time", "nohup", "env", "exec", "command"}


@dataclass
class Command:
    line: int          # README line where it starts
    text: str          # as written (continuations joined)
    inline: bool       # an inline code span (may leave out required arguments)


def shell_lines(block: Block) -> Iterator[Tuple[int, str]]:
    """(line, command) of a bash/console block: continuation lines joined, `$ ` prompts taken
    off (in a console block only prompted lines are commands, the rest is output)."""
    buf, first = "", None
    for k, line in enumerate(block.lines):
        if block.lang == "console" and not buf:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if first is None:
            first = block.line + k
        stripped = line.rstrip()
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            buf += stripped[:-1] + " "
            continue
        yield first, buf + line
        buf, first = "", None
    if buf:
        yield first or block.line, buf


def _looks_like_elmo(text: str) -> bool:
    return bool(re.search(r"(^|[\s/;&|(])elmo(\s|$)", text))


#: An inline span that is a command: `elmo ARG...`, `PATH/elmo ...`, after `VAR=value` or `time`
#: prefixes, or `python -m elmo ...` / `torchrun ... -m elmo ...`.
_INLINE_COMMAND = re.compile(r"^(?:[A-Za-z_]\w*=\S*\s+)*(?:(?:time|nohup|env)\s+)*"
                             r"(?:(?:\S*/)?elmo|(?:\S*/)?python[\d.]*\s+-m\s+elmo|torchrun\s.*-m\s+elmo)\s+\S")


def readme_commands(text: Optional[str] = None) -> List[Command]:
    text = text if text is not None else readme_text()
    found = []
    for block in fenced_blocks(text):
        if block.lang in _SHELL_LANGS:
            found += [Command(n, c, False) for n, c in shell_lines(block) if _looks_like_elmo(c)]
    for n, span in inline_spans(text):
        if _INLINE_COMMAND.match(span):
            found.append(Command(n, span, True))
    return found


def _redirections_removed(command: str) -> str:
    """Shell redirections (`> out`, `2>/dev/null`, `<in.txt`, `2>&1`) and `<placeholder>`s:
    the first are no arguments of the command; the second become a plain word."""
    command = re.sub(r"<([A-Za-z][\w.-]*)>", r"\1", command)
    return re.sub(r"(?<!\S)\d*(?:>>?|<|&>)(?:&\d+|\s*[^\s|;&<>]+)", " ", command)


def shell_segments(command: str) -> Iterator[List[str]]:
    """The simple commands of a command line (split at `|`, `&&`, `||`, `;`), as argument lists;
    comments dropped."""
    lexer = shlex.shlex(_redirections_removed(command), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segment: List[str] = []
    for token in lexer:
        if token in _OPERATORS:
            yield segment
            segment = []
        else:
            segment.append(token)
    yield segment


def elmo_arguments(segment: List[str]) -> Optional[List[str]]:
    """The arguments given to `elmo` by one simple command, or None when it does not run elmo:
    `elmo ...`, `PATH/elmo ...`, `VAR=value elmo ...`, `time elmo ...`, `python -m elmo ...`,
    `torchrun [its options] -m elmo ...`."""
    args = list(segment)
    while args and (re.match(r"^[A-Za-z_]\w*=", args[0]) or args[0] in _PREFIXES):
        args.pop(0)
    if not args:
        return None
    program = args[0]
    if program == "elmo" or program.endswith("/elmo"):
        return args[1:]
    runner = Path(program).name
    if (runner.startswith("python") or runner == "torchrun") and "-m" in args:
        at = args.index("-m")
        if args[at + 1:at + 2] == ["elmo"]:
            return args[at + 2:]
    return None


def _optional_brackets_removed(args: List[str]) -> List[str]:
    """`[--layer 2]`, `[INPUT]`: a usage line's optional parts, given here. Only brackets that
    open a word and close a later (or the same) word count: `--set seeds=[1]` keeps its JSON."""
    out, depth = [], 0
    for arg in args:
        if arg.startswith("[") and len(arg) > 1:
            depth += 1
            arg = arg[1:]
        if depth and arg.endswith("]"):
            depth -= 1
            arg = arg[:-1]
        if arg:
            out.append(arg)
    return out


def _each_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                yield from _each_parser(sub)


_NO_VALUE = (argparse._StoreConstAction, argparse._StoreTrueAction, argparse._StoreFalseAction,
             argparse._AppendConstAction, argparse._CountAction, argparse._HelpAction,
             argparse._VersionAction, argparse.BooleanOptionalAction)


def cli_parser(lenient: bool) -> argparse.ArgumentParser:
    """elmo's own parser (which takes no abbreviations). ``lenient``: nothing is required (positionals,
    required options, a subcommand) and an option's value may be left out, for the inline
    mentions of a command or flag."""
    from elmo.cli import build_parser
    parser = build_parser()
    for p in _each_parser(parser):
        if not lenient:
            continue
        for action in p._actions:
            action.required = False
            if isinstance(action, (argparse._SubParsersAction,) + _NO_VALUE):
                continue
            if action.nargs is None:
                action.nargs = "?"
            elif action.nargs == "+" or isinstance(action.nargs, int):
                action.nargs = "*"
    return parser


@pytest.fixture(scope="module")
def parsers():
    return {False: cli_parser(False), True: cli_parser(True)}


def parse_error(parser: argparse.ArgumentParser, args: List[str]) -> Optional[str]:
    """argparse's message where it would exit with an error; None where the arguments parse
    (`--help` and `--version` exit 0 and count as parsed)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args)
    except SystemExit as e:
        if e.code not in (0, None):
            lines = err.getvalue().strip().splitlines()
            return lines[-1] if lines else f"exit status {e.code}"
    return None


def _normal(text: str) -> str:
    return " ".join(text.split())


def argument_lists(command: Command) -> List[Tuple[List[str], bool]]:
    """(arguments, lenient) for each `elmo` call of a README command. In a table an inline
    span's `\\|` is markdown for `|`, read as alternatives (`--to original\\|safetensors`)."""
    text = command.text
    alternatives = [text]
    if command.inline and "\\|" in text:
        m = re.search(r"(\S*\\\|\S*)", text)
        assert m
        alternatives = [text.replace(m.group(1), choice) for choice in m.group(1).split("\\|")]
    out = []
    for text in alternatives:
        for segment in shell_segments(text):
            args = elmo_arguments(segment)
            if args is None:
                continue
            args = _optional_brackets_removed(args)
            elided = "..." in args
            out.append(([a for a in args if a != "..."], command.inline or elided))
    return out


def test_readme_elmo_commands_parse(parsers):
    commands = readme_commands()
    assert len(commands) >= 20, "the README's elmo commands were not found: is the extraction broken?"
    failures, seen = [], set()
    for command in commands:
        key = _normal(command.text)
        seen.add(key)
        if key in NOT_PARSED:
            continue
        text = COMMAND_SUBSTITUTIONS[key][0] if key in COMMAND_SUBSTITUTIONS else command.text
        try:
            calls = argument_lists(Command(command.line, text, command.inline))
        except ValueError as e:           # shlex: an unclosed quote
            failures.append(f"README.md:{command.line}: {command.text!r}: not a shell command line ({e})")
            continue
        if not calls and command.inline:   # (a block line may name elmo in a comment only)
            failures.append(f"README.md:{command.line}: {command.text!r}: no elmo call found in it")
        for args, lenient in calls:
            error = parse_error(parsers[lenient], args)
            if error:
                failures.append(f"README.md:{command.line}: {command.text!r}\n    elmo {shlex.join(args)}"
                                f"\n    -> {error}")
    stale = [k for k in list(NOT_PARSED) + list(COMMAND_SUBSTITUTIONS) if k not in seen]
    failures += [f"{k!r} is listed in {Path(__file__).name} but is no longer a README command" for k in stale]
    assert not failures, "README commands that elmo's parser refuses:\n" + "\n".join(failures)


def test_a_blocks_embed_commands_write_one_output_with_one_set_of_settings(parsers):
    """The Embedding block's three `elmo embed` commands all wrote vectors.hdf5 with other
    settings: run in order, the second and third were refused ("written by a different
    command"). Commands of one block that write the same OUTPUT must ask for the same job."""
    problems = []
    for block in fenced_blocks(readme_text()):
        if block.lang not in _SHELL_LANGS:
            continue
        jobs: Dict[str, Tuple[int, dict]] = {}
        for line, text in shell_lines(block):
            for args, lenient in argument_lists(Command(line, text, False)):
                if lenient or args[:1] != ["embed"]:
                    continue
                job = vars(parsers[False].parse_args(args))
                output = job.pop("output")
                job.pop("overwrite", None)
                first = jobs.setdefault(output, (line, job))
                if first[1] != job:
                    problems.append(f"README.md:{line} writes {output} with other settings than "
                                    f"line {first[0]}: run after it, it is refused")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# 3. The experiment config of "Your own data"
# ---------------------------------------------------------------------------------------------

def test_json_blocks_parse_and_the_experiment_config_loads(tmp_path):
    """Every ```json block is JSON; the one with "tasks" (`my.json`) passes `elmo experiment`'s
    whole-config check (the files it names are only read when the experiment runs)."""
    import json

    from elmo.tasks.experiment_config import load_config
    blocks = [b for b in fenced_blocks(readme_text()) if b.lang == "json"]
    configs = []
    for b in blocks:
        try:
            value = json.loads(b.code)
        except ValueError as e:
            pytest.fail(f"README.md:{b.line}: the json block is not JSON: {e}")
        if isinstance(value, dict) and "tasks" in value:
            configs.append((b, value))
    assert configs, "the README's example experiment config (a json block with \"tasks\") is gone"
    for b, value in configs:
        path = tmp_path / "my.json"
        path.write_text(json.dumps(value), encoding="utf-8")
        config = load_config(path)
        assert [t["name"] for t in config.tasks] == [t["name"] for t in value["tasks"]], b.line


def test_the_command_reader_on_shell_forms():
    """How README text becomes elmo's arguments (the extraction the test above rests on)."""
    text = "\n".join([
        "```bash",
        "bash scripts/setup.sh && .venv/bin/elmo demo      # set up, then the demo",
        "ELMO_DEBUG=1 elmo embed FILE <model>.hdf5 --model <model> 2>/dev/null > log.txt",
        "elmo embed in.txt out.hdf5 \\",
        "    --layers top | tee x   # a comment with elmo in it",
        "# only a comment about elmo here",
        "```",
        "```console",
        "$ elmo info MODEL",
        "model: default",
        "```",
        "Run `time elmo demo` or `python -m elmo neighbors \"a b .\" --word a [--layer 2]`; not `elmo`,",
        "`from elmo import Elmo` or `elmo embed ... --print-config`.",
    ])
    found = [(c.line, c.inline, [a for a, _ in argument_lists(c)]) for c in readme_commands(text)]
    assert found == [
        (2, False, [["demo"]]),
        (3, False, [["embed", "FILE", "model.hdf5", "--model", "model"]]),
        (4, False, [["embed", "in.txt", "out.hdf5", "--layers", "top"]]),
        (6, False, []),
        (9, False, [["info", "MODEL"]]),
        (12, True, [["demo"]]),
        (12, True, [["neighbors", "a b .", "--word", "a", "--layer", "2"]]),
        (13, True, [["embed", "--print-config"]]),     # `...`: arguments left out
    ]
    assert [lenient for c in readme_commands(text) for _, lenient in argument_lists(c)] == [
        False, False, False, False, True, True, True]


def test_every_option_of_every_command_says_what_it_does_and_its_default():
    """`elmo perplexity --help` listed --device and --threads, `elmo predict --help`
    --batch-size and `elmo plot-curve --help` --title with no word on what they do or take
    by default; `elmo neighbors --help` gave no default batch size, and `elmo
    experiment-report --help` printed '95%%' (a description is not %-formatted)."""
    from elmo.cli import build_parser
    unsaid, no_default, doubled = [], [], []
    for parser in _each_parser(build_parser()):
        if "%%" in (parser.description or ""):
            doubled.append(parser.prog)
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)) \
                    or action.help == argparse.SUPPRESS:
                continue
            name = f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
            if not action.help:
                unsaid.append(name)
            elif (action.option_strings and not isinstance(action, _NO_VALUE)
                  and action.default not in (None, argparse.SUPPRESS, []) and "default" not in action.help):
                no_default.append(name)
    assert unsaid == [] and no_default == [] and doubled == []


# ---------------------------------------------------------------------------------------------
# 4. docs/: the same for its pages
# ---------------------------------------------------------------------------------------------

DOCS = sorted((ROOT / "docs").glob("*.md"))


def _readers_files(ctx) -> dict:
    """The files docs/DATA.md's reader calls name, a few lines each in their formats."""
    import json
    files = {
        "nltk_data/corpora/brown/ca01": "\n\n\tThe/at Fulton/np-tl said/vbd ./.\n\n\n\tIt/pps was/bedz 1/2/cd ./.\n",
        "nltk_data/corpora/brown/cats.txt": "ca01 news\n",
        "ptb.train.txt": " the cat sat on the <unk> \n a dog ran \n",
        "glove.6B.50d.txt": "the 0.1 0.2\ncat 0.3 0.4\n",
        "dev-v1.1.json": json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "A b c.", "qas": [
            {"id": "1", "question": "b?", "answers": [{"text": "b", "answer_start": 2}]}]}]}]}),
        "wnut16.train": "Ada\tB-person\nlives\tO\n\nHi\tO\n",
        "data.noun": "  1 a licence header line\n00001740 03 n 01 entity 0 000 | that which exists; "
                     "\"the entity was there\"  \n",
        "wordsim353.tsv": "Word 1\tWord 2\tHuman (mean)\ncat\tdog\t7.35\n",
        "any-standard-form.txt": "a b .\nc d .\n\ne f .\n",
    }
    for name, text in files.items():
        (ctx.tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx.tmp / name).write_text(text, encoding="utf-8")
    return {}


def _readers_check(values: list, ctx) -> None:
    import numpy as np
    brown, cats, ptb, glove, squad, conll, wordnet, pairs, documents = values
    assert list(brown)[0][:2] == [("The", "at"), ("Fulton", "np-tl")]          # [(word, tag), ...]
    assert cats == {"ca01": "news"}
    assert list(ptb) == [["the", "cat", "sat", "on", "the", "<unk>"], ["a", "dog", "ran"]]   # token lists
    words, vectors = glove                                                     # (words, float32 array)
    assert words == ["the", "cat"] and vectors.dtype == np.float32 and vectors.shape == (2, 2)
    assert [p["context"] for p in squad] == ["A b c."]
    assert list(conll)[0] == [["Ada", "B-person"], ["lives", "O"]]
    assert [(s.lemmas, s.examples) for s in wordnet] == [(["entity"], ["the entity was there"])]
    assert list(pairs) == [("cat", "dog", 7.35)]
    assert list(documents) == [[["a", "b", "."], ["c", "d", "."]], [["e", "f", "."]]]


#: The Python blocks of docs/*.md that run, by a line of each: (setup, replacements of
#: placeholders, check of the values of the block's expression lines, in order).
DOCS_RUN: Dict[str, Tuple[Callable, Tuple[Tuple[str, str], ...], Callable]] = {
    "from elmo.data import readers": (
        _readers_files,
        (('".../brown/cats.txt"', '"nltk_data/corpora/brown/cats.txt"'),
         ('"/usr/share/wordnet/data.noun"', '"data.noun"')),
        _readers_check),
}


def _docs_python_blocks() -> List[Tuple[Path, Block]]:
    return [(page, b) for page in DOCS for b in python_blocks(page.read_text(encoding="utf-8"))]


def test_every_docs_python_block_runs(tmp_path, monkeypatch):
    """docs/DATA.md's reader calls were run by no test: each block of docs/ is run here in a
    fresh folder, and the value of each of its expression lines is kept for the check."""
    import ast
    blocks = _docs_python_blocks()
    assert blocks, "docs/ has no python block any more: is the extraction broken?"
    for page, block in blocks:
        keys = [k for k in DOCS_RUN if blocks_named(k, [block])]
        assert len(keys) == 1, f"{page.name}:{block.line}: a python block of docs/ must be in DOCS_RUN, once"
        setup, replace, check = DOCS_RUN[keys[0]]
        code = block.code
        for old, new in replace:
            assert old in code, f"{page.name}:{block.line} no longer has {old!r}: update DOCS_RUN"
            code = code.replace(old, new)
        folder = tmp_path / f"{page.stem}-{block.line}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        ctx = Context(folder, code)
        namespace = {"__name__": "docs_block", **setup(ctx)}
        tree = ast.parse("\n" * (block.line - 1) + code, str(page))
        for i, node in enumerate(tree.body):         # `expr` -> `_values.append(expr)`
            if isinstance(node, ast.Expr):
                call = ast.parse("_values.append(None)", mode="eval").body
                assert isinstance(call, ast.Call)
                call.args = [node.value]
                tree.body[i] = ast.copy_location(ast.Expr(call), node)
        namespace["_values"] = values = []
        exec(compile(ast.fix_missing_locations(tree), str(page), "exec"), namespace)
        check(values, ctx)


def test_docs_elmo_commands_parse(parsers):
    failures, found = [], 0
    for page in DOCS:
        for command in readme_commands(page.read_text(encoding="utf-8")):
            if re.match(r"elmo [\w-]+: ", command.text):     # a message it prints, not a command
                continue
            for args, lenient in argument_lists(command):
                found += 1
                error = parse_error(parsers[lenient], args)
                if error:
                    failures.append(f"{page.name}:{command.line}: {command.text!r} -> {error}")
    assert found >= 5, "docs/'s elmo commands were not found: is the extraction broken?"
    assert not failures, "\n".join(failures)


#: The pages a reader of the repository follows: the README, docs/ and the experiments' page.
PAGES = [README, *DOCS, ROOT / "experiments" / "README.md"]


def relative_references(text: str) -> List[Tuple[int, str]]:
    """(line, path) of each markdown link or image to a relative path, and of each code span
    naming a path that leaves its page's folder (`../x.md`): the references a reader follows
    from the page's own folder."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if not re.match(r"[a-z][\w+.-]*:|#", target):
                found.append((number, target.split("#")[0]))
    found += [(n, span) for n, span in inline_spans(text) if re.fullmatch(r"(?:\.\./)+[\w./-]+", span)]
    return found


def test_the_pages_relative_references_lead_to_files_of_the_repository():
    """docs/DATA.md sent the reader to `../shared/DATA.md` for the data sets that are not
    available, a file outside the repository (it resolved only in the workspace it was written
    in): every relative link of a page, and every `../` path it gives, must name a file of the
    repository, from the page's own folder."""
    missing = []
    for page in PAGES:
        for number, target in relative_references(page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            if not path.exists() or ROOT not in path.parents:
                missing.append(f"{page.relative_to(ROOT)}:{number}: {target}")
    assert not missing, "\n".join(missing)


def test_relative_references_are_found_in_links_images_and_parent_paths():
    text = ("See [the data](docs/DATA.md#cache) and ![a plot](results/p.png), `../up/x.md`,\n"
            "not [a site](https://example.org/a), [an anchor](#speed), `docs/DATA.md` or `a/../b`.\n")
    assert relative_references(text) == [(1, "docs/DATA.md"), (1, "results/p.png"), (1, "../up/x.md")]


def brace_expanded(word: str) -> List[str]:
    """A shell word with bash's `{a,b}` expansion (no nesting), as the pages' commands use it."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if not m:
        return [word]
    return [out for choice in m.group(1).split(",")
            for out in brace_expanded(word[:m.start()] + choice + word[m.end():])]


def test_brace_expansion_reads_as_bash_does():
    assert brace_expanded("r/{a,b-c}/x{1,2}") == ["r/a/x1", "r/a/x2", "r/b-c/x1", "r/b-c/x2"]
    assert brace_expanded("r/{a}") == ["r/{a}"] and brace_expanded("--set seeds=[1]") == ["--set seeds=[1]"]


def test_the_committed_summaries_are_what_their_experiment_table_commands_write(tmp_path, monkeypatch, capsys):
    """experiments/README.md names the `elmo experiment-table ... -o experiments/results/.../
    summary.md` command of each committed summary; version 1's had been written by an earlier
    version (no amount trained for the adapted biLM): each command, run into another file from
    the repository's root, must write the committed file byte for byte."""
    from elmo.cli import main
    page = ROOT / "experiments" / "README.md"
    writes = []
    for command in readme_commands(page.read_text(encoding="utf-8")):
        for segment in shell_segments(command.text):
            args = elmo_arguments(segment)
            if args and args[0] == "experiment-table" and "-o" in args:
                writes.append([word for arg in args for word in brace_expanded(arg)])
    assert len(writes) >= 2, "experiments/README.md's summary commands were not found"
    monkeypatch.chdir(ROOT)            # (the table names each experiment by its path as given)
    for args in writes:
        at = args.index("-o") + 1
        committed, args[at] = ROOT / args[at], str(tmp_path / "summary.md")
        assert main(args) == 0, capsys.readouterr().err
        assert (tmp_path / "summary.md").read_bytes() == committed.read_bytes(), f"{committed} differs"


def test_the_readme_opens_with_its_two_commands():
    """The developers' promise: the README starts with two commands that set everything up on
    a fresh machine, one running the main job on the bundled model, one running the tests (the
    command `.ci/run` runs after its setup). A signpost once moved above them."""
    body = readme_text().split("\n", 1)[1].lstrip("\n")   # (after the title line)
    assert body.startswith("```bash\n"), body[:80]
    lines = [line.split("#")[0].strip() for line in body.split("```")[1].splitlines()[1:]]
    assert lines == ["bash scripts/setup.sh && .venv/bin/elmo demo",
                     "bash scripts/setup.sh && .venv/bin/python -m pytest"]
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert "bash scripts/setup.sh" in ci and "\npython -m pytest\n" in ci


def test_the_readme_names_each_kernel_cap_of_the_ci_reruns():
    """The README's "Tests and CI" says under which kernel sets `.ci/run` reruns the numerics
    tests, so that a reader can repeat a failure there: the caps added to the loop (oneDNN's,
    then MKL's, which does the float32 matrix products) went unnamed beside ATen's."""
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    loop = ci[ci.index("\nfor capability in "):]
    caps = sorted(set(re.findall(r"\b([A-Z][A-Z0-9_]+)=\$", loop)))   # each set as VAR=$value
    assert "ATEN_CPU_CAPABILITY" in caps, caps
    section = readme_text().split("\n## Tests and CI\n", 1)[1].split("\n## ", 1)[0]
    assert_phrases_in(section, [f"`{cap}" for cap in caps])
