"""`BenchmarkModelKey`: one model of a comparison, the split its rows come from and its name on charts."""

from __future__ import annotations


class BenchmarkModelKey:
    """A model to compare: its `name` on disk, the `display_name` charts show, and the `split` to read.

    `display_name` defaults to `name` and `split` to "val"; `str(key)` is the display name.

    Example:
        >>> key = BenchmarkModelKey("agent-001", "Trained agent")
        >>> (key.name, key.display_name, key.split, str(key))
        ('agent-001', 'Trained agent', 'val', 'Trained agent')
        >>> BenchmarkModelKey("gpt-4o", split="test").display_name
        'gpt-4o'
    """

    name: str
    display_name: str
    split: str

    def __init__(self, name: str, display_name: str | None = None, split: str | None = None) -> None:
        self.name = name
        self.display_name = display_name or name
        self.split = split or "val"

    def __str__(self) -> str:
        return self.display_name

    def __repr__(self) -> str:
        return f"BenchmarkModelKey({self.name!r}, {self.display_name!r}, {self.split!r})"


__all__ = ["BenchmarkModelKey"]
