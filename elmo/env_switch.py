"""On/off environment variables (``ELMO_OFFLINE``, ``ELMO_DEBUG``): the one reading of their values.

``1``, ``true``, ``yes``, ``on`` turn one on; ``0``, ``false``, ``no``, ``off`` or unset (or empty)
leave it off; case and spaces around the value do not count. Any other value is a ValueError naming
the variable: ``ELMO_OFFLINE=off`` was read as on (anything but ``""``/``0``/``false``/``no``),
and ``ELMO_DEBUG=false`` too (anything but ``""``/``0``).

This module imports nothing of the package: :mod:`elmo.hub.cache_entry`, which a process may load
alone by its path to fetch a file, loads it beside itself.
"""
from __future__ import annotations

import os

#: The values that turn a switch on, and those that leave it off (after ``strip().lower()``).
ON = ("1", "true", "yes", "on")
OFF = ("", "0", "false", "no", "off")


def env_switch(name: str) -> bool:
    """Whether the environment variable ``name`` is switched on (see the module docstring)."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    raise ValueError(f"{name}={raw!r} in the environment: expected {', '.join(ON)} to switch it on, "
                     f"or {', '.join(o for o in OFF if o)} (or unset) to leave it off")
