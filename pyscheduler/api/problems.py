"""One base for an input that cannot be used: every problem found, one line each.

Configuration files, fragment resources, pod specs the scheduler cannot read, pods a cloud pool
cannot run, node pools: each is checked as a whole, and the error lists *every* problem (a user
fixes a file in one pass), each line naming the field when there is one
(``"<field path>: <what is wrong>"``). ``str()`` joins the lines with the class's ``separator``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

__all__ = ["InputError"]


class InputError(ValueError):
    """An input that cannot be used; ``problems`` holds one line per problem."""

    separator: ClassVar[str] = "; "

    def __init__(self, problems: Iterable[object]) -> None:
        self.problems: tuple[str, ...] = tuple(str(p) for p in problems)
        super().__init__(self.separator.join(self.problems))
