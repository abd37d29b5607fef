"""Subcommands of the ``elmo`` CLI, grouped by the library area they drive (see elmo/cli.py)."""
