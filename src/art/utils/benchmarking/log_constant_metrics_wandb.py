"""`log_constant_metrics_wandb`: a baseline's fixed scores as flat lines on a W&B run's charts."""

from __future__ import annotations

from art.model import Model


async def log_constant_metrics_wandb(
    model: Model,
    num_steps: int,
    split_metrics: dict[str, dict[str, float]],
    logged_run_name: str | None = None,
) -> None:
    """Log the same metrics at every step 0..`num_steps` of a new W&B run, so a baseline (a prompted model
    evaluated once) shows as a horizontal line beside trained models' curves.

    The run is in `model.project`, named `logged_run_name` or `model.name`; each metric is logged as
    `{split}/{name}`. Needs wandb (`pip install 'agent-reinforcement-trainer[wandb]'`) and its usual
    settings (`WANDB_API_KEY`, or `WANDB_MODE=offline`).

    Example:
        baseline = art.Model(name="gpt-4o", project="tic-tac-toe")
        await log_constant_metrics_wandb(baseline, num_steps=50, split_metrics={"val": {"win": 0.62}})
    """
    try:
        import wandb
    except ImportError:
        raise ImportError(
            "log_constant_metrics_wandb needs wandb: pip install 'agent-reinforcement-trainer[wandb]'"
        ) from None
    run = wandb.init(project=model.project, name=logged_run_name or model.name, reinit="create_new")
    values = {
        f"{split}/{key}": value for split, metrics in split_metrics.items() for key, value in metrics.items()
    }
    try:
        for step in range(num_steps + 1):
            run.log(values, step=step)
    finally:
        run.finish()


__all__ = ["log_constant_metrics_wandb"]
