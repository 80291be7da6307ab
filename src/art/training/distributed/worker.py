"""What one trainer rank runs, in whatever process holds it: a local subprocess (`ranks.LocalRanks`) or a
Ray actor (`art.cluster.ray_ranks`).

`RankWorker(setup).start()` joins the process group (gloo on CPUs, NCCL on GPUs), loads the base model on
its device and builds its trainer: `RankTrainer` (DDP) or, with `RuntimeOptions.train_sharding="fsdp2"`,
`fsdp_trainer.FsdpRankTrainer`. Each `train_step(RankStep)` loads the checkpoint the service serves
(adapter, AdamW state, trainer state: the ranks keep nothing between steps, so a rolled-back step, a
supervised step taken in the service, or restarted ranks all start from what is served), trains the step
with the other ranks, and rank 0 saves the result where the service reads it (`out_dir`).

`rank_process_main` is the loop of a local rank process (`python -m art.training.distributed.rank_main FD`, FD
its end of a socket pair; the first message is its `RankSetup`): the first reply "ready" (or
"error" with the traceback), then one "done" (or "error") per step, "progress" from rank 0 as micro-batches
finish. A rank that fails reports and exits: after a failed collective its process group cannot be trusted,
so the supervisor restarts every rank.
"""

from __future__ import annotations

import datetime
import os
import socket
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from art.base_model.loader import choose_dtype, load_model_and_tokenizer
from art.chat.chat_template import ChatTemplate
from art.training.distributed.ddp_trainer import RankTrainer, RankTrainerBase
from art.training.distributed.rank_messages import RankInfo, RankSetup, RankStep
from art.training.trainer import MicroBatchCallback, StepReport


class RankWorker:
    """One rank: its process group membership and its `RankTrainer` (see the module docstring)."""

    def __init__(self, setup: RankSetup) -> None:
        self.setup = setup
        self.trainer: RankTrainerBase | None = None

    def start(self) -> RankInfo:
        """Join the process group, load the model, build the trainer; who this rank is."""
        s, t = self.setup, self.setup.template
        if t.threads:
            torch.set_num_threads(t.threads)
        if s.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(s.device))
        dist.init_process_group(
            s.backend,
            init_method=f"tcp://{s.master_addr}:{s.master_port}",
            rank=s.rank,
            world_size=s.world_size,
            timeout=datetime.timedelta(seconds=s.timeout_s),
        )
        fsdp = t.options.train_sharding == "fsdp2"
        # FSDP2: the base is loaded into host memory and `fully_shard` moves one layer at a time to the device,
        # keeping only this rank's shard there (a base too big for one device never sits whole on one)
        model, tokenizer = load_model_and_tokenizer(
            t.base_model, dtype=choose_dtype(t.dtype, s.device), device="cpu" if fsdp else s.device
        )
        if t.chat_template is not None:
            tokenizer.chat_template = t.chat_template
        template = ChatTemplate(tokenizer)
        if fsdp:
            from art.training.distributed.fsdp_trainer import FsdpRankTrainer

            self.trainer = FsdpRankTrainer(
                model, template, t.lora, seed=t.options.seed, options=t.options, device=torch.device(s.device)
            )
        else:
            self.trainer = RankTrainer(model, template, t.lora, seed=t.options.seed, options=t.options)
        held = self.trainer.param_bytes()
        return RankInfo(
            rank=s.rank,
            pid=os.getpid(),
            host=socket.gethostname(),
            device=s.device,
            extra={"sharding": t.options.train_sharding, **held},
        )

    def train_step(
        self, step: RankStep, on_micro_batch: MicroBatchCallback | None = None
    ) -> StepReport | None:
        """Train one step from the served state; rank 0 saves the result and returns its report."""
        assert self.trainer is not None, "start() first"
        self.trainer.load(Path(step.state_dir))
        report = self.trainer.train_step(
            step.groups,
            step.spec,
            current_step=step.current_step,
            progress=False,
            on_micro_batch=on_micro_batch,
        )
        self.trainer.save_result(Path(step.out_dir))  # FSDP2: every rank gathers the shards
        return report if self.setup.rank == 0 else None

    def close(self) -> None:
        """Leave the process group."""
        if dist.is_initialized():
            dist.destroy_process_group()


def rank_process_main(conn: Any, setup: RankSetup) -> None:
    """The loop of one local rank process (see the module docstring); `conn` is its end of a pipe."""
    worker = RankWorker(setup)
    try:
        conn.send(("ready", worker.start()))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    lead = setup.rank == 0

    def progress(done: int, total: int, loss: float) -> None:
        conn.send(("progress", (done, total, loss)))

    while True:
        try:
            kind, payload = conn.recv()
        except EOFError:  # the service is gone
            break
        if kind == "stop":
            break
        try:
            conn.send(("done", worker.train_step(payload, progress if lead else None)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
            break  # the process group may be broken: the supervisor restarts every rank
    worker.close()
