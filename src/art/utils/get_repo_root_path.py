"""`get_repo_root_path`: the git checkout ART itself lives in (the reference's helper, for its examples).

Found by walking up from this package's folder to one holding `.git`; "." when ART is installed as a
package (no checkout around it), as in the reference.
"""

from __future__ import annotations

from pathlib import Path


def get_repo_root_path() -> str:
    """The folder of the git checkout that holds the `art` package, or "." outside one.

    Example:
        >>> import os
        >>> os.path.isdir(get_repo_root_path())
        True
    """
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return str(folder)
    return "."
