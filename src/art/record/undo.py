"""A failed registration leaves no record behind: what it created is removed, what it changed put back.

`Model.register` notes the record's state before it writes `model.json` and asks the backend to serve the
model; if either fails (a base model that cannot load, a full disk, a lock held elsewhere), `undo()`:

- a model folder that did not exist before is deleted, with the folders above it that the registration
  made (`{base_path}/{project}/models/`), when they are empty; unless another writer holds the record's
  lock by then (its record, not ours: left alone);
- in a model folder that existed, `model.json` is put back as it was (deleted if there was none).

So the next registration with a corrected base model starts clean, instead of meeting "already registered
with base_model=<the typo>".

Example:
    undo = RegistrationUndo(model.storage)
    try:
        ...  # write model.json, start the service
    except BaseException:
        undo.undo()
        raise
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from art.record.lock import RecordInUseError, RecordLock
from art.record.storage import ModelStorage


class RegistrationUndo:
    """The state of `storage`'s record before a registration, and how to return to it (module docstring)."""

    def __init__(self, storage: ModelStorage) -> None:
        self.storage = storage
        root = storage.root
        chain = [root, root.parent, root.parent.parent, storage.base_path]
        self.made = [folder for folder in chain if not folder.exists()]  # the folders it will create
        self._had_model_json = storage.model_json_path.exists()
        self._model_json_text = storage.model_json_path.read_text("utf-8") if self._had_model_json else None

    def undo(self) -> None:
        """Return the record to its state at construction (see the module docstring); never raises."""
        root = self.storage.root
        if root in self.made:
            if root.exists() and not self._remove_unused(root):
                return
            for folder in self.made[1:]:
                try:
                    folder.rmdir()  # only when empty: another model may have been made there meanwhile
                except OSError:
                    return
            return
        path = self.storage.model_json_path
        with contextlib.suppress(OSError):
            if self._model_json_text is None:
                path.unlink(missing_ok=True)
            elif path.read_text("utf-8") != self._model_json_text:
                tmp = path.with_name(f".{path.name}.undo-{os.getpid()}")
                tmp.write_text(self._model_json_text, "utf-8")
                os.replace(tmp, path)

    @staticmethod
    def _remove_unused(root: Path) -> bool:
        """Delete the model folder `root` unless another writer holds its lock; whether it was deleted."""
        lock = RecordLock(root, owner="undoing a failed registration")
        try:
            lock.acquire()
        except (RecordInUseError, OSError):
            return False
        try:
            shutil.rmtree(root, ignore_errors=True)
        finally:
            lock.release()
        return not root.exists()
