"""What a running `PipelineTrainer` shows: a tqdm bar over scenarios, and a status line now and then.

The bar's description is a condensed live view (step, rollouts in flight, queued groups, discarded groups,
smoothed train reward, last validation reward); every `log_interval_seconds` the full status is written
above the bar as one line:

    [status] scenarios[done=40 in_flight=4/4 queued=2 stale=0 zero_var=3 errors=0] train[step=7
    reward=0.412 step_seconds=12.30] val[step=5 reward=0.500 running=no]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from tqdm import tqdm

from art.trajectories import TrajectoryGroup


def _fmt(value: float | int | None, decimals: int = 3) -> str:
    if value is None:
        return "n/a"
    return str(value) if isinstance(value, int) else f"{value:.{decimals}f}"


class StatusReporter:
    """Counts what the pipeline's stages do and shows it (the reference's class, our own output)."""

    def __init__(
        self,
        *,
        get_scenario_offset: Callable[[], int],
        log_interval_seconds: float = 60.0,
        status_ewa_alpha: float = 0.2,
        total_scenarios: int | None = None,
        num_workers: int = 1,
        show_progress: bool = True,
    ) -> None:
        if not 0.0 < status_ewa_alpha <= 1.0:
            raise ValueError(f"status_ewa_alpha must be in (0, 1], got {status_ewa_alpha}")
        self._scenario_offset = get_scenario_offset
        self.log_interval_seconds = log_interval_seconds
        self.alpha = status_ewa_alpha
        self.total_scenarios = total_scenarios
        self.num_workers = num_workers
        self.show_progress = show_progress
        self.step: int | None = None
        self.in_flight = 0
        self.queued = 0
        self.errors = 0
        self.stale = 0
        self.zero_variance = 0
        self.training_groups: int | None = None
        self.train_reward: float | None = None
        self.step_seconds: float | None = None
        self.val_step: int | None = None
        self.val_reward: float | None = None
        self.val_running: int | None = None
        self._bar: tqdm[None] | None = None
        self._last_log = time.monotonic()

    def _smooth(self, previous: float | None, value: float) -> float:
        return value if previous is None else self.alpha * value + (1 - self.alpha) * previous

    def start(self, *, initial_step: int | None = None) -> None:
        """Open the bar (at the scenarios already consumed, when resuming)."""
        self.step = initial_step
        self._last_log = time.monotonic()
        if self.show_progress and self._bar is None:
            self._bar = tqdm(
                total=self.total_scenarios,
                initial=self._scenario_offset(),
                unit="scenario",
                dynamic_ncols=True,
            )
            self._refresh()

    def close(self) -> None:
        """Close the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def flush(self) -> None:
        """Write the full status line now."""
        self.log_if_due(force=True)

    def log_if_due(self, *, force: bool = False) -> None:
        """Write the full status line if `log_interval_seconds` have passed since the last one."""
        now = time.monotonic()
        if force or now - self._last_log >= self.log_interval_seconds:
            self._last_log = now
            self.write(self.status_line())

    # ---- events from the stages ---------------------------------------------------------------
    def note_rollout_started(self) -> None:
        self.in_flight += 1
        self._refresh()

    def note_rollout_finished(self, *, errored: bool) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self.errors += int(errored)
        if self._bar is not None:
            self._bar.update(1)
        self._refresh()

    def note_group_enqueued(self, _group: TrajectoryGroup) -> None:
        self.queued += 1

    def note_group_dequeued(self, _group: TrajectoryGroup) -> None:
        self.queued = max(0, self.queued - 1)

    def note_stale(self, count: int) -> None:
        self.stale += count
        self._refresh()

    def note_zero_variance_discarded(self, count: int) -> None:
        self.zero_variance += count

    def note_training_start(self, group_count: int) -> None:
        self.training_groups = group_count
        self._refresh()

    def note_training_end(self) -> None:
        self.training_groups = None
        self._refresh()

    def note_training_batch(self, batch: list[TrajectoryGroup], *, step: int, step_seconds: float) -> None:
        """A step trained on `batch`: update the smoothed reward and step time."""
        self.step = step
        rewards = [t.reward for g in batch for t in g.trajectories]
        if rewards:
            self.train_reward = self._smooth(self.train_reward, statistics.fmean(rewards))
        self.step_seconds = self._smooth(self.step_seconds, step_seconds)
        self._refresh()

    def note_val_started(self, step: int) -> None:
        self.val_running = step
        self._refresh()

    def note_val_finished(self, step: int, reward: float | None) -> None:
        self.val_running = None
        self.val_step = step
        if reward is not None:
            self.val_reward = reward
        self._refresh()

    # ---- output -------------------------------------------------------------------------------
    def status_line(self) -> str:
        """The full status as one line."""
        scenarios = (
            f"done={self._scenario_offset()}"
            + (f"/{self.total_scenarios}" if self.total_scenarios is not None else "")
            + f" in_flight={self.in_flight}/{self.num_workers} queued={self.queued} stale={self.stale}"
            f" zero_var={self.zero_variance} errors={self.errors}"
        )
        train = f"step={_fmt(self.step)} reward={_fmt(self.train_reward)} step_seconds={_fmt(self.step_seconds, 2)}"
        if self.training_groups is not None:
            train += f" training_on={self.training_groups}_groups"
        running = "no" if self.val_running is None else f"step_{self.val_running}"
        val = f"step={_fmt(self.val_step)} reward={_fmt(self.val_reward)} running={running}"
        return f"[status] scenarios[{scenarios}] train[{train}] val[{val}]"

    def _refresh(self) -> None:
        if self._bar is None:
            return
        parts = [f"step {_fmt(self.step)}", f"{self.in_flight} rolling", f"{self.queued} queued"]
        if self.training_groups is not None:
            parts.append(f"training on {self.training_groups} groups")
        if self.train_reward is not None:
            parts.append(f"reward {self.train_reward:.3f}")
        if self.val_reward is not None:
            parts.append(f"val {self.val_reward:.3f}")
        self._bar.set_description_str(" | ".join(parts), refresh=False)
        self._bar.refresh()

    def write(self, line: str) -> None:
        """Print `line` above the bar (or plainly, without one)."""
        if self._bar is not None:
            self._bar.write(line)
        else:
            print(line)


__all__ = ["StatusReporter"]
