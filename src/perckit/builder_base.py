"""What every perckit builder shares: the cache fingerprint and the ``repo_id`` option."""

from __future__ import annotations

from typing import Any

import datasets

from .versioning import core_fingerprint


class PerckitBuilder(datasets.GeneratorBasedBuilder):
    """Base of the perckit builders.

    - The cache key of a builder script covers the script only: fold in the core package's sources.
    - ``repo_id=...`` names the release's Hub repository. ``datasets.DatasetBuilder`` takes an
      argument of that name with another meaning, so it is stored as the config field ``hub_repo_id``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["hash"] = core_fingerprint(kwargs.get("hash"))
        repo_id = kwargs.pop("repo_id", None)
        if repo_id is not None:
            kwargs["hub_repo_id"] = repo_id
        super().__init__(*args, **kwargs)
