"""`art show PATH --step N`: one step's group in the terminal, as the trainer saw it.

Each trajectory: reward, advantage and what became of it, the judge's explanation, metrics, metadata, its
logs (a rollout's own words on how it ended), and the chat (each tool call with its arguments and id, each
result with the tool and call it answers); sampled turns say how many tokens were trained and their ratios, and
with `tokens=True` list every token with its sampled logprob, the trainer's logprob, the ratio and whether it
was trained. Reads the record only (`record.RecordReader`).
"""

from __future__ import annotations

from collections.abc import Callable

from art.record.step_record import JUDGE_EXPLANATION_PREFIX
from art.ui.conversation import TrajectoryView, Turn, view
from art.ui.pages import fixed, num
from art.ui.record import ModelRef, RecordReader

Echo = Callable[[str], None]


class ShowError(ValueError):
    """What the user asked for is not in the record: `problem` says what is, `where` the argument that asked
    (PATH, --name, --split, --step, --group) and `fix` what to pass instead."""

    def __init__(self, where: str, problem: str, fix: str) -> None:
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(f"{where}: {problem}; {fix}")


_RECORD_FIX = "pass a model's folder, or the folder your runs record into (.art by default)"


def _not_a_record(problem: str) -> ShowError:
    """The reader's sentence on a root that is not a record, its closing "(pass ...)" made the fix."""
    head, paren, hint = problem.rpartition(" (pass ")
    if paren and hint.endswith(")"):
        return ShowError("PATH", head, "pass " + hint[:-1])
    return ShowError("PATH", problem, _RECORD_FIX)


def find_model(reader: RecordReader, model: str | None) -> ModelRef:
    """The model at the reader's root: the only one, or the one named `project/name` (or `name`)."""
    models, problems = reader.models()
    if not models:
        raise _not_a_record(" and ".join(problems))
    if model is None:
        if len(models) == 1:
            return models[0]
        names = ", ".join(m.id for m in models)
        raise ShowError(
            "--name",
            f"{reader.root} holds {len(models)} models ({names})",
            "name one with --project PROJECT --name NAME",
        )
    matches = [m for m in models if model in (m.id, m.name)]
    if len(matches) != 1:
        names = ", ".join(m.id for m in models)
        raise ShowError(
            "--name", f"no single model {model!r} under {reader.root} (models: {names})", "name one of them"
        )
    return matches[0]


def _ratios(turn: Turn) -> str:
    trained = [t for t in turn.tokens if t.trained]
    if not turn.tokens:
        return ""
    if all(t.trained is None for t in turn.tokens):
        return f", {len(turn.tokens)} tokens (no trainer record)"
    ratios = [t.ratio for t in trained if t.ratio is not None]
    spread = f", ratio {fixed(min(ratios))}–{fixed(max(ratios))}" if ratios else ""
    return f", {len(turn.tokens)} tokens, {len(trained)} trained{spread}"


def _turn_lines(turn: Turn, tokens: bool) -> list[str]:
    who = turn.who(" ", answers="")
    if turn.sampled:
        who += f", sampled{_ratios(turn)}"
    lines = [f"    [{who}] " + turn.content.replace("\n", "\n      ")]
    for call in turn.tool_calls:
        lines.append(
            f"      -> {call.name}({' '.join(call.arguments.split())})"
            + (f"  [{call.id}]" if call.id else "")
        )
    if tokens and turn.tokens:
        lines.append("      token                 sampled   trainer   ratio     trained")
        for t in turn.tokens:
            mark = "-" if t.trained is None else ("yes" if t.trained else "no")
            lines.append(
                f"      {t.text!r:<21.21} {fixed(t.sampled_logprob):>9} {fixed(t.trainer_logprob):>9} "
                f"{fixed(t.ratio):>9} {mark:>7}"
            )
    return lines


def trajectory_lines(index: int, v: TrajectoryView, tokens: bool) -> list[str]:
    """The lines of one trajectory."""
    adv = "not recorded" if v.advantage is None else f"{v.advantage:+.4f}"
    lines = [f"#{index}  reward {fixed(v.reward)}  advantage {adv}" + (f"  ({v.status})" if v.status else "")]
    if v.explanation:
        lines.append("    judge: " + v.explanation.replace("\n", "\n           "))
    if v.metrics:
        lines.append(
            "    metrics: "
            + ", ".join(f"{k}={num(x, 4) if isinstance(x, int | float) else x}" for k, x in v.metrics.items())
        )
    if v.metadata:
        lines.append("    metadata: " + ", ".join(f"{k}={x}" for k, x in v.metadata.items()))
    lines += [f"    log: {line}" for line in v.logs if not line.startswith(JUDGE_EXPLANATION_PREFIX)]
    for h, history in enumerate(v.histories):
        if h:
            lines.append(f"    (additional history {h})")
        for turn in history:
            lines += _turn_lines(turn, tokens)
    return lines


def show(
    path: str,
    step: int,
    *,
    split: str = "train",
    group: int = 0,
    model: str | None = None,
    tokens: bool = False,
    echo: Echo = print,
    warn: Echo = print,
) -> None:
    """Print group `group` of `split` at `step` of the model under `path` (see module docstring)."""
    reader = RecordReader(path)
    ref = find_model(reader, model)
    splits = reader.splits(ref)
    if split not in splits:
        have = ", ".join(splits) or "none"
        raise ShowError(
            "--split", f"{ref.id} has no {split} trajectories (splits: {have})", "pass one of them"
        )
    steps = reader.steps(ref, split)
    if step not in steps:
        have = ", ".join(map(str, steps[-20:])) or "none"
        raise ShowError(
            "--step",
            f"{ref.id} has no {split} trajectories at step {step} (steps with some: {have})",
            "pass one of them" if steps else "pass another --split",
        )
    data = reader.step(ref, split, step)
    for problem in data.problems:
        warn(f"art show: could not read everything: {problem}")
    if not 0 <= group < len(data.groups):
        fix = f"pass 0..{len(data.groups) - 1}" if data.groups else "pass another --step"
        raise ShowError("--group", f"step {step} of {split} has {len(data.groups)} group(s)", fix)
    trained = data.trained_group(group)
    members = data.groups[group]["trajectories"]
    header = (
        f"{ref.id} · {split} step {step} · group {group} of {len(data.groups)} ({len(members)} trajectories)"
    )
    if data.records:
        stats = data.records[-1].token_stats
        header += (
            f" · trainer: {'updated' if data.records[-1].updated else 'no update'}, {stats.trained_tokens} trained "
            f"tokens in the step, ratio mean {fixed(stats.ratio_mean)}"
        )
    elif split == "train":
        header += " · no trainer record for this step (advantages not recorded)"
    echo(header)
    for ti, t in enumerate(members):
        record = trained.trajectories[ti] if trained and ti < len(trained.trajectories) else None
        echo("\n".join(trajectory_lines(ti, view(t, record, tokens=True), tokens)))
