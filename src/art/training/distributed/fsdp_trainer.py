"""One trainer rank of several with FSDP2: the frozen base sharded across the ranks, the LoRA adapter trained.

`FsdpRankTrainer` is `RankTrainer`'s sibling for `RuntimeOptions(train_sharding="fsdp2")`: the same share of
micro-batches per rank (`distributed_trainer.shard`), each micro-batch's loss divided by the assistant
tokens of the *whole* step, the same metrics and record. What differs is where the weights live and how
the gradients meet:

- **Sharding.** `torch.distributed.fsdp.fully_shard` (FSDP2, DTensor parameters sharded on dim 0) on every
  decoder layer, then on a small root module (`_Logprobs`) that holds the PEFT model: the root's group is
  what no layer holds (embeddings, final norm, LM head: tied or not, one group). Each rank keeps 1/N of
  every weight, LoRA's included; a layer's weights are all-gathered just before its forward (and again
  before its backward) and freed after. The root is a module of its own because `token_logprobs` calls
  the decoder and the LM head directly, never the model's `forward`: FSDP2 gathers around `forward` calls.
- **Gradients.** Each backward reduce-scatters the LoRA gradients (the frozen base has none) into each
  rank's shard, accumulated over micro-batches. FSDP2 divides by the ranks (an average); the gradient
  divide factor is set to 1 with plain SUM reductions, so the shards sum to the one-process step's gradient.
- **Equal passes.** FSDP2's all-gathers and reduce-scatters are collectives: every rank must run as many
  forward/backward passes. A rank whose share plans fewer micro-batches runs zero-weight passes (two pad
  tokens, loss x 0; with a KL penalty its base-model forward too) until it has run as many as the busiest.
- **Optimizer.** AdamW over the sharded LoRA parameters: its moments are sharded like them; clipping
  takes the norm over all shards. Each rank steps its own shard.
- **Checkpoints.** The served checkpoint (whole tensors, the one-process `Trainer`'s files) is loaded by
  every rank into its shards (each rank takes its own chunk: no communication). After the step every rank
  gathers each LoRA parameter and AdamW moment whole (`DTensor.full_tensor`, a collective), and rank 0
  writes them in exactly the one-process format (`Trainer._write_checkpoint`).
- **Activation checkpointing.** Each decoder layer keeps only its input for backward and recomputes the rest
  (transformers' gradient checkpointing, non-reentrant: it checkpoints the layer's `forward`, so FSDP2's
  gathers stay outside and are not repeated). Without it the model's own decoder (below) kept ~1.3 MB of
  activations per token on SmolLM2-135M: a rank holding one micro-batch of 3,000 tokens reached 9.1 GB
  (measured), where sharding the weights saves 260 MB; with it, 4.0 GB (a DDP rank, fast decoder: 6.9 GB).
  The recompute costs about one more forward per pass.
- **Fast paths off.** The fast decoder (`fast_decoder.py`, which reads and concatenates the projections'
  weights itself, outside any `forward`) is not built: the model's own decoder runs. LoRA stays plain
  peft LoRA layers (no folding); `_own_adapter` works unchanged (it only switches flags). `Trainer.logprobs`
  (the canary's reference) calls the model outside the root's `forward`: not for a sharded rank (ranks never
  run the canary: the service's own one-process trainer does).
- **Precision.** On a bf16/fp16 base, FSDP2's mixed precision gathers every parameter in the base dtype
  (the float32 LoRA parameters included, as `Trainer._compute` computes them anyway) and reduces gradients
  in float32; the sharded parameters and AdamW stay float32. Verified on CPU in float32 only (gloo).

When to use it (measured in benchmarks/bench_scale.py, docs/scale.md): when the base does not fit one
device. While it fits, DDP (`distributed_trainer.RankTrainer`, the default) moves only the adapter's
gradients once per step, where FSDP2 all-gathers the base's weights in every forward and backward of every
micro-batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from art.training.batching import plan_micro_batches
from art.training.checkpoint import optimizer_tensors
from art.training.distributed.ddp_trainer import RankTrainerBase
from art.training.logprobs import decoder_and_head, token_logprobs
from art.training.trainer import saved_adapter_names
from art.types import TrainSpec


class _Logprobs(torch.nn.Module):
    """The FSDP2 root: `token_logprobs` of the PEFT model as this module's forward (see the module docstring)."""

    def __init__(self, model: Any, native_bf16: bool) -> None:
        super().__init__()
        self.model = model
        self.native_bf16 = native_bf16

    def forward(self, *inputs_BT: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return token_logprobs(self.model, *inputs_BT, native_bf16=self.native_bf16)


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` whole on this rank: a DTensor gathered from every rank (a collective), else as it is."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def local_shard(full: torch.Tensor, like: DTensor) -> torch.Tensor:
    """This rank's chunk of `full`, placed as `like` is (no communication: every rank holds `full`)."""
    return distribute_tensor(
        full.to(device=like.device, dtype=like.dtype), like.device_mesh, like.placements, src_data_rank=None
    ).to_local()


class FsdpRankTrainer(RankTrainerBase):
    """`Trainer` on one rank of an initialised process group, the base and adapter sharded by FSDP2 across
    the ranks (see the module docstring)."""

    FAST_DECODER: ClassVar[bool] = False  # it reads whole weights outside forward: not with shards

    def _distribute(self, device: torch.device) -> None:
        """Shard the base and adapter across the ranks: each layer is moved to `device` (where the shards go)
        as it is sharded, so `model` may wait in host memory."""
        dtype = self.dtype
        mixed = dtype in (torch.bfloat16, torch.float16)
        policy = (
            MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
            if mixed
            else MixedPrecisionPolicy()
        )
        mesh = init_device_mesh(device.type, (self.world_size,))
        # activation checkpointing per decoder layer (transformers checkpoints each layer's `forward`, inside
        # FSDP2's hooks): see the module docstring
        self.model.get_base_model().activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False}
        )
        decoder, _, _ = decoder_and_head(self.model)
        self.root = _Logprobs(self.model, self.options.native_bf16)
        layers: Any = decoder.layers
        self.sharded: list[FSDPModule] = [fully_shard(layer, mesh=mesh, mp_policy=policy) for layer in layers]
        self.sharded.append(fully_shard(self.root, mesh=mesh, mp_policy=policy))  # the rest: the root's group
        for module in self.sharded:
            # the reduce-scatter sums (the step's gradient, not the mean over ranks), as a plain SUM: without
            # forcing it, a factor other than the ranks is NCCL's PREMUL_SUM, which gloo does not have
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
        # fully_shard replaced every parameter by a DTensor one: the optimizer must hold those
        names = self.param_names
        self.named_params = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        assert [n for n, _ in self.named_params] == names
        self.optimizer = self._new_optimizer()
        self._pad_ids_1T = torch.tensor([[self.pad_id, self.pad_id]], device=self.device)

    def _token_logprobs(self, *inputs_BT: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        result: tuple[torch.Tensor, torch.Tensor] = self.root(*inputs_BT)
        return result

    def _pad_share(self, shares: Any, spec: TrainSpec) -> None:
        passes = [
            len(plan_micro_batches([len(s) for s in share], spec.micro_batch_tokens)) for share in shares
        ]
        for _ in range(max(passes) - passes[self.rank]):
            self._zero_pass(spec)

    def _zero_pass(self, spec: TrainSpec) -> None:
        """The collectives of one micro-batch (forward, backward; the base-model forward with a KL penalty),
        adding nothing to the gradients."""
        ids_1T = self._pad_ids_1T
        inputs = (ids_1T, torch.ones_like(ids_1T), ids_1T, torch.ones_like(ids_1T, dtype=torch.bool))
        with self._own_adapter(train=True):
            if spec.kl_penalty_coef > 0:
                with torch.no_grad(), self.model.disable_adapter(), self._compute():
                    self._token_logprobs(*inputs)
            with self._compute():
                logprobs_1T, _ = self._token_logprobs(*inputs)
            (logprobs_1T.sum() * 0.0).backward()  # type: ignore[no-untyped-call]

    def _sync_gradients(self) -> None:
        """Nothing left: each backward reduce-scattered (summed) its gradients into every rank's shard."""

    def save_result(self, path: Path) -> None:
        """Every rank gathers the adapter and AdamW state whole; rank 0 writes them as `Trainer.save` does."""
        adapter = {name: whole(param.detach()) for name, param in self.named_params}
        state = {
            key: whole(value) for key, value in optimizer_tensors(self.optimizer, self.param_names).items()
        }
        if self.rank == 0:
            self._write_checkpoint(Path(path), adapter, state)

    def save(self, path: Path) -> None:
        """A collective (every rank gathers): the same as `save_result`."""
        self.save_result(path)

    def _set_adapter_weights(self, weights: dict[str, torch.Tensor]) -> None:
        params = dict(self.named_params)
        names = saved_adapter_names(self.model, self.param_names)
        assert names.keys() == weights.keys()  # `Trainer.load` checked the names
        with torch.no_grad():
            for key, name in names.items():
                param = params[name]
                assert isinstance(param, DTensor)  # fully_shard made every LoRA parameter a shard
                param.to_local().copy_(local_shard(weights[key], param))

    def _placed_optimizer_state(self) -> None:
        for param in self.optimizer.param_groups[0]["params"]:
            state = self.optimizer.state.get(param, {})
            for key, value in state.items():
                if (
                    isinstance(value, torch.Tensor)
                    and not isinstance(value, DTensor)
                    and value.shape == param.shape
                ):
                    state[key] = distribute_tensor(
                        value.to(param.device), param.device_mesh, param.placements, src_data_rank=None
                    )
