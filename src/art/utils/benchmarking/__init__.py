"""Compare models from their logged trajectories: tables (polars) and charts (matplotlib).

Under the reference ART's module paths, each imported by its own path:

- `art.utils.benchmarking.types.BenchmarkModelKey`: a model, the split to read and the name to show;
- `art.utils.benchmarking.load_trajectories.load_trajectories`: every logged trajectory of a project as a
  polars DataFrame, one row each;
- `art.utils.benchmarking.filter_model_split.filter_rename_model_split`: keep and rename model/split rows;
- `art.utils.benchmarking.aggregate_trajectories` (`load_aggregated_trajectories`, `load_latest_metrics`):
  metrics averaged per step;
- `art.utils.benchmarking.charts` (`training_progress_chart`, `percentage_comparison_bar_chart`);
- `art.utils.benchmarking.log_constant_metrics_wandb`, `art.utils.benchmarking.pull_model_trajectories`.

The tables and charts need polars and matplotlib: `pip install 'agent-reinforcement-trainer[benchmarking]'`.
See docs/benchmarking.md.
"""
