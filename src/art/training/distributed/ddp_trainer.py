"""One trainer rank of several: a `Trainer` whose step's gradients are the whole step's, summed over ranks.

`RankTrainerBase` is what every rank does whatever syncs the gradients: it prepares the same step as the
others (same groups, same tokens), plans the same micro-batches and takes every `world_size`-th of them,
starting at its own rank. It accumulates their gradients locally, each micro-batch's loss divided by the
assistant tokens of the *whole* step (`Trainer.accumulate_gradients(normalizer=...)`), so the ranks'
gradients sum to the one-process step's; then each rank clips and takes the same AdamW step on the same
numbers, and the adapters equal one rank's within float noise (tests/training/test_ranks.py).

Two ways to sum the gradients (`RuntimeOptions.train_sharding`):
- `RankTrainer` (DDP, the default): every rank holds the whole base. One closing pass through
  `torch.nn.parallel.DistributedDataParallel` (a zero loss over two tokens: every LoRA parameter takes
  part, none changes) makes DDP all-reduce the accumulated gradients, bucketed, as it does after `no_sync()`
  accumulation; DDP averages, so they are multiplied back by `world_size`. Uneven shares cost nothing extra:
  a rank without micro-batches only joins the closing pass.
- `fsdp_trainer.FsdpRankTrainer` (FSDP2): the base and adapter sharded across the ranks; see that module.

Which one (measured, benchmarks/bench_scale.py and docs/scale.md): DDP while the base fits one device. The
LoRA adapter and its AdamW state are a few MB; DDP moves the adapter's gradients once per step, where FSDP2
all-gathers the base's weights for every forward and backward of every micro-batch (x99 the bytes per step
on the default model; measured x1.8 the step time for x0.87 the peak memory per rank) to save memory a
base that fits does not need saved. FSDP2 is for a base too big for one device.

Metrics: sums (loss, entropy, ratio and clip fraction, token counts, micro-batches) are summed over ranks,
phase times are the slowest rank's; `sync_s` is the closing all-reduce on the rank that arrived last (the
all-reduce itself), `sync_wait_s` the slowest rank's (waiting for the others included). The step's record (per-token
logprobs and ratios) is gathered to rank 0.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Unpack

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from art.chat.chat_template import ChatTemplate
from art.training.batching import plan_micro_batches
from art.training.tokenize import TokenizedSequence
from art.training.trace import StepTrace
from art.training.trainer import AccumulateOptions, Trainer
from art.types import LoRAConfig, RuntimeOptions, TrainSpec

# metrics that add up over ranks (each rank's share of the step's sums); the "_s" times take the slowest rank's
SUMMED = frozenset(
    (
        "loss",
        "entropy",
        "ratio_mean",
        "clip_fraction",
        "kl",
        "num_tokens",
        "num_padded_tokens",
        "num_micro_batches",
    )
)


class _TouchAdapter(torch.nn.Module):
    """A zero loss over two tokens through the whole model: DDP's closing pass (see the module docstring)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids_1T: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model(input_ids=input_ids_1T).logits
        return logits.float().sum() * 0.0


def shard(plan: Sequence[Sequence[int]], rank: int, world_size: int) -> list[int]:
    """The sequence indices of rank `rank`: micro-batches rank, rank + world_size, ... of `plan`.

    Example:
        >>> shard([[0, 1], [2], [3], [4, 5]], 1, 2)
        [2, 4, 5]
    """
    return [i for j, batch in enumerate(plan) if j % world_size == rank for i in batch]


class RankTrainerBase(Trainer):
    """What every rank of a step does whatever syncs its gradients: its share of the micro-batches, the
    metrics summed over ranks, the record gathered to rank 0. A subclass syncs the gradients
    (`_sync_gradients`) and may pad its share (`_pad_share`); `RankTrainer` (DDP), `FsdpRankTrainer` (FSDP2)."""

    def __init__(
        self,
        model: Any,
        chat_template: ChatTemplate,
        lora: LoRAConfig | None = None,
        *,
        seed: int = 0,
        options: RuntimeOptions | None = None,
        device: torch.device | None = None,
    ) -> None:
        """A `Trainer`, then distributed by the subclass's `_distribute` on `device` (default: where `model`
        is; `model` may wait in host memory when the subclass moves it there)."""
        super().__init__(model, chat_template, lora, seed=seed, options=options)
        self._distribute(device or self.device)

    def _distribute(self, device: torch.device) -> None:
        """Wrap or shard the model across the ranks, its parameters on `device` (see the subclasses)."""
        raise NotImplementedError

    @property
    def rank(self) -> int:
        """This rank's number in the process group."""
        return dist.get_rank()

    @property
    def world_size(self) -> int:
        """The ranks in the process group."""
        return dist.get_world_size()

    def accumulate_gradients(
        self, sequences: Sequence[TokenizedSequence], spec: TrainSpec, **options: Unpack[AccumulateOptions]
    ) -> dict[str, float]:
        """This rank's share of the step's gradients, then synced: every rank ends with the step's sum."""
        normalizer = options.get("normalizer")
        total = sum(s.num_assistant_tokens for s in sequences) if normalizer is None else normalizer
        plan = plan_micro_batches([len(s) for s in sequences], spec.micro_batch_tokens)
        shares = [[sequences[i] for i in shard(plan, r, self.world_size)] for r in range(self.world_size)]
        trace = options.get("trace")
        local = StepTrace() if trace is not None else None
        lead = self.rank == 0  # rank 0 alone shows progress and reports micro-batches
        here: AccumulateOptions = {
            **options,
            "progress": options.get("progress", False) and lead,
            "on_micro_batch": options.get("on_micro_batch") if lead else None,
            "trace": local,
            "normalizer": total,
        }
        sums = super().accumulate_gradients(shares[self.rank], spec, **here)
        self._pad_share(shares, spec)
        start = time.perf_counter()
        self._sync_gradients()
        sums["sync_s"] = time.perf_counter() - start
        metrics = self._reduce_metrics(sums)
        if trace is not None and local is not None:
            self._gather_trace(local, trace)
        return metrics

    scores_before_separately = (
        True  # each rank forwards only its share: the trust region scores its own sample
    )

    def _agree(self, value: float) -> float:
        """The ranks' mean of `value` (the trust region's KL): every rank scales its update back alike, so the
        adapters stay equal even where float noise differs between ranks."""
        total = torch.tensor([value], dtype=torch.float64, device=self.device)  # NCCL: on the GPU
        dist.all_reduce(total)
        return float(total.item()) / self.world_size

    def _pad_share(self, shares: Sequence[Sequence[TokenizedSequence]], spec: TrainSpec) -> None:
        """After this rank's share of micro-batches: passes that add nothing, where the syncing needs every
        rank to run as many (FSDP2); `shares` is every rank's sequences."""

    def _sync_gradients(self) -> None:
        """Make every rank's accumulated gradients the sum over ranks."""
        raise NotImplementedError

    def param_bytes(self) -> dict[str, int]:
        """{"param_bytes": the model's parameter bytes this rank holds, "model_param_bytes": the whole model's}
        (equal under DDP; about 1/N of it each under FSDP2)."""
        held = whole = 0
        for param in self.model.parameters():
            local = param.to_local() if isinstance(param, DTensor) else param
            held += local.numel() * local.element_size()
            whole += param.numel() * param.element_size()
        return {"param_bytes": held, "model_param_bytes": whole}

    def save_result(self, path: Path) -> None:
        """Called on every rank after the step: rank 0 saves the trained checkpoint into `path`."""
        if self.rank == 0:
            self.save(path)

    def _reduce_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        keys = sorted(sums)
        summed = [k for k in keys if k in SUMMED]
        slowest = [k for k in keys if k.endswith("_s")]
        values = torch.tensor([sums[k] for k in summed], dtype=torch.float64, device=self.device)
        times = torch.tensor([sums[k] for k in slowest], dtype=torch.float64, device=self.device)
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        metrics = dict(sums)
        metrics.update(zip(summed, values.tolist(), strict=True))
        metrics.update(zip(slowest, times.tolist(), strict=True))
        # the closing pass on the rank that arrived last is the all-reduce itself; on the others it includes
        # waiting for that rank: `sync_s` is the former (the fastest), `sync_wait_s` the latter (the slowest)
        fastest = torch.tensor([-sums["sync_s"]], dtype=torch.float64, device=self.device)
        dist.all_reduce(fastest, op=dist.ReduceOp.MAX)
        metrics["sync_wait_s"], metrics["sync_s"] = metrics["sync_s"], -float(fastest.item())
        metrics["train_tokens_per_s"] = metrics["num_tokens"] / max(metrics["forward_backward_s"], 1e-9)
        metrics["train_ranks"] = float(self.world_size)
        return metrics

    def _gather_trace(self, local: StepTrace, trace: StepTrace) -> None:
        gathered: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object((local.turns, local.tokens), gathered, dst=0)
        for turns, tokens in gathered or []:
            for key, items in turns.items():
                trace.turns.setdefault(key, []).extend(items)
            trace.tokens.extend(tokens)


class RankTrainer(RankTrainerBase):
    """`Trainer` on rank `rank` of an initialised process group of `world_size`, its gradients summed by DDP
    (see the module docstring)."""

    def _distribute(self, device: torch.device) -> None:
        device_ids = [device.index] if device.type == "cuda" else None
        # init_sync=False: every rank loads the same base and the same checkpoint before each step, so
        # broadcasting the base's weights from rank 0 (hundreds of MB) would change nothing.
        self.ddp = DistributedDataParallel(
            _TouchAdapter(self.model), device_ids=device_ids, forward_sync_buffers=False, init_sync=False
        )
        self._touch_ids_1T = torch.tensor([[self.pad_id, self.pad_id]], device=self.device)

    def _sync_gradients(self) -> None:
        with self._own_adapter(train=True):
            self.ddp(self._touch_ids_1T).backward()
        with torch.no_grad():
            for _, param in self.named_params:
                assert param.grad is not None  # the closing pass reaches every LoRA parameter
                param.grad.mul_(self.world_size)  # DDP averaged: the step's gradient is the sum
