"""``elmo models``: the published models by name.

    elmo models list              the table (size, dimensions, language, data, licence), cached ones marked
    elmo models get NAME [NAME]   download and verify (idempotent; resumes a cut download)
    elmo models path NAME         the local folder of a model (downloading it if needed)
"""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "models", help="list and download the published ELMo models",
        description="The published ELMo models (AllenNLP's English models, contributed models and "
                    "HIT-SCIR's ELMoForManyLangs) by name. Files are cached in $ELMO_HOME "
                    "(default $XDG_CACHE_HOME/elmo, else ~/.cache/elmo); ELMO_OFFLINE=1 uses the "
                    "cache only. Any command that takes a model also takes these names or an "
                    "http(s) URL.")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    q = sub.add_parser("list", help="the table of published models, cached ones marked",
                       description="Print every published model: size, dimensions, language, "
                                   "training data, licence, and whether it is in the cache "
                                   "(yes, no, or damaged: a cached file truncated or empty).")
    q.add_argument("--urls", action="store_true", help="print each model's URLs too")
    q.set_defaults(func=models_list)

    q = sub.add_parser("get", help="download and verify models",
                       description="Download models into the cache and verify them (the weight "
                                   "file's shapes against its options; archives unpacked safely).")
    q.add_argument("names", nargs="+", metavar="NAME", help="model names (see `elmo models list`)")
    q.set_defaults(func=models_get)

    q = sub.add_parser("path", help="print the local folder of a model",
                       description="Print the folder of a published model (downloading it first "
                                   "if needed), for tools that take a model folder.")
    q.add_argument("name", metavar="NAME", help="a model name (see `elmo models list`)")
    q.set_defaults(func=models_path)



def _size(m) -> str:
    if m.size_mb is None:
        return "?"
    return f"~{m.size_mb:,.0f}" if m.size_estimated else f"{m.size_mb:,.0f}"


def _dims(m) -> str:
    if m.output_dim is None:
        return "?"
    return f"{m.output_dim} ({m.n_layers or '?'}x{m.lstm_dim or '?'}/{m.projection_dim or '?'})"


def models_list(args: argparse.Namespace) -> int:
    from ..hub.cache_paths import elmo_home
    from ..hub.registry import MODELS
    from ..hub.resolve import cache_state

    print(f"cache: {elmo_home() / 'models'}")
    print(f"{'name':<18} {'cached':<7} {'format':<16} {'MB':>6}  {'dims':<18} language")
    for m in MODELS.values():
        print(f"{m.name:<18} {cache_state(m):<7} {m.format:<16} {_size(m):>6}  "
              f"{_dims(m):<18} {m.language}")
        if args.urls:
            for key, url in m.urls.items():
                print(f"{'':<18} {key}: {url}")
    print("MB: download size (~ computed from the dimensions, ? not known); dims: output width "
          "(layers x LSTM cells / projection); cached damaged: a cached file is truncated or empty, "
          "and `elmo models get NAME` (or the next load) downloads it again")
    # (a newcomer looks here for the names a model argument takes; these two are always there)
    from .. import BUNDLED_MODELS
    bundled = ", ".join(f"{name} ({_BUNDLED_ABOUT.get(name, 'bundled')})" for name in BUNDLED_MODELS)
    print(f"bundled with the package, no download: {bundled}")
    # Training data and licence, once per group of models that share them.
    groups: dict = {}
    for m in MODELS.values():
        groups.setdefault((m.training_data.replace(" (Wikipedia)", ""), m.licence), []).append(m.name)
    print("\ntraining data; licence:")
    for (data, licence), names in groups.items():
        print(f"  {_names(names)}: {data}; licence: {licence}")
    return 0


_BUNDLED_ABOUT = {"default": "a small English biLM, used when no model is named",
                  "fixture": "untrained test weights, for checking code only"}


def _names(names) -> str:
    many = [n for n in names if n.startswith("manylangs-")]
    if len(many) > 3:
        rest = [n for n in names if n not in many]
        return ", ".join(rest + [f"manylangs-* ({len(many)} languages)"])
    return ", ".join(names)


def models_get(args: argparse.Namespace) -> int:
    from ..hub.registry import get
    from ..hub.resolve import fetch_model

    entries = [get(name) for name in args.names]     # every name checked before any download
    for entry in entries:
        local = fetch_model(entry)
        if local.folder is not None:
            where = str(local.folder)
        else:
            assert local.weights is not None    # fetch_model gives a folder or both files
            where = f"{local.options} + {local.weights.name}"
        print(f"{entry.name}: {where}")
    return 0


def models_path(args: argparse.Namespace) -> int:
    import elmo

    print(elmo.model_path(args.name))
    return 0
