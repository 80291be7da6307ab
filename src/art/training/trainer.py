"""The LoRA trainer: one GRPO (or supervised) optimiser step per call, checkpoints, and the canary's logprobs.

`Trainer(model, chat_template, lora)` wraps the model with PEFT *in place*: LoRA layers are injected into
the model's own modules and the base weights stay the very tensors the inference engine reads (frozen).
The untrained adapter (B = 0, A drawn from `seed`) is checkpoint 0.

One `train_step` = prepare (advantages, tokenise, filter; `prepare.py`) -> micro-batches bounded by
`spec.micro_batch_tokens` -> per micro-batch: [base-model logprobs for KL] -> forward -> loss -> backward,
accumulating gradients normalised by the step's total assistant tokens -> clip -> AdamW. The engine's
sampled logprobs are the "old" policy, so no extra forward pass computes them.

`sft_step` is supervised fine-tuning's step: the same micro-batched forward/backward with the
cross-entropy of the assistant tokens as the loss (`losses.sft_loss`). Switching between RL and SFT clears
the AdamW moments, as the reference does: the two objectives' gradients have different scales, and moments
of one would mis-size the other's first steps. The mode is saved with the checkpoint, so a resumed run
resets the same way.

LoRA parameters are float32 even on a bf16 base (peft's `autocast_adapter_dtype`), so small updates are
not rounded away; AdamW state is float32 too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TypedDict, Unpack

import peft
import torch
import transformers
from peft.helpers import disable_input_dtype_casting
from safetensors.torch import load_file
from tqdm.auto import tqdm

from art.chat.chat_template import ChatTemplate
from art.common.waits import waiting
from art.kernels.cpu_env import bound_primitive_caches
from art.record.step_record import StepTrainerRecord
from art.training.batching import MicroBatch, collate, plan_micro_batches
from art.training.checkpoint import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    STATE_FILE,
    load_optimizer,
    save_optimizer,
)
from art.training.fast_decoder import FastDecoder
from art.training.logprobs import token_logprobs
from art.training.losses import LossOutput, policy_loss, sft_loss
from art.training.prepare import prepare_step
from art.training.token_losses import TOKEN_LOSSES, TokenDatum, collate_datums
from art.training.tokenize import TokenizedSequence, TrajectoryTokenizer
from art.training.trace import StepTrace
from art.training.trust_region import MAX_TRIES, check_sample, mean_k3, next_scale
from art.trajectories import TrajectoryGroup
from art.types import LoRAConfig, RuntimeOptions, SFTSpec, TrainSpec

logger = logging.getLogger(__name__)

ADAPTER_NAME = "default"

TrainingMode = Literal["rl", "sft"]

MicroBatchCallback = Callable[[int, int, float], None]
"""`(micro-batches done, micro-batches in the step, that micro-batch's loss)`, after each backward pass."""


class AccumulateOptions(TypedDict, total=False):
    """`Trainer.accumulate_gradients`' keyword arguments, for an override that passes them on (a rank's)."""

    progress: bool
    desc: str
    objective: TrainingMode
    on_micro_batch: MicroBatchCallback | None
    trace: StepTrace | None
    normalizer: int | None
    keep: dict[int, torch.Tensor] | None


@dataclass
class _TrustRegion:
    """What the trust region keeps from before an update: the check sample (indices into the step's
    sequences), its batches (inputs, attention mask, targets, loss mask) and each batch row's sample index,
    each sampled sequence's logprobs before the update (by sample index), and the adapter's parameters."""

    sample: list[int]
    batches: list[list[torch.Tensor]]
    rows: list[list[int]]
    before: dict[int, torch.Tensor]
    adapter: list[torch.Tensor]
    seconds: float = 0.0

    def rows_of(self, scored: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(logprob rows, loss-mask rows) of `scored` (one tensor per batch), in the sample's order."""
        after: dict[int, torch.Tensor] = {}
        masks: dict[int, torch.Tensor] = {}
        for lp_BT, batch, rows in zip(scored, self.batches, self.rows, strict=True):
            for b, j in enumerate(rows):
                n = int(batch[1][b].sum())  # the sequence's scored positions (its tokens less one)
                after[j], masks[j] = lp_BT[b, :n], batch[3][b, :n].float()
        return [after[j] for j in self.sample], [masks[j] for j in self.sample]

    def kl(self, scored: Sequence[torch.Tensor]) -> float:
        """KL(before || now) per trained token of the sample, with `scored` the sample's batches scored now."""
        after, masks = self.rows_of(scored)
        return mean_k3([self.before[j] for j in self.sample], after, masks)


@dataclass
class StepReport:
    """What one `train_step` did: metrics (unprefixed floats), what was trainable, and a plain note."""

    metrics: dict[str, float]
    trainable_groups: int
    trainable_trajectories: int
    message: str | None = None
    updated: bool = True  # False when no optimizer step was taken (nothing trainable, non-finite gradient)
    record: StepTrainerRecord | None = None  # advantages and per-token trainer values (RL steps)


def saved_adapter_names(model: Any, param_names: Sequence[str]) -> dict[str, str]:
    """PEFT's saved name (as in `adapter_model.safetensors`) of each trainable parameter -> its name in `model`.

    Computed from the names alone: since peft 0.22, `get_peft_model_state_dict` gathers sharded (FSDP2)
    tensors whole, a collective and a copy, so it is given numbered placeholders rather than the parameters.
    """
    numbered = {name: torch.tensor(index) for index, name in enumerate(param_names)}
    saved = peft.get_peft_model_state_dict(model, state_dict=numbered, adapter_name=ADAPTER_NAME)
    return {key: param_names[int(value)] for key, value in saved.items()}


class Trainer:
    """GRPO on a LoRA adapter of `model` (see module docstring)."""

    # Whether to build the fast decoder (`fast_decoder.py`): a subclass whose weights are not whole tensors on
    # this process (FSDP2 shards, `fsdp_trainer`) turns it off: it reads the projections' weights directly.
    FAST_DECODER: ClassVar[bool] = True
    # Whether the trust region scores its sample before the update with a forward of its own, instead of
    # keeping the training forward's rows: a rank forwards only its share of the step (`ddp_trainer`).
    scores_before_separately: ClassVar[bool] = False

    def __init__(
        self,
        model: transformers.PreTrainedModel,
        chat_template: ChatTemplate,
        lora: LoRAConfig | None = None,
        *,
        seed: int = 0,
        options: RuntimeOptions | None = None,
    ) -> None:
        """`options`: the trainer's switches (`train_compile`, `train_cpp_attention`); defaults: all on."""
        self.options = options or RuntimeOptions()
        bound_primitive_caches(self.options.cpu_primitive_cache)  # before the trainer's first matmul
        self.lora = lora or LoRAConfig()
        self.seed = seed
        config = peft.LoraConfig(
            r=self.lora.r,
            lora_alpha=self.lora.alpha,
            lora_dropout=self.lora.dropout,
            target_modules=list(self.lora.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )
        with waiting("building the trainer (LoRA adapter, optimizer, compiled forward)"):
            # Seed only the LoRA init, without disturbing the process's global RNG stream.
            with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                # transformers 5 deprecates a name peft still calls; the warning is noise to our users.
                warnings.filterwarnings(
                    "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
                )
                torch.manual_seed(seed)
                self.model: Any = peft.get_peft_model(model, config, adapter_name=ADAPTER_NAME)
            self.named_params = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
            if not self.named_params:
                raise ValueError(
                    f"LoRA found none of the target modules {self.lora.target_modules} in the model"
                )
            self.param_names = [n for n, _ in self.named_params]
            # Our own forward for Llama-style models (same function, fewer ops); None: the model's own forward.
            self.fast_decoder = (
                FastDecoder.build(
                    self.model,
                    compile=self.options.train_compile,
                    cpp_attention=self.options.train_cpp_attention,
                    native_bf16=self.options.native_bf16,
                    shared_prefix=self.options.train_shared_prefix,
                )
                if self.FAST_DECODER
                else None
            )
            self.optimizer = self._new_optimizer()
        self.chat_template = chat_template
        self.tokenizer = TrajectoryTokenizer(chat_template)
        tok: Any = chat_template.tokenizer
        self.pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0))
        self.optimizer_steps = 0
        self.last_step: int | None = None
        self.training_mode: TrainingMode | None = None  # the objective of the last optimiser step

    @property
    def vocab_size(self) -> int:
        """Rows of the input embedding: a token id must be below it."""
        return int(self.model.get_input_embeddings().weight.shape[0])

    @property
    def dtype(self) -> torch.dtype:
        """The base model's dtype (the compute dtype of forward passes)."""
        return self.model.get_base_model().dtype  # type: ignore[no-any-return]

    @property
    def device(self) -> torch.device:
        """Where the model's weights live (batches are moved there)."""
        return self.named_params[0][1].device

    def _new_optimizer(self) -> torch.optim.AdamW:
        # lr, betas and weight decay are set from the TrainSpec at every step. The fused implementation is
        # the same update in one kernel: on CPU, 60 ms instead of 1.6 s for the default model's 420 tensors.
        return torch.optim.AdamW(
            [p for _, p in self.named_params],
            lr=1e-5,  # a placeholder: every step sets lr (and betas, decay) from its TrainSpec
            betas=(0.9, 0.99),
            weight_decay=0.1,
            fused=self.device.type in ("cpu", "cuda"),
        )

    @contextmanager
    def _own_adapter(self, train: bool) -> Iterator[None]:
        """Make this trainer's adapter the active one (the engine may have others loaded) and set the mode."""
        previous_adapter = self.model.active_adapter
        was_training = self.model.training
        if previous_adapter != ADAPTER_NAME:
            self.model.set_adapter(ADAPTER_NAME)
        for _, param in self.named_params:
            param.requires_grad_(True)
        self.model.train(train)
        try:
            yield
        finally:
            self.model.train(was_training)
            if previous_adapter != ADAPTER_NAME:
                self.model.set_adapter(previous_adapter, inference_mode=True)

    @contextmanager
    def _compute(self) -> Iterator[None]:
        """Forward passes of a bf16/fp16 base: LoRA computed in the base dtype from float32 parameters.

        peft's default casts every LoRA input to float32 (the parameters' dtype): a float32 copy of each
        projection's input, kept for backward, and float32 products added to a bf16 output. That doubled
        activation memory and spent a quarter of CPU time on casts. Under autocast the (tiny) A and B are cast
        to the base dtype instead, as mixed precision does: parameters, gradients and AdamW stay float32,
        and the served engine computes the delta in the same dtype.
        """
        dtype = self.model.get_base_model().dtype
        if dtype not in (torch.bfloat16, torch.float16):
            yield
            return
        with (
            torch.autocast(device_type=self.device.type, dtype=dtype),
            disable_input_dtype_casting(self.model),
        ):
            yield

    def _begin(self, mode: TrainingMode) -> bool:
        """Start a step of `mode`; clears the AdamW state when the previous step had the other objective
        (the reference's rule). Returns whether it did."""
        reset = self.training_mode is not None and self.training_mode != mode
        if reset:
            self.optimizer.state.clear()
        self.training_mode = mode
        return reset

    def _apply_gradients(
        self,
        learning_rate: float,
        betas: Sequence[float],
        weight_decay: float,
        max_grad_norm: float,
        eps: float | None = None,
    ) -> tuple[float, str | None]:
        """Clip the accumulated gradients and take the AdamW step (skipped, with a warning, when the norm is
        not finite); zero the gradients. Returns the norm before clipping and the skip note, if any.
        `eps`: AdamW's epsilon for this step (None: as it was)."""
        for group in self.optimizer.param_groups:
            group.update(lr=learning_rate, betas=tuple(betas), weight_decay=weight_decay)
            if eps is not None:
                group["eps"] = eps
        params = [p for _, p in self.named_params]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
        message = None
        if math.isfinite(grad_norm):
            self.optimizer.step()
            self.optimizer_steps += 1
        else:
            message = (
                f"Step skipped: the gradient norm was {grad_norm} (not finite); the adapter is unchanged."
            )
            logger.warning(message)
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, message

    # -- training -------------------------------------------------------------------------------------

    def train_step(
        self,
        groups: Sequence[TrajectoryGroup],
        spec: TrainSpec,
        *,
        current_step: int,
        progress: bool = True,
        on_micro_batch: MicroBatchCallback | None = None,
    ) -> StepReport:
        """Take one optimiser step on `groups` (synchronous; call it while inference is paused).

        `current_step` is the step whose adapter is being trained (the data's staleness is measured
        against it). When nothing is trainable, no step is taken and `message` says why.
        `on_micro_batch(done, total, loss)` is called after each micro-batch's backward pass (e.g. to
        report progress over the network; `loss` is that micro-batch's share of the step's loss).
        """
        start = time.perf_counter()
        data = prepare_step(groups, self.tokenizer, spec, current_step=current_step)
        metrics = dict(data.metrics)
        metrics["tokenize_s"] = time.perf_counter() - start
        trace = StepTrace()
        sizes = [len(g.trajectories) for g in groups]
        if not data.sequences:
            metrics["step_s"] = time.perf_counter() - start
            record = trace.record(data, sizes, spec, updated=False)
            return StepReport(metrics, 0, 0, data.message, updated=False, record=record)

        reset = self._begin("rl")
        region = None if spec.max_step_kl is None else self._trust_region_start(data.sequences, spec)
        with self._seeded_step():
            sums = self.accumulate_gradients(
                data.sequences,
                spec,
                progress=progress,
                desc=f"step {current_step + 1}: training",
                on_micro_batch=on_micro_batch,
                trace=trace,
                keep=None if region is None or self.scores_before_separately else region.before,
            )
            optimizer_start = time.perf_counter()
            grad_norm, skipped = self._apply_gradients(
                spec.learning_rate, spec.adam_betas, spec.weight_decay, spec.max_grad_norm
            )
            optimizer_end = time.perf_counter()
        scaled_back = None
        if region is not None and spec.max_step_kl is not None and skipped is None:
            region_metrics, scaled_back = self._hold_trust_region(region, spec.max_step_kl)
            metrics.update(region_metrics)
        message = skipped or " ".join(m for m in (scaled_back, data.message) if m) or None
        if skipped is None:
            self.last_step = current_step
        end = time.perf_counter()
        metrics.update(sums)
        metrics.update(
            grad_norm=grad_norm,
            learning_rate=spec.learning_rate,
            optimizer_reset=float(reset),
            optimizer_s=optimizer_end - optimizer_start,
            step_s=end - start,
        )
        updated = math.isfinite(grad_norm)
        return StepReport(
            metrics,
            data.trainable_groups,
            data.trainable_trajectories,
            message,
            updated=updated,
            record=trace.record(data, sizes, spec, updated=updated),
        )

    def _trust_region_start(self, sequences: Sequence[TokenizedSequence], spec: TrainSpec) -> _TrustRegion:
        """Before the update: the check sample's batches and a copy of the adapter. The sample's logprobs
        before the update are the training forward's (`accumulate_gradients(keep=...)` fills `before`), or
        scored here when `scores_before_separately` (ranks: each forwards only its share of the step)."""
        start = time.perf_counter()
        sample = check_sample(len(sequences))
        plan = plan_micro_batches([len(sequences[i]) for i in sample], spec.micro_batch_tokens)
        batches, rows = [], []
        for indices in plan:
            batches.append(self._inputs(collate([sequences[sample[k]] for k in indices], self.pad_id)))
            rows.append([sample[k] for k in indices])
        region = _TrustRegion(
            sample=sample,
            batches=batches,
            rows=rows,
            before={},
            adapter=[p.detach().clone() for _, p in self.named_params],
        )
        if self.scores_before_separately:
            before, _ = region.rows_of(self._score(batches))
            region.before = dict(zip(sample, before, strict=True))
        region.seconds = time.perf_counter() - start
        return region

    def _inputs(self, batch: MicroBatch) -> list[torch.Tensor]:
        """A micro-batch's (input ids, attention mask, targets, loss mask) on the trainer's device."""
        return [
            t.to(self.device)
            for t in (batch.input_ids_BT, batch.attention_mask_BT, batch.target_ids_BT, batch.loss_mask_BT)
        ]

    def _score(self, batches: Sequence[Sequence[torch.Tensor]]) -> list[torch.Tensor]:
        """Each batch's target logprobs with the adapter as it is now: eval mode, no gradients."""
        with torch.no_grad(), self._own_adapter(train=False), self._compute():
            return [self._token_logprobs(*inputs)[0].detach().float() for inputs in batches]

    def _agree(self, value: float) -> float:
        """A number every rank must decide alike on (one process: itself; ranks average it)."""
        return value

    def _hold_trust_region(self, region: _TrustRegion, max_kl: float) -> tuple[dict[str, float], str | None]:
        """After the update: its KL on the check sample; above `max_kl`, scale the update back (see
        `art.training.trust_region`). Returns the metrics (`step_kl`, `update_scale`, `trust_region_s`) and a
        note when the update was scaled back or undone."""
        start = time.perf_counter()
        first = kl = self._agree(region.kl(self._score(region.batches)))
        scale, note = 1.0, None
        if kl > max_kl:
            params = [p for _, p in self.named_params]
            updated = [p.detach().clone() for p in params]
            for _ in range(MAX_TRIES):
                scale = next_scale(scale, kl, max_kl)
                with torch.no_grad():
                    for p, old, new in zip(params, region.adapter, updated, strict=True):
                        p.copy_(torch.lerp(old, new, scale))
                kl = self._agree(region.kl(self._score(region.batches)))
                if kl <= max_kl:
                    break
            else:
                with torch.no_grad():
                    for p, old in zip(params, region.adapter, strict=True):
                        p.copy_(old)
                scale, kl = 0.0, 0.0
            note = (
                f"The update moved the policy by {first:.3g} nats a token (KL on the step's own tokens), above "
                f"max_step_kl={max_kl:g}: "
                + (
                    f"scaled back to {scale:.3g} of it (KL {kl:.3g})."
                    if scale
                    else "undone (the adapter as before)."
                )
                + " If this repeats, the learning rate is too high for this model."
            )
            logger.warning(note)
        metrics = {
            "step_kl": kl,
            "update_scale": scale,
            "trust_region_s": region.seconds + time.perf_counter() - start,
        }
        return metrics, note

    @contextmanager
    def _seeded_step(self) -> Iterator[None]:
        """This trainer's adapter in train mode, with the RNG seeded by the step count: LoRA dropout (if any)
        draws the same masks for the same step, also after a resume."""
        with self._own_adapter(train=True), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 1_000_003 + self.optimizer_steps)
            yield

    def sft_step(
        self,
        sequences: Sequence[TokenizedSequence],
        spec: SFTSpec,
        *,
        learning_rate: float,
        progress: bool = False,
    ) -> StepReport:
        """One supervised optimiser step on `sequences` (one batch): the mean cross-entropy of their
        assistant tokens, accumulated over micro-batches, clipped, then AdamW at `learning_rate`.

        `updated` is False when the gradient was not finite (the step is skipped; `message` says so).
        """
        start = time.perf_counter()
        reset = self._begin("sft")
        micro = TrainSpec(micro_batch_tokens=spec.micro_batch_tokens, max_seq_len=spec.max_seq_len)
        with self._seeded_step():
            sums = self.accumulate_gradients(
                sequences, micro, progress=progress, desc="sft batch", objective="sft"
            )
            grad_norm, skipped = self._apply_gradients(
                learning_rate, spec.adam_betas, spec.weight_decay, spec.max_grad_norm
            )
        metrics = {
            key: sums[key]
            for key in ("loss", "entropy", "num_tokens", "num_assistant_tokens", "num_micro_batches")
        }
        metrics.update(
            grad_norm=grad_norm,
            learning_rate=learning_rate,
            optimizer_reset=float(reset),
            step_s=time.perf_counter() - start,
        )
        return StepReport(metrics, 0, len(sequences), skipped, updated=skipped is None)

    # -- per-token losses (the Tinker API's forward, forward_backward and optim_step) -------------------

    def datum_losses(
        self,
        datums: Sequence[TokenDatum],
        loss_fn: str,
        config: Mapping[str, float],
        *,
        backward: bool,
        micro_batch_tokens: int = 8192,
    ) -> list[tuple[list[float], list[float]]]:
        """Per datum, the logprobs of its targets and its elementwise loss (`token_losses`, sums over
        tokens). With `backward`, the loss's gradient is *added* to the adapter's `.grad`: nothing zeroes
        it before, so calls accumulate until `optimizer_step` applies and clears them (Tinker's contract)."""
        loss = TOKEN_LOSSES[loss_fn]
        results: list[tuple[list[float], list[float]]] = [([], [])] * len(datums)
        grad = contextlib.nullcontext() if backward else torch.no_grad()
        with self._own_adapter(train=backward), grad:
            for indices in plan_micro_batches([len(d.tokens) for d in datums], micro_batch_tokens):
                batch = collate_datums([datums[i] for i in indices], self.pad_id)
                tensors = [
                    t.to(self.device)
                    for t in (batch.input_ids_BT, batch.attention_mask_BT, batch.target_ids_BT, batch.mask_BT)
                ]
                with self._compute():
                    lp_BT, _ = self._token_logprobs(*tensors)
                inputs_BT = {k: v.to(self.device) for k, v in batch.inputs_BT.items()}
                loss_BT = loss(lp_BT.float(), inputs_BT, config) * tensors[3]
                if backward:
                    loss_BT.sum().backward()  # type: ignore[no-untyped-call]
                for row, i in enumerate(indices):
                    n = len(datums[i].tokens)
                    results[i] = (lp_BT[row, :n].tolist(), loss_BT[row, :n].tolist())
        return results

    def optimizer_step(
        self,
        *,
        learning_rate: float,
        betas: Sequence[float],
        eps: float,
        weight_decay: float,
        max_grad_norm: float,
    ) -> tuple[float, str | None]:
        """AdamW on the gradients `datum_losses` accumulated (clipped to `max_grad_norm`; inf: not clipped),
        then clear them. Returns the norm before clipping and the note of a skipped step, if any."""
        with self._own_adapter(train=True):
            grad_norm, skipped = self._apply_gradients(learning_rate, betas, weight_decay, max_grad_norm, eps)
        return grad_norm, skipped

    def accumulate_gradients(
        self, sequences: Sequence[TokenizedSequence], spec: TrainSpec, **options: Unpack[AccumulateOptions]
    ) -> dict[str, float]:
        """Zero the gradients, then accumulate the step's loss gradient over token-budgeted micro-batches.

        Each micro-batch's loss is divided by the assistant tokens of *all* `sequences`, so the summed
        gradient is that of the step's masked mean, whatever the budget. Leaves the gradients in `.grad`
        (no optimiser step) and returns the step's metrics (loss, entropy, ratio, clip fraction, kl,
        token counts, phase times). With a `trace`, each trained token's logprob and ratio go into it too.
        `normalizer`: the assistant tokens to divide by instead (a rank's share of a step divides by the
        whole step's, so the ranks' gradients sum to the step's; `distributed_trainer`).
        `keep`: filled with the logprob row (detached, float32) of each sequence index `check_sample` chose
        (every index whose row is wanted; the trust region's "before").
        """
        with self._own_adapter(train=True):
            return self._accumulate(sequences, spec, **options)

    def _accumulate(
        self,
        sequences: Sequence[TokenizedSequence],
        spec: TrainSpec,
        *,
        progress: bool = False,
        desc: str = "train",
        objective: TrainingMode = "rl",
        on_micro_batch: MicroBatchCallback | None = None,
        trace: StepTrace | None = None,
        normalizer: int | None = None,
        keep: dict[int, torch.Tensor] | None = None,
    ) -> dict[str, float]:
        """Forward and backward over `sequences` in micro-batches (gradients accumulate; no optimizer step),
        and the step's metrics summed over them.

        Long on purpose: the trainer's inner loop. Its stages (zero the gradients, build the kernels, then per
        micro-batch: forward, loss, backward, trace, callback, sums) must run in this order over shared
        sums and timers; split into helpers, that order would be spread over several of them."""
        plan = plan_micro_batches([len(s) for s in sequences], spec.micro_batch_tokens)
        total_assistant = sum(s.num_assistant_tokens for s in sequences) if normalizer is None else normalizer
        epsilon, epsilon_high = spec.clip_range()
        sums: dict[str, float] = defaultdict(float)
        wanted = frozenset(check_sample(len(sequences))) if keep is not None else frozenset()
        loop_start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        if (
            progress
            and self.fast_decoder is not None
            and not self.fast_decoder.kernels_ready(self.dtype, self.device)
        ):
            # Compiling takes from seconds to minutes once per process; a bar would show it as a huge ETA.
            tqdm.write(f"{desc}: building the trainer's compiled kernels (once per process)...")
            with self._compute():  # as the forward will call them (under autocast for bf16)
                self.fast_decoder.prepare_kernels(self.dtype, self.device)
        bar = tqdm(
            plan,
            desc=desc,
            unit="batch",
            disable=not progress,
            leave=False,
            postfix={"sequences": len(sequences)},
            dynamic_ncols=True,
        )
        for done, indices in enumerate(bar, 1):
            t0 = time.perf_counter()
            batch = collate([sequences[i] for i in indices], self.pad_id)
            inputs = self._inputs(batch)
            mask_BT = inputs[3]
            t1 = time.perf_counter()
            ref_logprobs_BT = None
            if spec.kl_penalty_coef > 0:
                with torch.no_grad(), self.model.disable_adapter(), self._compute():
                    ref_logprobs_BT, _ = self._token_logprobs(*inputs)
            t2 = time.perf_counter()
            with self._compute():
                logprobs_BT, entropy_BT = self._token_logprobs(*inputs)
            out: LossOutput
            if objective == "sft":
                out = sft_loss(logprobs_BT, mask_BT, normalizer=total_assistant)
            else:
                sampled_BT = batch.sampled_logprobs_BT.to(self.device)
                unknown_BT = torch.isnan(sampled_BT)
                if bool(unknown_BT.any()):  # turns trained without sampled logprobs: ratio 1 (on-policy)
                    sampled_BT = torch.where(
                        unknown_BT, logprobs_BT.detach().to(sampled_BT.dtype), sampled_BT
                    )
                out = policy_loss(
                    logprobs_BT,
                    sampled_BT,
                    batch.advantages_B.to(self.device),
                    mask_BT,
                    loss_fn=spec.loss_fn,
                    epsilon=epsilon,
                    epsilon_high=epsilon_high,
                    importance_sampling_level=spec.importance_sampling_level,
                    ref_logprobs_BT=ref_logprobs_BT,
                    kl_penalty_coef=spec.kl_penalty_coef,
                    normalizer=total_assistant,
                )
            t3 = time.perf_counter()
            out.loss.backward()  # type: ignore[no-untyped-call]
            t4 = time.perf_counter()
            loss = float(out.loss.detach())
            sums["loss"] += loss
            sums["entropy"] += float(entropy_BT.sum())  # zero off the mask
            sums["ratio"] += out.ratio_sum
            sums["clipped"] += out.clipped_tokens
            sums["kl"] += out.kl_sum
            sums["num_tokens"] += batch.num_tokens
            sums["num_padded_tokens"] += batch.input_ids_BT.numel()
            sums["collate_s"] += t1 - t0
            sums["ref_forward_s"] += t2 - t1
            sums["forward_s"] += t3 - t2
            sums["backward_s"] += t4 - t3
            if keep is not None:  # the trust region's "before": rows of the sample, as trained
                for b, i in enumerate(indices):
                    if i in wanted:
                        keep[i] = logprobs_BT[b, : len(sequences[i]) - 1].detach().float().clone()
            if trace is not None and out.ratio_BT is not None:  # the record: read, detached, off the clock
                trace.add_batch([sequences[i] for i in indices], logprobs_BT, out.ratio_BT)
            del out, logprobs_BT, entropy_BT, ref_logprobs_BT  # free the graph before the next batch
            if on_micro_batch is not None:
                on_micro_batch(done, len(plan), loss)
        elapsed = time.perf_counter() - loop_start
        n = float(max(total_assistant, 1))
        metrics = {
            "loss": sums["loss"],
            "entropy": sums["entropy"] / n,
            "ratio_mean": sums["ratio"] / n,
            "clip_fraction": sums["clipped"] / n,
            "num_tokens": sums["num_tokens"],
            "num_assistant_tokens": float(total_assistant),
            "num_padded_tokens": sums["num_padded_tokens"],
            "num_micro_batches": float(len(plan)),
            "collate_s": sums["collate_s"],
            "forward_s": sums["forward_s"],
            "backward_s": sums["backward_s"],
            "forward_backward_s": elapsed,
            "train_tokens_per_s": sums["num_tokens"] / max(elapsed, 1e-9),
        }
        if spec.kl_penalty_coef > 0:
            metrics["kl"] = sums["kl"] / n
            metrics["ref_forward_s"] = sums["ref_forward_s"]
        return metrics

    def _token_logprobs(self, *inputs_BT: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`token_logprobs` of the model as it is (adapter on or off) for (input ids, attention mask, targets,
        score mask): the one forward every training pass runs (a sharded subclass routes it through FSDP2)."""
        return token_logprobs(
            self.model, *inputs_BT, fast_decoder=self.fast_decoder, native_bf16=self.options.native_bf16
        )

    # -- checkpoints ----------------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the adapter (PEFT format, safetensors), optimizer state and trainer state into `path`."""
        self._write_checkpoint(Path(path))

    def _write_checkpoint(
        self,
        path: Path,
        adapter: dict[str, torch.Tensor] | None = None,
        optimizer_state: dict[str, torch.Tensor] | None = None,
    ) -> None:
        """`save`'s files; `adapter` (the LoRA parameters by name) and `optimizer_state` (as `optimizer_tensors`
        names them) replace this process's own tensors: whole ones gathered from shards (`fsdp_trainer`)."""
        path.mkdir(parents=True, exist_ok=True)
        given = {} if adapter is None else {"state_dict": adapter}
        self.model.save_pretrained(
            str(path), selected_adapters=[ADAPTER_NAME], safe_serialization=True, **given
        )
        save_optimizer(
            path,
            self.optimizer,
            self.param_names,
            {
                "optimizer_steps": self.optimizer_steps,
                "last_step": self.last_step,
                "training_mode": self.training_mode,
                "seed": self.seed,
                "lora": self.lora.model_dump(),
            },
            tensors=optimizer_state,
        )

    def load(self, path: Path) -> None:
        """Restore the adapter and, when present, the optimizer and trainer state saved by `save`.

        A folder with only an adapter (no `trainer_state.json`) loads with a fresh optimizer.
        """
        path = Path(path)
        config = json.loads((path / ADAPTER_CONFIG).read_text())
        if (config.get("r"), config.get("lora_alpha")) != (self.lora.r, self.lora.alpha):
            raise ValueError(
                f"{path}: adapter has r={config.get('r')}, alpha={config.get('lora_alpha')}; this trainer uses "
                f"r={self.lora.r}, alpha={self.lora.alpha}"
            )
        weights = load_file(str(path / ADAPTER_WEIGHTS))
        expected = set(saved_adapter_names(self.model, self.param_names))
        if set(weights) != expected:
            missing, extra = sorted(expected - set(weights)), sorted(set(weights) - expected)
            raise ValueError(
                f"{path}: adapter weights do not match this model (missing {missing[:3]}, extra {extra[:3]})"
            )
        self._set_adapter_weights(weights)
        if (path / STATE_FILE).exists():
            state = load_optimizer(path, self.optimizer, self.param_names)
            self._placed_optimizer_state()
            self.optimizer_steps = int(state.get("optimizer_steps", 0))
            self.last_step = state.get("last_step")
            self.training_mode = state.get("training_mode")
        else:
            self.optimizer = self._new_optimizer()
            self.optimizer_steps = 0
            self.last_step = None
            self.training_mode = None

    def _set_adapter_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy a saved adapter (PEFT's names, whole tensors) into this trainer's LoRA parameters."""
        with torch.no_grad():
            peft.set_peft_model_state_dict(self.model, weights, adapter_name=ADAPTER_NAME)

    def _placed_optimizer_state(self) -> None:
        """Called after `load_optimizer` filled the AdamW state with whole tensors (a sharded trainer shards
        them like their parameters)."""

    # -- canary ---------------------------------------------------------------------------------------

    @torch.no_grad()
    def logprobs(self, token_ids: Sequence[int], *, adapter: bool = True) -> list[float]:
        """Logprob of `token_ids[i]` given `token_ids[:i]` for i = 1 .. len-1 (eval mode; the adapter on, or
        off with `adapter=False`: the base model, for the canary's noise floor).

        Returns len(token_ids) - 1 floats: the reference the engine's served logprobs must match.
        This deliberately runs the model's own (PEFT) forward, not the compiled training decoder: the
        canary checks that the engine serves what was saved, so its reference must round like the
        engine does (bit for bit in bf16), while the training decoder fuses differently (~0.04 nats).
        """
        if len(token_ids) < 2:
            return []
        ids_1T = torch.tensor([list(token_ids)], dtype=torch.long, device=self.device)
        inputs_1T, targets_1T = ids_1T[:, :-1], ids_1T[:, 1:]
        base = self.model.disable_adapter() if not adapter else contextlib.nullcontext()
        with self._own_adapter(train=False), base, self._compute(), torch.no_grad():
            logprobs_1T, _ = token_logprobs(
                self.model,
                inputs_1T,
                torch.ones_like(inputs_1T),
                targets_1T,
                torch.ones_like(inputs_1T, dtype=torch.bool),
                fast_decoder=None,
                native_bf16=self.options.native_bf16,
            )
        return [float(x) for x in logprobs_1T[0]]
