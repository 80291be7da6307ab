"""Charts comparing models from `load_trajectories`' table, drawn with matplotlib (no seaborn).

`training_progress_chart`: a metric's mean per step, one line per model. `percentage_comparison_bar_chart`:
a bar per model, its first step's mean and (stacked, hatched) the change by its last step. Both return the
matplotlib Figure (shown inline by Jupyter; `fig.savefig("chart.png")` to keep it). Needs polars and
matplotlib: `pip install 'agent-reinforcement-trainer[benchmarking]'`.
"""

from art.utils.benchmarking.charts.percentage_comparison_bar_chart import percentage_comparison_bar_chart
from art.utils.benchmarking.charts.training_progress_chart import training_progress_chart

__all__ = ["percentage_comparison_bar_chart", "training_progress_chart"]
