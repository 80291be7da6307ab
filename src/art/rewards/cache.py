"""An on-disk cache of judge answers: scoring the same thing twice costs nothing the second time.

One entry is one validated judgement (one request's answer). Its key is the sha256 of a canonical JSON of
the judge's identity (model, endpoint, request parameters; never the API key) and the exact prompt it was
sent, which itself holds the rubric, the tools, the trajectories and the order they were shown in. So a
new rubric, judge, order or any changed message is a new key, and a re-run of the same scoring makes no
request. Entries are written atomically as soon as an answer validates, so an interrupted run keeps
everything already scored.

Location: `JudgeCache(directory)`, else `$ART_JUDGE_CACHE_DIR`, else `judge` in ART's cache folder (`$ART_CACHE_DIR`,
else `$XDG_CACHE_HOME/art`, else `~/.cache/art`). Delete the folder to clear it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, TypeAlias

from art.common.env import cache_dir
from art.common.env import read as read_env

logger = logging.getLogger("art.rewards")


def default_cache_dir() -> Path:
    """`$ART_JUDGE_CACHE_DIR`, else `judge` in ART's cache folder (`$ART_CACHE_DIR`, else
    `$XDG_CACHE_HOME/art`, else `~/.cache/art`).

    Example:
        print(default_cache_dir())  # e.g. /home/me/.cache/art/judge
    """
    explicit = read_env("ART_JUDGE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return cache_dir() / "judge"


def canonical_json(value: Any) -> str:
    """A stable text for hashing: sorted keys, no whitespace, unicode kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def cache_key(value: Any) -> str:
    """sha256 (hex) of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


class JudgeCache:
    """A folder of JSON files, one per judgement, named by key (`ab/abcdef....json`).

    Example:
        cache = JudgeCache("/data/judge-cache")
        group = await ruler_score_group(group, "openai/o4-mini", cache=cache)
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.directory)!r})"

    def path(self, key: str) -> Path:
        """Where the entry of `key` lives."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry, or None when absent or unreadable (a damaged entry counts as a miss)."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.misses += 1
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            logger.warning("judge cache entry %s is damaged; ignoring it (it will be rewritten)", path)
            self.misses += 1
            return None
        if not isinstance(value, dict):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store an entry atomically (temp file in the same folder, then rename)."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(value, ensure_ascii=False, indent=1))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


CacheSetting: TypeAlias = bool | str | os.PathLike[str] | JudgeCache | None
"""What `cache=` accepts: True (default folder), False/None (off), a folder, or a JudgeCache."""


def resolve_cache(setting: CacheSetting) -> JudgeCache | None:
    """True: the default folder; False/None: no cache; a path: that folder; a JudgeCache: itself."""
    if setting is None or setting is False:
        return None
    if setting is True:
        return JudgeCache()
    if isinstance(setting, JudgeCache):
        return setting
    if isinstance(setting, str | os.PathLike):
        return JudgeCache(setting)
    raise TypeError(
        f"cache must be True, False, a folder path or an art.rewards.JudgeCache, got {type(setting).__name__}"
    )
