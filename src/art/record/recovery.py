"""Completing a model's record from the checkpoints its service committed: no trained step goes unrecorded.

The service saves the groups a step trained on inside that step's checkpoint (`trained_groups.jsonl.gz`,
written before the checkpoint is committed); the record (`trajectories/train/{step:04d}.jsonl` and a
`history.jsonl` line) is written by `model.log` once training returns. If the process stopped in between,
`recover_unlogged_steps` (run when a trainable model registers) copies the groups of every committed step
without a `train/` (or `loss/`) history line into the record, skipping groups already there (same content, see
`storage.group_fingerprint`), and writes the missing history line from the groups and the metrics the
checkpoint's manifest holds (under the reference's names), marked `train/recovered = 1`. Every such step, not
only those after the newest logged one: a step whose log failed (a full disk) and was followed by steps that
logged is recovered too. `model.log` writes a step's groups before its history line, so a step with its history
line has its groups.
"""

from __future__ import annotations

import logging
from typing import Any

from art.metrics.builder import group_metrics
from art.metrics.taxonomy import reference_train_metrics, route_metric_key
from art.record.storage import ModelStorage, group_fingerprint, read_groups_file

logger = logging.getLogger("art")
SPLIT = "train"


def recover_unlogged_steps(storage: ModelStorage) -> list[int]:
    """Record the committed steps the record lacks; returns their steps (usually none).

    Example:
        recovered = recover_unlogged_steps(model.storage)  # [5] after a crash between step 5 and its log
    """
    history = storage.read_history()
    logged = {int(e["step"]) for e in history if any(k.startswith((f"{SPLIT}/", "loss/")) for k in e)}
    recovered: list[int] = []
    for step in storage.checkpoint_steps():
        source = storage.checkpoint_groups_path(step)
        if step in logged or not source.exists():  # recorded, or nothing trained (step 0, SFT)
            continue
        groups = read_groups_file(source)
        present = storage.group_fingerprints(SPLIT, step)
        missing = [g for g in groups if group_fingerprint(g) not in present]
        if missing:
            storage.append_groups(SPLIT, step, missing)
        manifest = storage.read_checkpoint_manifest(step)
        values = {**group_metrics(groups), **reference_train_metrics(manifest.get("metrics", {}), groups)}
        entry: dict[str, Any] = {route_metric_key(k, SPLIT): float(v) for k, v in values.items()}
        entry[f"{SPLIT}/recovered"] = 1.0
        entry["training_step"] = step
        storage.append_history(step, entry)
        recovered.append(step)
        logger.warning(
            "step %d of %s was trained and committed, but its record was not written (the process stopped, or "
            "the disk refused it): recorded it now from its checkpoint (%d group(s) added to %s, history line "
            "written)",
            step,
            storage.name,
            len(missing),
            storage.trajectories_path(SPLIT, step),
        )
    return recovered
