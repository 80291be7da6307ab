"""AutoRL: train a model for any task given only a plain-English description (`art autorl "TASK"`).

An LLM (the generator) writes the inputs and a system prompt, RULER (the judge) scores the model's
answers, GRPO trains on the scores, and the trained model is compared with the base model on held-out
inputs. Client side only; the model's service starts in a `LocalBackend` unless you pass a backend.
"""

from art.recipes.autorl.generate import (
    TrainingDataset,
    TrainingInput,
    generate_system_prompt,
    generate_training_inputs,
)
from art.recipes.autorl.run import AutoRLConfig, AutoRLResult, TaskInput, autorl, make_rollout, split_inputs

__all__ = [
    "AutoRLConfig",
    "AutoRLResult",
    "TaskInput",
    "TrainingDataset",
    "TrainingInput",
    "autorl",
    "generate_system_prompt",
    "generate_training_inputs",
    "make_rollout",
    "split_inputs",
]
