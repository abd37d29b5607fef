"""The ``elmo`` command. Each job is a subcommand; this file only parses arguments and calls
library functions, so every job is also a Python call.

Subcommands live beside the code they drive: each module in ``COMMAND_MODULES`` has a
``register(subparsers)`` function that adds its subcommands and sets ``func`` on them.
"""
from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import io
import os
import re
import signal
import sys
import threading
from contextlib import contextmanager, suppress
from typing import Iterator, List, Optional

#: Modules that add subcommands, in the order they appear in ``elmo --help``.
COMMAND_MODULES = [
    "elmo.commands.core",
    "elmo.commands.models",
    "elmo.commands.train",
    "elmo.commands.data",
    "elmo.commands.embed",
    "elmo.commands.analysis",
    "elmo.commands.tasks",
    "elmo.commands.predict",
]


DEBUG_HELP = "show the full traceback of an error (also: ELMO_DEBUG=1)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that a long option is taken only as spelled, never as a prefix
    of it (``allow_abbrev`` off; every command's parser is of this class too: argparse's
    subparsers make their parsers of the parent's class). argparse took any unique prefix for
    the whole option: a script's ``elmo embed ... --overw`` broke once another option began so,
    and after a rename a prefix could silently be another option (``elmo experiment --seed 3``
    ran seeds 1 to 3 as ``--seeds 3``). A prefix is an unknown option, whose usage error names
    the options meant (:func:`_parse`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every (sub)command parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="elmo",
        description="ELMo: deep contextualised word representations. Load the original weights, "
                    "embed text, train and adapt biLMs, and measure what the layers hold.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # required: `elmo` alone is a usage error (argparse's usage line and message on stderr,
    # status 2), as a subcommand's missing argument is; it printed the help to stdout
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    for command in _parsers(parser):
        if command is not parser and not any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
            # after the command too: `elmo info X --debug` was "unrecognized arguments: --debug"
            # (given there, it is the same; left out, it keeps the value of `elmo --debug CMD`)
            command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


@contextmanager
def _model_name_warnings_as_lines(command: str) -> Iterator[None]:
    """Show a :class:`~elmo.ModelNameWarning` (a model name that is also a local folder) or a
    :class:`~elmo.tokenize.TokenizerRevisionWarning` (a resumed output or a loaded task model
    of another tokenizer revision) as one ``elmo COMMAND: warning: ...`` line, not Python's two
    lines naming our source file.
    Every warning's URLs are shown without their password (:func:`~elmo.redact.redact_url`)."""
    import warnings

    from . import ModelNameWarning
    from .tokenize import TokenizerRevisionWarning
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        from .redact import redact_url
        # (a URL a warning names may hold a login: its password is not shown)
        if issubclass(category, (ModelNameWarning, TokenizerRevisionWarning)):
            print(f"elmo {command}: warning: {redact_url(str(message))}", file=sys.stderr)
        else:
            shown(redact_url(str(message)), category, filename, lineno, file, line)
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def _version() -> str:
    from . import __version__
    return __version__


def main(argv: Optional[List[str]] = None) -> int:
    status = _main(argv)
    training = sys.modules.get("elmo.training.distributed")
    if training is not None:   # (a torchrun job's process ends here: see end_process_after_a_group)
        training.end_process_after_a_group(status)
    return status


def _main(argv: Optional[List[str]]) -> int:
    if sys.stderr is None:
        # stderr closed (`2>&-`, a daemon): Python has no stream there, and the first progress
        # bar or note ended the command with an AttributeError that no one saw (exit 1, no
        # output). What it says is lost, as it would be in /dev/null; the work is done.
        sys.stderr = open(os.devnull, "w")
    if sys.stdout is None:   # stdout closed (`>&-`): a command that prints says so in one line
        sys.stdout = _ClosedStdout()
    stdout = sys.stdout
    sys.stdout = _NamedStdout(stdout)
    flushed = True
    try:
        try:
            status = _run(argv)
        finally:   # (also after argparse's --help and --version, which exit: SystemExit)
            flushed = _stdout_flushed()
    except SystemExit:
        if flushed:
            raise
        return 1
    except BrokenPipeError:
        return _broken_pipe()
    except KeyboardInterrupt:
        # Ctrl-C before the command ran (its modules imported, its options parsed): one line,
        # as during it (the traceback of an import was shown)
        print("elmo: interrupted", file=sys.stderr)
        return 130
    finally:
        if isinstance(sys.stdout, _NamedStdout):   # (a caller's own stream back, as it gave it)
            sys.stdout = stdout
    return status if flushed else 1


def _stdout_flushed() -> bool:
    """Flush stdout (output still buffered for a reader that may be gone: `elmo info | head`);
    False once a write to it that failed and was not reported yet is said on stderr: this
    flush's, or one that argparse ignored (``elmo --version > /dev/full``, unbuffered, exited 0
    having printed nothing). A closed pipe is a BrokenPipeError."""
    with suppress(StdoutError):   # (kept as the stream's unreported error)
        sys.stdout.flush()
    error = getattr(sys.stdout, "unreported", None)
    if error is None:
        return True
    print(f"elmo: error: {one_line(error)}", file=sys.stderr)
    _stdout_dropped(1)
    return False


class _ClosedStdout(io.TextIOBase):
    """sys.stdout where the descriptor is closed: Python has None there, and ``print`` to it
    was an AttributeError's traceback. Writing is now the OS error a closed descriptor gives
    (``elmo CMD: error: stdout: Bad file descriptor``, status 1); a command that prints
    nothing (``elmo embed``) runs as usual."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF), "stdout")


class StdoutError(OSError):
    """Writing the command's standard output failed (its filename is ``"stdout"``)."""


class _NamedStdout:
    """sys.stdout while a command runs: the OS error of a write or flush is a
    :class:`StdoutError`, so that its line names stdout (``elmo demo > /dev/full`` read
    ``[Errno 28] No space left on device``, as if an output file were full). A closed pipe
    stays a BrokenPipeError (a reader that went away: no error). Everything else is the
    stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream
        #: the last failed write's error until it is said on stderr (:func:`_stdout_dropped`)
        self.unreported: Optional[OSError] = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            raise self._failed(e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise self._failed(e) from None

    def _failed(self, e: OSError) -> OSError:
        error = _named_stdout_error(e)
        if isinstance(error, StdoutError):
            self.unreported = error
        return error

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _named_stdout_error(e: OSError) -> OSError:
    """``e``, from a write to stdout, as a :class:`StdoutError` (a closed pipe, and an error
    without an errno, as they are)."""
    if isinstance(e, BrokenPipeError) or not e.errno:
        return e
    return StdoutError(e.errno, os.strerror(e.errno), "stdout")


def _stdout_dropped(status: int) -> int:
    """``status``, once stdout points at devnull: what is still buffered for it (which cannot be
    written) then goes nowhere when Python flushes it at exit, which printed a second error
    ("Exception ignored in: <_io.TextIOWrapper name='<stdout>'>") and made the status 120."""
    if isinstance(sys.stdout, _NamedStdout):   # (its error is said by now)
        sys.stdout.unreported = None
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):   # (a stream without a descriptor: io.StringIO, a test's capture)
        return status
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return status


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` ran: ``elmo models list``'s for ``models list``."""
    return _command_path(parser, args)[-1][1]


def _command_path(parser: argparse.ArgumentParser, args: argparse.Namespace) -> List[tuple]:
    """(name, parser) of each (sub)command ``args`` ran, the top parser's first (name "")."""
    path = [("", parser)]
    while True:
        chosen = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, chosen.dest, None) if chosen is not None else None
        if chosen is None or name not in chosen.choices:
            return path
        parser = chosen.choices[name]
        path.append((name, parser))


def _parse(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> argparse.Namespace:
    """``parser.parse_args``, but an unknown option is the command's usage error: argparse
    reports it from the top parser ("usage: elmo [-h] ... COMMAND ...", "elmo: error:
    unrecognized arguments"), which shows none of the command's own options."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _command_parser(parser, args)
        close = _close_options(command, extra)
        command.error(f"unrecognized arguments: {' '.join(extra)}"
                      + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    return args


def _close_options(parser: argparse.ArgumentParser, extra: List[str]) -> List[str]:
    """The options of ``parser`` that an unknown long option of ``extra`` may have meant, at
    most three: those it begins (``--seeds`` for ``--seed``), then the nearest spellings as
    :mod:`difflib` ranks them (``--lr-decay-threshold`` for ``--lr-decay-treshold``). Hidden
    options (embed's AllenNLP spellings) are never named."""
    options = [o for action in parser._actions if action.help != argparse.SUPPRESS
               for o in action.option_strings if o.startswith("--")]
    close: List[str] = []
    for arg in extra:
        typed = arg.split("=", 1)[0]
        if not typed.startswith("--") or typed == "--":
            continue
        for option in [o for o in options if o.startswith(typed)] + difflib.get_close_matches(typed, options, n=3):
            if option not in close:
                close.append(option)
    return close[:3]


def _run(argv: Optional[List[str]]) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    from .commands import progress_bar_wanted
    from .config import ConfigError
    from .data.fetch import DataError
    from .env_switch import env_switch
    from .hub.download import download_bars
    from .hub.errors import DownloadError
    from .user_paths import expand_args
    from .weight_values import WeightFileError
    # the whole command, as typed: "elmo vocab: error" did not say which vocab action failed
    command = " ".join(name for name, _ in _command_path(parser, args)[1:])
    try:    # ("false" and "off" were on: anything but "" and "0")
        debug = args.debug or env_switch("ELMO_DEBUG")
    except ValueError as e:
        print(f"elmo {command}: error: {e}", file=sys.stderr)
        return 1
    try:
        with _stop_signals_raise(), _model_name_warnings_as_lines(command), \
                download_bars(progress_bar_wanted(_progress_asked(args))):
            # (a quoted "~/runs" or --output=~/runs made a folder named "~": see elmo.user_paths)
            result = args.func(expand_args(args))
            sys.stdout.flush()   # (a full disk behind `> FILE` is this command's error)
    except BrokenPipeError:
        raise
    except (ConfigError, WeightFileError, DownloadError, DataError, ValueError, OSError,
            FloatingPointError) as e:
        # Expected errors (bad input or options, an output that cannot be written, a full
        # disk, a corpus that is unknown or cannot be fetched, e.g. `--corpus nope:dev`):
        # one clear line, no traceback; --debug or ELMO_DEBUG=1 shows it.
        if debug:
            if isinstance(e, StdoutError):   # (the traceback says it: no line at exit too)
                _stdout_dropped(1)
            raise
        print(f"elmo {command}: error: {one_line(e)}", file=sys.stderr)
        return _stdout_dropped(1) if isinstance(e, StdoutError) else 1
    except KeyboardInterrupt as e:
        from .training.stop import TrainingStopped
        if isinstance(e, TrainingStopped):   # a training run that checkpointed, then stopped
            if _says_why_it_stopped(command):   # (once for a torchrun job)
                print(f"elmo {command}: {e}", file=sys.stderr)
            return e.exit_status
        if isinstance(e, Terminated):
            if _says_why_it_stopped(command):
                print(f"elmo {command}: stopped by SIGTERM", file=sys.stderr)
            return 128 + signal.SIGTERM
        print(f"elmo {command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


def _progress_asked(args: argparse.Namespace) -> bool:
    """Whether the command line leaves progress bars on: no ``--quiet`` (predict, experiment),
    ``--quiet`` of embed or ``--no-progress`` of training (both stored as ``progress``)."""
    return getattr(args, "progress", True) is not False and not getattr(args, "quiet", False)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, ``kill``, a closing terminal), raised where the command was, as
    Ctrl-C is: its cleanups run (a temporary file deleted, a lock released) before it exits
    143. Training handles the signal itself while it runs (:mod:`elmo.training.stop`)."""


def _raise_terminated(_number, _frame) -> None:
    raise Terminated()


@contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` inside the block (unless it is ignored, ``nohup``), as
    Ctrl-C (SIGINT) raises Python's KeyboardInterrupt; neither is lost in a finalizer.

    Python runs a signal's handler at whatever bytecode comes next, which may be a finalizer
    (a ``__del__``, a weakref callback) that the garbage collector started. An exception there
    is printed as "Exception ignored" and dropped, and the command would run on to its end (a
    Ctrl-C during ``elmo embed`` did so, exit status 0). So a dropped :class:`Terminated` or
    KeyboardInterrupt sends its signal again a moment later, from a timer thread, to be raised
    in the command's own code; if the block ends first, it is raised on the way out. A SIGINT
    whose handler is not Python's own (training installs one while it runs) is left alone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    term = getattr(signal, "SIGTERM", None)
    catch_term = term is not None and signal.getsignal(term) is signal.SIG_DFL
    again: List[threading.Timer] = []
    dropped: List[KeyboardInterrupt] = []
    previous_hook = sys.unraisablehook

    def unraisable(what) -> None:
        error = what.exc_value
        if isinstance(error, Terminated) and catch_term:
            number = term
        elif (type(error) is KeyboardInterrupt
              and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            number = signal.SIGINT
        else:
            previous_hook(what)
            return
        dropped.append(error)
        while True:
            # (the copy may come while this hook still runs, the timer's thread started and
            # this one not yet back from start() on a loaded machine: raised here, it was
            # dropped as the hook's own "Exception ignored", and the stop lost; caught, it is
            # sent again. Nothing after start() returns checks for a signal before the hook
            # has returned.)
            try:
                again.append(threading.Timer(0.01, os.kill, (os.getpid(), number)))
                again[-1].start()
                return
            except KeyboardInterrupt:   # (Terminated is one too)
                continue

    if catch_term and term is not None:   # (catch_term implies a SIGTERM; mypy does not follow)
        signal.signal(term, _raise_terminated)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        for timer in again:
            timer.cancel()
        if catch_term and term is not None:
            signal.signal(term, signal.SIG_DFL)
        sys.unraisablehook = previous_hook
    if dropped:                   # the block ended before the signal came again
        raise type(dropped[0])()


def _says_why_it_stopped(command: str) -> bool:
    """Whether this process is the one of a torchrun job that says why the job stopped: rank 0,
    or a process run alone. A launch environment :func:`elmo.runtime.launch_env` refuses (a
    ``RANK`` that is not a number) is said in one line, and this process then speaks too: a
    string compare took such a rank for "not rank 0" and the stop went unexplained."""
    from .runtime import launch_env
    try:
        return launch_env()[0] == 0
    except ValueError as e:
        print(f"elmo {command}: error: {one_line(e)}", file=sys.stderr)
        return True


#: The message of Python's ``tempfile`` when it can create a file in none of its folders.
_NO_TEMP_FOLDER = re.compile(r"\[Errno \d+\] No usable temporary directory found in \[(.*)\]$")


def one_line(e: BaseException) -> str:
    """The message of an error on one line; a plain OS error about a file reads 'path: reason'.
    A URL's password in it is shown as ``***`` (a URL given or read from a record may hold one).
    Public: the scripts run as ``python -m elmo.training.<x>`` print their errors with it too."""
    from .redact import redact_url
    no_temp = _NO_TEMP_FOLDER.match(str(e)) if isinstance(e, FileNotFoundError) else None
    if isinstance(e, OSError) and e.errno and e.filename and (type(e).__module__ == "builtins"
                                                              or isinstance(e, StdoutError)):
        text = f"{e.filename}: {os.strerror(e.errno)}"
    elif no_temp:
        # Python's tempfile (which torch calls) when no candidate folder takes a file: a full
        # /tmp read "[Errno 2] No usable temporary directory found in [...]", as if none existed
        tried = no_temp[1].replace("'", "")
        text = (f"no folder for temporary files can be written (is the disk full?): tried {tried}; "
                f"free space there or set TMPDIR to a folder that has it")
    else:
        text = str(e) or type(e).__name__
    return redact_url(" ".join(text.split()))


def _broken_pipe() -> int:
    """The reader of our output went away (`elmo info | head`): stop quietly, as the Python
    documentation recommends, pointing stdout at devnull so that the flush at exit cannot fail
    again; the exit status is that of a process ended by SIGPIPE."""
    return _stdout_dropped(128 + getattr(signal, "SIGPIPE", 13))


if __name__ == "__main__":
    sys.exit(main())
