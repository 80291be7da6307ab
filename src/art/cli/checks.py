"""What every `art` command shares: the one-line answer to a bad argument, and the checks that find it.

A user's mistake is one line on stderr, exit code 2, before anything slow starts (a model load, a
server, a download):

    art <command>: <--flag or ARGUMENT>: <what is wrong>; <what to do>

`CLIError` carries the three parts; it is click's usage error underneath, so a command run by click
directly (typer's test runner) exits 2 with the same text. `art.cli.main` prints it with the command's
name. The checks (`at_least`, `positive`, `fraction`, `one_of`, `port`, `record_name`, `base_model`,
`existing_file`, `folder_or_new`, `from_validation_error`, `deprecated_alias`) raise it; commands call them
on every argument first, then load, inside `registration_errors` (a model the record or the base model
refuses, named by its flag). Every command's module (`art.cli.<command>`) uses only these.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

# The click that typer runs on (typer >= 0.2x vendors its own copy): its usage-error class, found from an
# exception typer exports, so this works whichever click is underneath.
UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")

# Options several commands take alike, one help text each (the default stays with each command).
BaseModelOption = Annotated[
    str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
]
BasePathOption = Annotated[str, typer.Option(help="Where the record is kept.")]


class CLIError(UsageError):  # type: ignore[valid-type,misc]
    """A mistake of the user's in argument `where`: `problem`, and `fix`, what to do about it.

    Example:
        >>> CLIError("--steps", "-3 is not a number of steps", "give 1 or more").line("demo")
        'art demo: --steps: -3 is not a number of steps; give 1 or more'
    """

    exit_code = 2

    def __init__(self, where: str, problem: str, fix: str = "") -> None:
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(self.text())

    def text(self) -> str:
        """`where: problem; fix` (without the command)."""
        head = f"{self.where}: {self.problem}" if self.where else self.problem
        return f"{head}; {self.fix}" if self.fix else head

    def line(self, command: str) -> str:
        """The whole line: `art <command>: ...`."""
        return f"art {command}: {self.text()}" if command else f"art: {self.text()}"

    def format_message(self) -> str:  # what click prints when it runs a command itself
        return self.text()


def at_least(flag: str, value: float | None, low: float, what: str) -> None:
    """Refuse `value` < `low` (None passes: the default applies). `what` names the quantity.

    Example:
        >>> at_least("--steps", 8, 1, "training steps")
    """
    if value is not None and not value >= low:
        shown = int(low) if float(low).is_integer() else low
        raise CLIError(flag, f"{value} is too small for {what}", f"give {shown} or more")


def positive(flag: str, value: float | None, what: str, example: str) -> None:
    """Refuse a `value` that is not a finite number > 0 (None passes). `example`: a sensible value.

    Example:
        >>> positive("--learning-rate", 1e-4, "a learning rate", "1e-4")
    """
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise CLIError(flag, f"{value} is not {what}", f"give a number > 0, e.g. {example}")


def fraction(flag: str, value: float | None, what: str) -> None:
    """Refuse a `value` outside [0, 1) (None passes).

    Example:
        >>> fraction("--warmup-ratio", 0.1, "a fraction of the batches")
    """
    if value is not None and not 0 <= value < 1:
        raise CLIError(flag, f"{value} is not {what}", "give a number from 0 up to (not including) 1")


def one_of(flag: str, value: str, choices: Iterable[str]) -> None:
    """Refuse a `value` not among `choices`.

    Example:
        >>> one_of("--engine", "torch", ("torch", "vllm"))
    """
    options = list(choices)
    if value not in options:
        raise CLIError(flag, f"{value!r} is not one of {', '.join(options)}", "give one of them")


def port(flag: str, value: int, *, any_free: bool = False) -> None:
    """Refuse a TCP port outside 1-65535 (or 0-65535 with `any_free`: 0 asks the system for a free port).

    Example:
        >>> port("--port", 7999)
        >>> port("--port", 0, any_free=True)
    """
    lowest = 0 if any_free else 1
    if not lowest <= value <= 65535:
        fix = f"give a number from {lowest} to 65535, e.g. 7999" + (" (0: any free port)" if any_free else "")
        raise CLIError(flag, f"{value} is not a TCP port", fix)


def record_name(flag: str, value: str) -> None:
    """Refuse a model or project name that cannot be a folder of the record (letters, digits, . _ -).

    Example:
        >>> record_name("--name", "agent-001")
    """
    from art.record.storage import validate_name

    try:
        validate_name(value, "the name")
    except ValueError as exc:
        problem, _, fix = str(exc).partition(": ")
        raise CLIError(flag, problem, fix or "use another name") from None


def base_model(flag: str, value: str, *, here: bool = True) -> None:
    """Refuse a base model that cannot load here (`art.base_model.check`): a folder that does not exist, an
    unknown short name, a Hugging Face id neither cached nor downloadable, the default's short name without
    its package. With `here=False` (it loads on another machine: `--remote`) only an empty one is refused.

    Example:
        >>> base_model("--base-model", "smollm2-135m", here=False)
    """
    if not value.strip():
        raise CLIError(flag, "the base model is empty", "give a short name, a Hugging Face id or a folder")
    if not here:
        return
    from art.base_model.check import check_base_model_available
    from art.common.errors import BaseModelNotFoundError

    try:
        check_base_model_available(value)
    except BaseModelNotFoundError as exc:
        raise CLIError(flag, f"{value}: {exc.problem}", exc.fix) from None


def deprecated_alias(command: str, old: str, new: str, given: str | None, value: str, default: str) -> str:
    """The value of option `new` when an old script passed it as `old` (a hidden option kept so that it does
    not break): says once on stderr to use `new`; both given with different values is a CLIError.

    Example:
        deprecated_alias("demo", "--model", "--base-model", None, "smollm2-135m", "smollm2-135m")  # unchanged
    """
    if given is None:
        return value
    if value != default and value != given:
        raise CLIError(
            old, f"{old} {given} and {new} {value} disagree", f"give {new} only ({old} is its old name)"
        )
    typer.echo(f"art {command}: {old} is deprecated, use {new} {given} (the same option)", err=True)
    return given


@contextlib.contextmanager
def registration_errors(name: str = "--name", base: str = "--base-model") -> Iterator[None]:
    """Inside it, a model that cannot be registered is a CLIError naming the flag to change: a record kept for
    another base model (`ModelAlreadyRegisteredError`: `name`), a base model that is not there to load
    (`BaseModelNotFoundError`, or `art serve`'s 422 for it: `base`).

    Example:
        with registration_errors():
            asyncio.run(run_demo(config))
    """
    from art.common.errors import BaseModelNotFoundError, ModelAlreadyRegisteredError

    try:
        yield
    except ModelAlreadyRegisteredError as exc:
        raise CLIError(
            name,
            f"{exc.project}/{exc.name} is already registered in {exc.record} with {exc.field} "
            f"{exc.recorded!r}, not {exc.given!r} (nothing was changed)",
            f"give another {name} for a new model"
            + (f", or {base} {exc.recorded} to continue this one" if exc.field == "base_model" else ""),
        ) from None
    except BaseModelNotFoundError as exc:
        raise CLIError(base, f"{exc.base_model}: {exc.problem}", exc.fix) from None
    except Exception as exc:  # `RemoteBackend`: the server refused the base model (422)
        if getattr(exc, "param", None) != "base_model" or getattr(exc, "status", None) != 422:
            raise
        problem, _, fix = str(exc).partition("; ")
        raise CLIError(base, problem, fix or "give another base model") from None


def existing_file(where: str, value: str | os.PathLike[str], what: str) -> None:
    """Refuse a path that is not a readable file.

    Example:
        existing_file("FILE", "data/train.jsonl", "a JSONL file of conversations")
    """
    path = Path(value)
    if not path.exists():
        raise CLIError(where, f"no file {path}", f"give {what}")
    if not path.is_file():
        raise CLIError(where, f"{path} is not a file", f"give {what}")


def folder_or_new(flag: str, value: str | os.PathLike[str]) -> None:
    """Refuse a path that exists as something other than a folder (a folder is made there otherwise).

    Example:
        >>> folder_or_new("--base-path", ".art")
    """
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise CLIError(flag, f"{path} is a file", "give a folder (it is made if it does not exist)")


def from_validation_error(exc: Any, flags: Mapping[str, str]) -> CLIError:
    """The CLIError of a pydantic ValidationError's first error, its field named by `flags` (field -> flag;
    other fields become `--field-name`).

    Example:
        from_validation_error(exc, {"num_training_inputs": "--num-train"})  # CLIError("--num-train", ...)
    """
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first.get("loc") else ""
    where = flags.get(field, "--" + field.replace("_", "-") if field else "")
    ctx = first.get("ctx") or {}
    value = first.get("input")
    fixes = {
        "greater_than_equal": f"give {ctx.get('ge')} or more",
        "greater_than": f"give a number > {ctx.get('gt')}",
        "less_than_equal": f"give {ctx.get('le')} or less",
        "less_than": f"give a number < {ctx.get('lt')}",
        "literal_error": f"give one of {ctx.get('expected')}",
    }
    fix = fixes.get(str(first.get("type")), "see the command's --help for what it accepts")
    message = str(first["msg"]).removeprefix("Value error, ")
    return CLIError(where, f"{value!r} is not allowed ({message[:1].lower()}{message[1:]})", fix)


def short_number(value: float) -> str:
    """A default as a person writes it in help and errors: 1e-4, not 0.0001.

    Example:
        >>> short_number(2e-4)
        '2e-4'
    """
    return f"{value:.0e}".replace("e-0", "e-").replace("e+00", "")
