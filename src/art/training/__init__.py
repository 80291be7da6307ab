"""Training core (heavy side): trajectories -> tokens -> GRPO loss -> one LoRA optimiser step.

Modules, in the order data flows through them:
- `advantages`: group-relative advantages (GRPO).
- `tokenize`: render + splice sampled token ids; assistant masks and sampled logprobs; template check.
- `prepare`: one step's data: advantages, tokenisation, drops counted and explained.
- `batching`: token-budgeted micro-batches and their tensors.
- `logprobs`: per-token logprobs/entropy with a chunked LM head.
- `losses`: CISPO / PPO, token- or sequence-level ratios, KL (k3).
- `checkpoint`: optimizer/trainer state in safetensors + JSON.
- `trainer`: `Trainer` (PEFT LoRA in place, `train_step`, `save`/`load`, `logprobs`) and `StepReport`.

Import the submodules directly (`from art.training.trainer import Trainer`); this package imports nothing.
"""
