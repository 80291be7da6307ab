"""AutoRL's data, written by a generator LLM from the task description alone: inputs and a system prompt.

Names after the reference's AutoRL notebook: `TrainingInput`, `TrainingDataset`,
`generate_training_inputs`, `generate_system_prompt`. Both ask for structured output and validate it
(`art.recipes.ruler_loop.generate_structured`): a short or malformed answer is asked again, then refused quoting it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, ValidationError

from art.recipes.ruler_loop.structured import generate_structured, json_schema_format, load_json
from art.rewards.judge import InvalidAnswer, Judge

MIN_SYSTEM_PROMPT_CHARS = 20


class TrainingInput(BaseModel):
    """One input a user might give the model for the task.

    Example:
        >>> TrainingInput(input="their going to the park").input
        'their going to the park'
    """

    input: str = Field(min_length=1, description="The input text for the task")


class TrainingDataset(BaseModel):
    """The generator's answer: a list of inputs.

    Example:
        >>> TrainingDataset.model_validate_json('{"inputs": [{"input": "helo wrld"}]}').inputs[0].input
        'helo wrld'
    """

    inputs: list[TrainingInput] = Field(description="List of training inputs")


class SystemPromptAnswer(BaseModel):
    """The generator's answer when drafting the system prompt."""

    system_prompt: str


INPUTS_PROMPT = """\
You write training inputs for a language model that is being taught this task:

{task}

Write {n} different INPUTS that a user could give the model for this task (only the inputs, never the \
outputs: the model's answers are judged automatically). Make them:
1. cover a wide range of cases, including edge cases;
2. realistic and practical;
3. varied in length and complexity;
4. all different from each other.

Answer with one JSON object and nothing else: {{"inputs": [{{"input": "..."}}, ...]}} with exactly {n} entries."""

SYSTEM_PROMPT_PROMPT = """\
Write a clear, concise system prompt for a language model that will perform this task:

{task}

The prompt must be direct and instructional, addressed to the model, and say what a good answer looks \
like. Answer with one JSON object and nothing else: {{"system_prompt": "..."}}"""


def parse_inputs(answer: str | None, num_examples: int) -> list[str]:
    """The first `num_examples` distinct non-blank inputs of an answer; InvalidAnswer if there are fewer."""
    data = load_json(answer)
    if isinstance(data, list):
        data = {"inputs": data}
    if isinstance(data, dict) and isinstance(data.get("inputs"), list):  # bare strings are fine too
        data["inputs"] = [{"input": x} if isinstance(x, str) else x for x in data["inputs"]]
    try:
        dataset = TrainingDataset.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:8]]
        raise InvalidAnswer(['the answer is not {"inputs": [{"input": "..."}]}', *problems]) from None
    inputs: list[str] = []
    seen: set[str] = set()
    for item in dataset.inputs:
        key = " ".join(item.input.lower().split())
        if key and key not in seen:
            seen.add(key)
            inputs.append(item.input.strip())
    if len(inputs) < num_examples:
        repeated = len(dataset.inputs) - len(inputs)
        raise InvalidAnswer(
            [f"got {len(inputs)} distinct non-blank inputs, need {num_examples}"]
            + ([f"{repeated} were blank or repeated an earlier one"] if repeated else [])
        )
    return inputs[:num_examples]


def parse_system_prompt(answer: str | None) -> str:
    """The system prompt of an answer; InvalidAnswer when missing or too short to instruct anything."""
    data = load_json(answer)
    try:
        prompt = SystemPromptAnswer.model_validate(data).system_prompt.strip()
    except ValidationError:
        raise InvalidAnswer(['the answer is not {"system_prompt": "..."}']) from None
    if len(prompt) < MIN_SYSTEM_PROMPT_CHARS:
        raise InvalidAnswer([f"the system prompt is {len(prompt)} characters; write a real instruction"])
    return prompt


def check_task(task_description: str) -> str:
    """The task description, stripped; ValueError when it is empty."""
    if not isinstance(task_description, str) or not task_description.strip():
        raise ValueError(
            "the task description is empty: describe in plain English what the model should learn, e.g. "
            '"Rewrite the user\'s text in formal business English"'
        )
    return task_description.strip()


async def generate_training_inputs(
    task_description: str, num_examples: int = 50, *, generator: Judge
) -> list[str]:
    """`num_examples` distinct inputs for the task, written by `generator` (see the module docstring).

    Example:
        generator = art.recipes.ruler_loop.llm_spec("generator", "openai/gpt-4.1-mini")
        inputs = await generate_training_inputs("Fix the grammar of the user's text", 24, generator=generator)
    """
    task = check_task(task_description)
    if num_examples < 1:
        raise ValueError(f"num_examples must be >= 1, got {num_examples}")
    schema = {
        "type": "object",
        "properties": {
            "inputs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"input": {"type": "string"}},
                    "required": ["input"],
                    "additionalProperties": False,
                },
                "minItems": num_examples,
            }
        },
        "required": ["inputs"],
        "additionalProperties": False,
    }
    return await generate_structured(
        generator,
        [{"role": "user", "content": INPUTS_PROMPT.format(task=task, n=num_examples)}],
        lambda answer: parse_inputs(answer, num_examples),
        schema=json_schema_format("training_inputs", schema),
        what=f"{num_examples} training inputs",
    )


async def generate_system_prompt(task_description: str, *, generator: Judge) -> str:
    """A system prompt for the task, drafted by `generator`.

    Example:
        generator = art.recipes.ruler_loop.llm_spec("generator", "openai/gpt-4.1-mini")
        prompt = await generate_system_prompt("Fix the grammar of the user's text", generator=generator)
    """
    task = check_task(task_description)
    schema = {
        "type": "object",
        "properties": {"system_prompt": {"type": "string"}},
        "required": ["system_prompt"],
        "additionalProperties": False,
    }
    return await generate_structured(
        generator,
        [{"role": "user", "content": SYSTEM_PROMPT_PROMPT.format(task=task)}],
        parse_system_prompt,
        schema=json_schema_format("system_prompt", schema),
        what="a system prompt",
    )
