"""Job configurations: one typed dataclass per job, and the command line made from it.

Each job (training a biLM, embedding a file, an experiment's task training, the analysis
report) keeps all of its settings in one dataclass. A field that the command line sets
carries its help text in its metadata (:func:`setting`). :func:`add_arguments` makes the
argparse options from those fields, with the defaults read from the dataclass, so a default
is written once. :func:`from_args` builds the config back from the parsed arguments.

Every job command also takes (:func:`add_config_arguments`):

* ``--config FILE``: a JSON object of settings, all of them (as :func:`save` or
  ``--print-config`` write them) or any subset;
* ``--set KEY=VALUE`` (repeatable): a dotted override, e.g. ``--set lr=0.01`` or
  ``--set options.lstm.dim=256``; VALUE is read as JSON when it parses, else as a string;
* ``--print-config``: print the resolved configuration as JSON and stop.

They apply in this order: the dataclass's defaults, ``--config``, the options given on the
command line, ``--set``. Values are checked against the field types, and an unknown key is an
error that names it. A relative path in the file is taken from the working folder, as on the
command line (what ``--print-config`` wrote runs again); a leading ``~`` is the home folder
(:mod:`elmo.user_paths`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import typing
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    Type, TypeVar, Union)

from .config import ConfigError
from .io import atomic_write_text
from .text_files import read_json as read_json_file
from .user_paths import PathSettingError, expand_settings

if TYPE_CHECKING:  # the type checker's protocol of "a dataclass"; no run-time counterpart
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")

__all__ = ["DEVICE_CHOICES", "ConfigError", "add_arguments", "add_config_arguments", "build", "file_key",
           "file_settings", "from_args", "in_config_terms", "in_typed_terms", "load", "print_config_and_exit", "save",
           "set_settings", "setting", "to_dict", "to_options"]

#: What a ``--device`` takes (:func:`elmo.runtime.resolve_device`), as every command's help
#: says it; here, not in the torch-importing runtime, so that ``elmo --help`` needs no torch
DEVICE_CHOICES = "cpu, cuda, cuda:N or auto (CUDA when present)"


def setting(default: Any = dataclasses.MISSING, *, help: str, flag: Optional[str] = None,
            default_factory: Any = dataclasses.MISSING, choices: Optional[Sequence[Any]] = None,
            metavar: Optional[str] = None, parse: Optional[Callable[[str], Any]] = None,
            scale: Optional[float] = None, short: Optional[str] = None, boolean: Optional[str] = None,
            show_default: bool = True, aliases: Sequence[str] = ()) -> Any:
    """A dataclass field that the command line sets.

    Args:
        help: the option's help text; " (default X)" is added from the field's default.
        flag: the option's name when it is not ``--field-name`` (e.g. ``--negatives``).
        parse: turns the option's text into the value (default: from the field's type).
        scale: the option is in other units: field value = option value * scale (e.g. the
            option ``--max-hours`` of the field ``max_seconds`` has scale 3600).
        short: a one-letter alias such as ``-o``.
        boolean: for a bool field, ``"flag"`` (``--x`` sets True), ``"negated"`` (``--no-x``
            sets False) or ``"both"`` (``--x`` and ``--no-x``); default: ``flag`` when the
            default is False, ``negated`` when it is True.
        show_default: add " (default X)" to the help.
        aliases: other long spellings of the option, e.g. ``--no-progress`` of ``--quiet``
            (the name another command gives the same option).
    """
    meta = {"help": help, "flag": flag, "choices": choices, "metavar": metavar, "parse": parse,
            "scale": scale, "short": short, "boolean": boolean, "show_default": show_default,
            "aliases": tuple(aliases)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def check_numbers(where: str, block: str, **rules: Tuple[float, str]) -> None:
    """ConfigError for the first setting of ``block`` outside its range: each rule is
    ``name=(value, kind)`` with kind "count" (an integer of 1 or more), "count0" (0 or more),
    "rate" (a finite number of 0 or more), "probability" (0 or more, below 1) or "seconds" (0
    or more, infinity included). NaN fails every kind: it compares false. ``where`` and
    ``block`` ("" for none) begin the message: ``task pos: train: lr must be ...``."""
    tests = {"count": (lambda v: v >= 1, "an integer of 1 or more"),
             "count0": (lambda v: v >= 0, "an integer of 0 or more"),
             "rate": (lambda v: 0 <= v < math.inf, "a finite number of 0 or more"),
             "probability": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
             "seconds": (lambda v: v >= 0, "a number of 0 or more")}
    for name, (value, kind) in rules.items():
        ok, wanted = tests[kind]
        if not ok(value):
            raise ConfigError(f"{where}{_at(block)}{name} must be {wanted}, got {value}")


# ------------------------------------------------------------------------------------ types

def _field_types(cls: Type[DataclassInstance]) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def _base_type(hint: Any) -> Any:
    """int for Optional[int]; the hint itself otherwise."""
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _accepts_none(hint: Any) -> bool:
    return hint is Any or (typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint))


def coerce(name: str, hint: Any, value: Any) -> Any:
    """``value`` checked against the type ``hint`` of setting ``name`` (ints are accepted as
    floats, a string of a number is not)."""
    if value is None:
        if _accepts_none(hint):
            return None
        raise ConfigError(f"setting {name}: may not be null")
    base = _base_type(hint)
    origin = typing.get_origin(base)
    if base is Any:
        return value
    if base is bool:
        if isinstance(value, bool):
            return value
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif base is str:
        if isinstance(value, str):
            return value
    elif origin in (list, List):
        if isinstance(value, (list, tuple)):
            (item,) = typing.get_args(base) or (Any,)
            return [coerce(f"{name}[{i}]", item, v) for i, v in enumerate(value)]
    elif origin in (dict, Dict) or base is dict:
        if isinstance(value, Mapping):
            return dict(value)
    else:
        return value  # a type this module does not check
    kind = getattr(base, "__name__", str(base))
    raise ConfigError(f"setting {name}: expected {kind}, got {value!r}")


# ------------------------------------------------------------------------------------ dicts

def file_key(f: dataclasses.Field) -> str:
    """The key of field ``f`` in a config file: its ``key`` metadata when the file spells it
    otherwise (e.g. ``metadata={"key": "lambda"}`` on a field ``lam``, as ``lambda`` is a
    Python keyword), else its name."""
    return f.metadata.get("key") or f.name


def _at(place: str) -> str:
    """The start of an error about ``place``: ``"train.json: "``, or nothing for no place."""
    return f"{place}: " if place else ""


def _check_keys(cls: Type[DataclassInstance], values: Mapping[str, Any], source: str,
                block: Optional[str] = None) -> None:
    known = sorted(file_key(f) for f in dataclasses.fields(cls))
    unknown = sorted(map(str, set(values) - set(known)))
    if not unknown:
        return
    names = ", ".join(unknown)
    if block:   # one block of a larger file: "task pos: unknown train settings: epoch"
        raise ConfigError(f"{_at(source)}unknown {block} settings: {names} (known: {', '.join(known)})")
    raise ConfigError(f"{_at(source)}unknown setting{'s' if len(unknown) > 1 else ''} {names} "
                      f"(known: {', '.join(known)})")


def build(cls: Type[C], values: Any, source: str = "config", *, block: Optional[str] = None) -> C:
    """``cls(**values)`` with every key and value checked; missing keys take their defaults.

    ``values`` is keyed as a config file spells the settings (:func:`file_key`). An error is
    one :class:`ConfigError` line that names the key as written there and where it is:
    ``source`` (a file, ``--config/--set``; "" for nowhere in particular) and, when ``values``
    is one block of a larger file, ``block`` (e.g. ``train`` in ``task pos: train: setting
    lr: expected float, got 'fast'``)."""
    where = _at(": ".join(p for p in (source, block) if p))
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}expected an object of settings, got {values!r}")
    _check_keys(cls, values, source, block)
    hints = _field_types(cls)
    fields = {file_key(f): f for f in dataclasses.fields(cls)}
    checked: Dict[str, Any] = {}
    for key, value in values.items():
        try:
            checked[fields[key].name] = coerce(key, hints[fields[key].name], value)
        except ConfigError as e:
            raise ConfigError(f"{where}{e}") from None
    missing = [f for f in dataclasses.fields(cls) if f.name not in checked and f.init
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        names = ", ".join(f"{file_key(f)} ({_flag(f)})" if "help" in f.metadata else file_key(f)
                          for f in missing)
        raise ConfigError(f"{where}missing setting{'s' if len(missing) > 1 else ''} {names}")
    return cls(**checked)


def to_dict(cfg: Any) -> Dict[str, Any]:
    """``cfg``'s settings as the JSON object that :func:`build` reads back (keyed by
    :func:`file_key`; nested dataclasses become objects)."""
    values = dataclasses.asdict(cfg)
    return {file_key(f): values[f.name] for f in dataclasses.fields(cfg)}


def save(cfg: Any, path: str | Path) -> Path:
    """Write ``cfg`` as JSON (atomically), in the form :func:`load` and ``--config`` read."""
    path = Path(path)
    atomic_write_text(path, json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")
    return path


def distinct_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object of a config (``json.loads``'s ``object_pairs_hook``), refused when a key
    repeats: JSON keeps the last, so a second block of settings silently replaced the first."""
    data: Dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {key!r} appears twice in one object")
        data[key] = value
    return data


def read_json(path: str | Path) -> Dict[str, Any]:
    """The JSON object in ``path`` (a clear error when it is missing or not an object)."""
    data = read_json_file(path, ConfigError, what="a JSON config", expected="a JSON config",
                        object_pairs_hook=distinct_keys)      # (a repeated key: "not a JSON config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a JSON object of settings")
    return data


def load(cls: Type[C], path: str | Path) -> C:
    """The config saved in ``path`` (settings it lacks take their defaults)."""
    return build(cls, read_json(path), source=str(path))


def parse_assignment(text: str) -> tuple[List[str], Any]:
    """``"options.lstm.dim=256"`` -> (["options", "lstm", "dim"], 256)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. lr=0.01")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip().split("."), value


def apply_assignments(values: Dict[str, Any], assignments: Iterable[str]) -> Dict[str, Any]:
    """``values`` with each dotted ``KEY=VALUE`` set (nested dictionaries are created as needed;
    a number indexes a list, e.g. ``variants.1.elmo.lambda``; the caller checks the keys)."""
    out = json.loads(json.dumps(values, default=str))  # a deep copy that :func:`build` can check
    for text in assignments:
        path, value = parse_assignment(text)
        node: Any = out
        for i, part in enumerate(path):
            where = ".".join(path[:i + 1])
            key: Union[str, int] = part  # an int exactly when node is a list
            if isinstance(node, list):
                if not (part.isdigit() and int(part) < len(node)):
                    raise ConfigError(f"--set {text}: {where}: {'.'.join(path[:i]) or 'the config'} "
                                      f"is a list of {len(node)}; expected an index 0..{len(node) - 1}")
                key = int(part)
            elif not isinstance(node, dict):
                raise ConfigError(f"--set {text}: {'.'.join(path[:i])} is not a group of settings")
            if i == len(path) - 1:
                node[key] = value
                break
            child = node[key] if isinstance(key, int) else node.get(key)
            if child is None:
                child = node[key] = {}
            node = child
    return out


# ------------------------------------------------------------------------------ command line

def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def in_option_terms(cls: Type[DataclassInstance], message: str) -> str:
    """A library error ``message`` about settings of ``cls``, with the settings named by their
    command-line options (``--batch-size must be at least 1``): the library names its
    parameters (``batch_size``), which a command's user never typed.

    Renamed: a field whose option takes its value as is (not a switch such as ``--no-sort``,
    not one scaled such as ``--max-hours``), wherever an underscore name stands as a word of its
    own (not inside a path: ``runs/batch_size/out.h5`` is left); a one-word name (``overlap``,
    ``device``) only where it begins the message as its subject (``overlap must ...``,
    ``device 'x': ...``, ``device cuda: ...``), since elsewhere it may be an ordinary word."""
    import re

    types = _field_types(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("scale") or _base_type(types[f.name]) is bool:
            continue
        if "_" in f.name:
            pattern = rf"(?<![\w./\\-]){f.name}(?![\w/\\-]|\.\w)"
        else:
            pattern = rf"^{f.name}(?= must | '| \S+: )"
        message = re.sub(pattern, _flag(f), message)
    return message


def _default_text(f: dataclasses.Field, default: Any) -> Optional[str]:
    if not f.metadata.get("show_default", True) or default is None or default == [] or default == {}:
        return None
    scale = f.metadata.get("scale")
    if scale and isinstance(default, (int, float)):
        default = default / scale
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, list):
        return " ".join(map(str, default))
    return str(default)


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: Type[DataclassInstance], *,
                  exclude: Iterable[str] = (), defaults: Optional[Mapping[str, Any]] = None,
                  helps: Optional[Mapping[str, str]] = None) -> None:
    """Add an option for every field of ``cls`` made with :func:`setting` (less ``exclude``).

    The options leave nothing in the namespace unless given (``argparse.SUPPRESS``), so that
    :func:`from_args` can tell a given option from a default. ``defaults`` replaces some of the
    dataclass's defaults (e.g. one epoch for fine-tuning), ``helps`` some of their help texts
    (one naming an option the command does not have)."""
    exclude = set(exclude)
    defaults = dict(defaults or {})
    helps = dict(helps or {})
    hints = _field_types(cls)
    for f in dataclasses.fields(cls):
        if f.name in exclude or "help" not in f.metadata:
            continue
        meta = f.metadata
        default = defaults.get(f.name, _field_default(f))
        names = [_flag(f)] + ([meta["short"]] if meta.get("short") else [])
        kwargs: Dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
        shown = _default_text(f, default)
        kwargs["help"] = helps.get(f.name, meta["help"]) + (f" (default {shown})" if shown is not None else "")
        base = _base_type(hints[f.name])
        if base is bool and meta.get("parse") is None:
            style = _bool_style(f, default)
            if style == "both":
                kwargs["action"] = argparse.BooleanOptionalAction
            elif style == "negated":
                names = [meta.get("flag") or "--no-" + f.name.replace("_", "-")]
                kwargs["action"] = "store_false"
            else:
                kwargs["action"] = "store_true"
        else:
            if meta.get("parse"):
                kwargs["type"] = meta["parse"]
            elif typing.get_origin(base) in (list, List):
                (item,) = typing.get_args(base) or (str,)
                kwargs["nargs"] = "*"
                kwargs["type"] = item if item in (int, float, str) else str
            elif base in (int, float, str):
                kwargs["type"] = base
            if meta.get("choices") is not None:
                kwargs["choices"] = meta["choices"]
            if meta.get("choices") is None:  # named after the option, not the field
                kwargs["metavar"] = meta.get("metavar") or names[0].lstrip("-").replace("-", "_").upper()
        parser.add_argument(*names, *meta.get("aliases", ()), **kwargs)


def _bool_style(f: dataclasses.Field, default: Any) -> str:
    return f.metadata.get("boolean") or ("negated" if default else "flag")


def to_options(cfg: Any, *, explicit: bool = True, exclude: Iterable[str] = (),
               defaults: Optional[Mapping[str, Any]] = None) -> List[str]:
    """The options that :func:`add_arguments` parses back to ``cfg``'s values (the inverse of
    it): every field that is set (``explicit``), or only those that differ from the defaults.
    A None value is left out (the option's absence gives it), as is a bool that its option
    cannot express (False for a plain ``--x`` flag)."""
    exclude, defaults = set(exclude), dict(defaults or {})
    out: List[str] = []
    for f in dataclasses.fields(cfg):
        if f.name in exclude or "help" not in f.metadata:
            continue
        meta, value = f.metadata, getattr(cfg, f.name)
        default = defaults.get(f.name, _field_default(f))
        if value is None or (not explicit and value == default):
            continue
        flag = _flag(f)
        if isinstance(value, bool) and meta.get("parse") is None:
            style = _bool_style(f, default)
            if style == "both":
                out.append(flag if value else "--no-" + flag[2:])
            elif style == "negated":
                out += [] if value else [meta.get("flag") or "--no-" + f.name.replace("_", "-")]
            else:
                out += [flag] if value else []
        elif isinstance(value, list):
            out += [flag, *map(str, value)]
        else:
            scale = meta.get("scale")
            text = str(value / scale if scale and isinstance(value, (int, float)) else value)
            # argparse takes a separate value that starts with "-" for an option ("--gamma
            # -1e-05", "--model -m"): such a stored command line did not parse back
            out += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
    return out


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def add_config_arguments(parser: argparse.ArgumentParser, *, example: str) -> None:
    """``--config FILE``, ``--set KEY=VALUE`` and ``--print-config`` (see the module docstring).
    ``example`` is a ``KEY=VALUE`` of this command's own settings for ``--set``'s help (the
    shared ``lr=0.01`` was an unknown setting of ``elmo embed`` and ``elmo analyze``)."""
    g = parser.add_argument_group("configuration")
    g.add_argument("--config", dest="config_file", metavar="FILE",
                   help="a JSON file of settings (as --print-config writes); options given here override it")
    g.add_argument("--set", dest="config_set", action="append", default=[], metavar="KEY=VALUE",
                   help=f"set a setting by its dotted name, last of all (e.g. --set {example}); repeatable")
    g.add_argument("--print-config", action="store_true",
                   help="print the resolved configuration as JSON and stop")


def from_args(cls: Type[C], args: argparse.Namespace, *, defaults: Optional[Mapping[str, Any]] = None,
              given: Optional[Mapping[str, Any]] = None,
              config_values: Optional[Mapping[str, Any]] = None) -> C:
    """The configuration the command line asks for: ``cls``'s defaults, then ``defaults``, then
    the ``--config`` file, then the options given (and ``given``, values the command took from
    elsewhere, e.g. positional arguments), then ``--set``. With ``--config``, ``config_values``
    is the file's contents when the command has read it already (:func:`read_json`), so that
    it is read once."""
    names = {f.name: f for f in dataclasses.fields(cls)}
    key = {name: file_key(f) for name, f in names.items()}   # build reads the file's keys
    values: Dict[str, Any] = {key.get(k, k): v for k, v in (defaults or {}).items()}
    config_file = getattr(args, "config_file", None)
    if config_file:
        file_values = read_json(config_file) if config_values is None else dict(config_values)
        _check_keys(cls, file_values, config_file)
        values.update(file_values)
    for name, value in vars(args).items():
        f = names.get(name)
        if f is None or "help" not in f.metadata:
            continue
        scale = f.metadata.get("scale")
        values[key[name]] = value * scale if scale and value is not None else value
    values.update({key.get(k, k): v for k, v in (given or {}).items() if v is not None})
    values = apply_assignments(values, getattr(args, "config_set", None) or [])
    try:   # (a config file's "~/runs": no shell expanded it; see elmo.user_paths)
        expand_settings(values)
    except PathSettingError as e:   # (named as the value was given: the file's key, --set's, the option)
        field = next((f for f in dataclasses.fields(cls) if file_key(f) == e.name), None)
        said = f"{_flag(field) if field is not None else e.name}: {e}"
        raise ValueError(in_typed_terms(cls, said, args, file_values if config_file else None)) from None
    try:
        return build(cls, values, source="--config/--set" if config_file or getattr(args, "config_set", None)
                     else "command line")
    except ValueError as e:   # the config's own checks name the option: the value may be the file's or --set's
        # (build's own errors name the key as written, and where: no option begins them)
        renamed = in_typed_terms(cls, str(e), args, file_values if config_file else None)
        if renamed == str(e):
            raise
        raise (ConfigError if isinstance(e, ConfigError) else ValueError)(renamed) from e


def file_settings(cls: Type[DataclassInstance], args: argparse.Namespace,
                  config_values: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """{option: key in the file} of the settings of ``cls`` whose value the run takes from the
    ``--config`` file: set there, and given neither as an option nor by ``--set``. A scaled
    option (``--max-hours``) is left out: the file holds its value in other units. Empty
    without ``--config``; ``config_values`` is the file's contents when read already."""
    config_file = getattr(args, "config_file", None)
    if not config_file:
        return {}
    in_file = read_json(config_file) if config_values is None else config_values
    by_set = {text.partition("=")[0].strip().split(".")[0] for text in getattr(args, "config_set", None) or []}
    given = vars(args)
    return {_flag(f): file_key(f) for f in dataclasses.fields(cls)
            if "help" in f.metadata and not f.metadata.get("scale") and file_key(f) in in_file
            and f.name not in given and file_key(f) not in by_set}


def set_settings(cls: Type[DataclassInstance], args: argparse.Namespace) -> Dict[str, str]:
    """{option: key as typed} of the settings of ``cls`` that a ``--set KEY=VALUE`` gives
    (``--set`` comes last of all: its value is the one the run takes). Only a whole setting
    (``--set batch_size=0``): a dotted one (``--set options.lstm.dim=0``) sets a part of it."""
    typed = {text.partition("=")[0].strip() for text in getattr(args, "config_set", None) or []}
    return {_flag(f): file_key(f) for f in dataclasses.fields(cls)
            if "help" in f.metadata and not f.metadata.get("scale") and file_key(f) in typed}


def _renamed_subject(message: str, spelled: Mapping[str, str]) -> str:
    """``message`` with the option that begins it (``--batch-size must ...``) replaced by its
    spelling in ``spelled`` ({option: as the user typed it}); else ``message`` as it is."""
    import re

    for flag, text in spelled.items():
        if re.match(rf"{re.escape(flag)}(?![\w-])", message):
            return f"{text}{message[len(flag):]}"
    return message


def in_config_terms(message: str, args: argparse.Namespace, settings: Mapping[str, str]) -> str:
    """An error ``message`` whose subject is an option (``--batch-size must be at least 1``),
    about a value that came from the ``--config`` file (``settings``, :func:`file_settings`),
    named as the file spells it: ``--config FILE: batch_size must be at least 1`` (the user
    typed no --batch-size). Any other message is returned as it is."""
    return _renamed_subject(message, {flag: f"--config {args.config_file}: {key}" for flag, key in settings.items()})


def in_typed_terms(cls: Type[DataclassInstance], message: str, args: argparse.Namespace,
                   config_values: Optional[Mapping[str, Any]] = None) -> str:
    """An error ``message`` whose subject is an option of ``cls`` (``--batch-size must be at
    least 1``) named as the user gave its value: ``--set batch_size must ...`` for a value
    that ``--set batch_size=0`` gave, ``--config FILE: batch_size must ...`` for the file's
    (:func:`in_config_terms`); an option typed, or any other message, is returned as it is.
    ``config_values``: the ``--config`` file's contents when read already."""
    spelled = {flag: f"--set {key}" for flag, key in set_settings(cls, args).items()}
    return in_config_terms(_renamed_subject(message, spelled), args, file_settings(cls, args, config_values))


def print_config_and_exit(cfg: Any, args: argparse.Namespace) -> bool:
    """With ``--print-config``: print ``cfg`` as JSON and return True (the command stops).
    A URL's password (or token) in it is printed as ``***``: a login belongs in ~/.netrc."""
    if getattr(args, "print_config", False):
        from .redact import redact_record
        json.dump(redact_record(to_dict(cfg))[0], sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
        return True
    return False
