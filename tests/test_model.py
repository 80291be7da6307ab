"""Model and TrainableModel against a test double of the Backend protocol."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_choices import make_choice

import art


def model(tmp_path: Path, **kwargs: object) -> art.TrainableModel:
    return art.TrainableModel(
        name="agent-001", project="proj", base_model="tiny", base_path=str(tmp_path), **kwargs
    )  # type: ignore[arg-type]


def group(rewards: list[float], trainable: bool = True) -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        art.Trajectory(
            messages_and_choices=[
                {"role": "user", "content": "q"},
                make_choice() if trainable else {"role": "assistant", "content": "a"},
            ],
            reward=r,
            metrics={"win": r > 0.5},
        )
        for r in rewards
    )


def test_import_art_stays_light() -> None:
    code = (
        "import art, sys; "
        "heavy = [m for m in ('torch', 'transformers', 'fastapi', 'uvicorn', 'peft') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_register_is_idempotent_and_writes_model_json(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    await m.register(fake_backend)
    assert fake_backend.register_calls == 1
    record = json.loads(m.storage.model_json_path.read_text())
    assert record["base_model"] == "tiny" and record["trainable"] is True
    assert record["lora_config"]["r"] == 8
    # A second Model object for the same name and another backend instance: still harmless.
    again = model(tmp_path)
    await again.register(type(fake_backend)())
    assert json.loads(again.storage.model_json_path.read_text())["created_at"] == record["created_at"]
    assert m.get_inference_name() == "agent-001@0"
    assert m.get_inference_name(step=3) == "agent-001@3"
    client = m.openai_client()
    assert str(client.base_url).startswith("http://127.0.0.1:9/v1")


async def test_register_refuses_a_different_base_model_under_the_same_name(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    await model(tmp_path).register(fake_backend)
    other = art.TrainableModel(name="agent-001", project="proj", base_model="other", base_path=str(tmp_path))
    with pytest.raises(ValueError, match=r"already registered .* base_model='tiny'"):
        await other.register(type(fake_backend)())


def test_openai_client_needs_an_endpoint(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="register"):
        model(tmp_path).openai_client()
    plain = art.Model(
        name="gpt", project="p", inference_base_url="http://127.0.0.1:1/v1", inference_model_name="gpt-x"
    )
    assert plain.get_inference_name() == "gpt-x"
    assert str(plain.openai_client().base_url).startswith("http://127.0.0.1:1/v1")


async def test_train_delegates_and_logs_the_step(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    result = await m.train(
        [group([0.0, 1.0])], config=art.TrainConfig(learning_rate=1e-4), _config={"loss_fn": "ppo"}
    )
    assert result.step == 1 and await m.get_step() == 1
    spec = fake_backend.train_calls[0]["spec"]
    assert spec.learning_rate == 1e-4 and spec.loss_fn == "ppo"
    assert m.get_inference_name() == "agent-001@1"
    history = m.history()
    assert history[-1]["step"] == 1
    assert history[-1]["loss/train"] == 0.5
    assert history[-1]["train/reward"] == 0.5
    assert history[-1]["train/win"] == 0.5
    assert len(m.storage.read_groups("train", 1)[0].trajectories) == 2


async def test_backend_train_api_with_explicit_log(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    groups = [group([0.0, 1.0])]
    result = await fake_backend.train(m, groups, learning_rate=1e-5, loss_fn="cispo")
    await m.log(groups, metrics=result.metrics, step=result.step, split="train")
    assert m.history()[-1]["loss/train"] == 0.5
    with pytest.raises(TypeError, match=r"unknown training option.*'lr'"):
        await fake_backend.train(m, groups, lr=1e-5)
    with pytest.raises(ValueError, match="learning_rate"):
        await fake_backend.train(m, groups, learning_rate=-1)


async def test_failed_training_still_keeps_the_trajectories(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    fake_backend.fail_next_train = True
    with pytest.raises(RuntimeError, match="trainer crashed"):
        await m.train([group([0.0, 1.0])])
    assert len(m.storage.read_groups("train", 0)) == 1


async def test_untrainable_group_is_named_with_the_fix(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    g = group([0.0, 1.0], trainable=False)
    g.metadata["scenario"] = "s1"
    with pytest.warns(
        UserWarning,
        match=r"group 0 \(metadata \{'scenario': 's1'\}\) has no trainable turn.*response.choices\[0\]",
    ):
        await m.train([g])


async def test_log_refuses_bad_trajectories_before_writing_anything(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    good = group([1.0])
    bad = group([0.0])
    bad.trajectories[0].messages_and_choices.append({"role": "narrator", "content": "x"})
    with pytest.raises(ValueError, match=r"group 1, trajectory 0: .*unknown role 'narrator'"):
        await m.log([good, bad])
    assert m.history() == []
    assert m.storage.read_groups("val", 0) == []
    await m.log([good], metrics={"custom": 2.0, "other/thing": 1.0, "reward/best": 3.0})
    row = m.history()[-1]  # the reference's routing: known sections kept, anything else under the split
    assert row["val/custom"] == 2.0 and row["val/other/thing"] == 1.0 and row["reward/best"] == 3.0


async def test_delete_checkpoints_keeps_latest_and_best(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    m = model(tmp_path)
    await m.register(fake_backend)
    for reward in (0.2, 0.9, 0.4, 0.1):
        await m.train([group([0.0, 1.0])])
        await m.log(metrics={"reward": reward})  # val at the new step
    assert m.storage.checkpoint_steps() == [0, 1, 2, 3, 4]
    kept = await m.delete_checkpoints("val/reward")
    assert kept == [2, 4]
    assert m.storage.checkpoint_steps() == [2, 4]
    # Without the metric the best step is unknown: say so, keep the latest and go on (the reference's way).
    with pytest.warns(
        UserWarning, match=r"no logged value of 'val/nope'.*keeping only the latest \(step 4\)"
    ):
        kept = await m.delete_checkpoints("val/nope")
    assert kept == [4]
    assert m.storage.checkpoint_steps() == [4]


def test_state_is_kept_in_the_model_folder_and_merges_deeply(tmp_path: Path) -> None:
    """The reference's `read_state`/`overwrite_state`/`merge_state`: a resumable script's own bookkeeping."""
    m = model(tmp_path)
    assert m.read_state() is None
    m.overwrite_state({"dataset_offset": 100, "progress": {"epoch": 1, "batch": 7}})
    merged = m.merge_state({"progress": {"batch": 8}, "best_step": 3})
    assert merged == {"dataset_offset": 100, "progress": {"epoch": 1, "batch": 8}, "best_step": 3}
    # A new Model object for the same name (a restarted script) reads what was saved, from state.json.
    assert model(tmp_path).read_state() == merged
    assert json.loads((tmp_path / "proj" / "models" / "agent-001" / "state.json").read_text()) == merged
    m.overwrite_state({"fresh": True})
    assert m.read_state() == {"fresh": True}
    with pytest.warns(DeprecationWarning, match="overwrite_state"):
        m.write_state({"old": 1})
    assert m.read_state() == {"old": 1}


def test_state_that_json_cannot_hold_is_refused_and_the_saved_state_kept(tmp_path: Path) -> None:
    m = model(tmp_path)
    m.overwrite_state({"kept": 1})
    with pytest.raises(TypeError, match="JSON values only"):
        m.overwrite_state({"when": object()})
    with pytest.raises(TypeError, match="JSON values only"):
        m.merge_state({"loss": float("nan")})
    with pytest.raises(TypeError, match="must be a dict"):
        m.overwrite_state([1, 2])  # type: ignore[arg-type]
    assert m.read_state() == {"kept": 1}


def test_safe_model_dump_leaves_out_a_config_json_cannot_hold(tmp_path: Path) -> None:
    m = model(tmp_path, config=object())
    dumped = m.safe_model_dump(mode="json")
    assert dumped["config"] is None and dumped["name"] == "agent-001" and dumped["base_model"] == "tiny"
    json.dumps(dumped)
    with pytest.raises(Exception, match="Unable to serialize"):  # what it spares the caller
        m.model_dump(mode="json")
    assert "base_model" not in m.safe_model_dump(exclude={"base_model"})


async def test_id_and_run_id_are_accepted_kept_and_change_nothing_here(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    # The reference's serverless backend sets them; code that passes them must run unchanged.
    m = model(tmp_path, id="mdl_123", run_id="run_456")
    assert (m.id, m.run_id) == ("mdl_123", "run_456")
    dumped = m.model_dump()
    assert dumped["id"] == "mdl_123" and dumped["run_id"] == "run_456"
    assert m.safe_model_dump(mode="json")["run_id"] == "run_456"
    again = art.TrainableModel.model_validate(dumped)
    assert (again.id, again.run_id) == ("mdl_123", "run_456")
    prompted = art.Model(name="judge", project="proj", id="x", run_id="y", base_path=str(tmp_path))
    assert (prompted.id, prompted.run_id) == ("x", "y")
    assert art.Model(name="judge", project="proj").model_dump()["id"] is None
    await m.register(fake_backend)  # no effect on where the record lives or what model.json says
    record = json.loads(m.storage.model_json_path.read_text())
    assert "id" not in record and "run_id" not in record
    assert m.get_inference_name() == "agent-001@0"


def test_model_talks_to_its_backend_through_the_protocol_only() -> None:
    """Every attribute `art.model` reads of a backend is a member of `art.Backend`, and no `getattr` looks
    for one that might not be there (issue 54 item 4)."""
    import ast
    import inspect

    import art.model

    tree = ast.parse(inspect.getsource(art.model))
    members = {n for n in vars(art.Backend) if not n.startswith("__")}

    def is_backend(node: ast.expr) -> bool:
        text = ast.unparse(node)
        return text in ("backend", "self._backend", "self.backend()", "self._backend_or_none")

    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and is_backend(n.value)}
    assert used, "the walk found no backend call"
    assert used <= members, sorted(used - members)
    probing = [
        ast.unparse(n)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and ast.unparse(n.func) == "getattr"
        and "backend" in ast.unparse(n.args[0])
    ]
    assert probing == []


async def test_an_object_that_is_not_a_backend_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    class HalfBackend:
        async def register(self, model: art.Model) -> art.Registration:
            raise AssertionError("not reached")

    model = art.TrainableModel(name="m", project="p", base_model="x", base_path=str(tmp_path))
    with pytest.raises(TypeError, match=r"HalfBackend is not an art.Backend: it lacks .*check_model.*train"):
        await model.register(HalfBackend())  # type: ignore[arg-type]
    assert not model.storage.root.exists()  # refused before anything was written


async def test_a_backend_written_for_the_reference_trains_sft_through_its_hooks(
    tmp_path: Path,
    fake_backend,  # type: ignore[no-untyped-def]
) -> None:
    """The reference's Model asks a backend `_get_step` and iterates its `_train_sft` (batch metrics): a
    backend that overrides only those is followed, its batches averaged and logged once at its step; ART's
    backends answer both by default from `get_step` and `train_sft`, whose whole result is kept."""
    from collections.abc import AsyncIterator

    class ReferenceStyle(type(fake_backend)):  # type: ignore[misc]
        async def _get_step(self, model: art.TrainableModel) -> int:
            return 7

        async def _train_sft(  # type: ignore[override]
            self,
            model: art.TrainableModel,
            trajectories: object,
            config: object,
            _config: object,
            verbose: bool,
        ) -> AsyncIterator[dict[str, float]]:
            for loss in (1.0, 0.5):
                yield {"loss/train": loss}

    model = art.TrainableModel(name="m", project="p", base_model="x", base_path=str(tmp_path))
    await model.register(ReferenceStyle())
    assert await model.get_step() == 7
    result = await model.train_sft([])
    assert result.step == 7 and result.batch_metrics == [{"loss/train": 1.0}, {"loss/train": 0.5}]
    (row,) = model.history()
    assert row["step"] == 7 and row["loss/train"] == 0.75 and row["time/step_trainer_s"] >= 0

    other = art.TrainableModel(name="n", project="p", base_model="x", base_path=str(tmp_path))
    await other.register(fake_backend)
    sample = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    )
    done = await other.train_sft([sample])  # ours: the backend's own TrainSFTResult, as train_sft returned it
    assert done.step == 1 and done.metrics == {"loss/train": 0.5} and done.batch_metrics == [{"loss": 0.5}]
    await other.train_sft([sample], art.TrainSFTConfig(assistant_turns="last"))  # 0.5.23's field, passed on
    assert fake_backend.sft_calls[-1]["spec"].assistant_turns == "last"
    assert fake_backend.sft_calls[0]["spec"].assistant_turns == "all"


async def test_the_newest_reference_names_run_name_and_exact_adapter_lease(tmp_path: Path) -> None:
    """openpipe-art 0.5.23 requires `run_name=` (kept here; a different one is warned about, since `name`
    names the record here) and leases a step with `exact_adapter_lease` (here `adapter_lease`)."""
    from art.backends.local import LocalBackend

    model = art.TrainableModel(name="m", run_name="m", project="p", base_model="x", base_path=str(tmp_path))
    assert model.run_name == "m" and model.storage.root.name == "m"
    with pytest.warns(UserWarning, match="run_name='r' is kept but has no effect here"):
        art.TrainableModel(name="m", run_name="r", project="p", base_model="x")
    backend = LocalBackend(path=str(tmp_path))
    async with backend.exact_adapter_lease(model, 3):
        assert model.get_inference_name() == "m@3"
    assert model.get_inference_name() != "m@3"
