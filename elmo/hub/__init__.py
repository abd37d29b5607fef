"""Published models by name or URL: the model table, the download cache and the resolver.

    elmo.from_pretrained("small")                         # a name from elmo.hub.registry.MODELS
    elmo.from_pretrained("https://.../elmo_x_options.json")
    elmo.Elmo(options_url, weights_url, 1)                # URLs wherever a path is taken

Files are cached under ``$ELMO_HOME`` (default ``$XDG_CACHE_HOME/elmo``, else ``~/.cache/elmo``);
``ELMO_OFFLINE=1`` uses the cache only. See :mod:`elmo.hub.download` for how a download is made safe.
"""
from .archive import ArchiveError
from .cache_paths import elmo_home
from .errors import DownloadError
from .registry import MODELS, PretrainedModel
from .resolve import Local, is_cached, resolve
from .urls import is_url

__all__ = ["ArchiveError", "DownloadError", "Local", "MODELS", "PretrainedModel", "elmo_home",
           "is_cached", "is_url", "resolve"]
