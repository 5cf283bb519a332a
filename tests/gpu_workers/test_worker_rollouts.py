"""GRPO's rollouts on the site's workers (agent/train/worker_rollouts.py): each episode is a
Celery task that a real worker of the GPU type's run queue takes and runs through its own loop
and sandboxed harness (gpu_workers/rollout.py), asking the trainer's policy endpoint
(policy_server.py) for each reply; the episodes come back in order, as the trainer's own threads
would make them. Then two GRPO steps of a tiny random-weight model whose rollouts all ran on the
worker. Known-bad beside them: a GPU type no worker takes fails at once, naming the queue."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("gpu_workers.harness.session")

from agent.reward import FAILURE  # noqa: E402
from agent.train import __main__ as train_command  # noqa: E402
from agent.train import grpo, worker_rollouts  # noqa: E402
from agent.train.policy_server import PolicyServer  # noqa: E402
from tests.agent import served_model as serving  # noqa: E402
from tests.agent.test_policy_server import DemoPolicy  # noqa: E402
from tests.webapp.live_stack import CPU_QUEUES, DEMO_SCRIPT, LiveStack  # noqa: E402
from tests.webapp.live_stack import REPO as ROOT  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
RELU_SCALE = {
    "name": "relu_scale",
    "source": (ROOT / "tests/fixtures/problems/relu_scale.py").read_text(),
}


@pytest.fixture(scope="module")
def rollout_worker(redis_server, django_db_setup, tmp_path_factory):
    """A worker of the cpu run queue, as `make run` starts one, once it answers (one for the
    file: it starts in 10-20 s, and rollouts leave nothing behind in the database). After
    django_db_setup, so that it opens the test database."""
    import redis

    redis.Redis.from_url(redis_server).delete(*CPU_QUEUES)
    stack = LiveStack(tmp_path_factory.mktemp("rollout-worker"))
    stack.start_worker("rollouts", ("run",))
    stack.wait_for(lambda: _taken("cpu"), 120, "the worker to take gpu.cpu.run")
    yield stack
    stack.stop()


def _taken(gpu_type: str) -> bool:
    try:
        worker_rollouts.check_workers(gpu_type)
    except worker_rollouts.NoRolloutWorkers:
        return False
    return True


def test_a_batch_s_episodes_run_on_a_worker_and_come_back_in_order(rollout_worker):
    demo = json.loads(DEMO_SCRIPT.read_text())
    batch = [RELU_SCALE, {**RELU_SCALE, "name": "again"}]
    with PolicyServer(DemoPolicy(demo)) as server:
        done = worker_rollouts.run_episodes_on_workers(batch, server.url, "cpu", max_turns=10)
    assert [e.record["problem"]["name"] for e in done] == ["relu_scale", "again"], (
        rollout_worker.logs()
    )
    for episode in done:
        assert not episode.harness_failed and episode.record["status"] == "finished"
        assert episode.reward >= 1  # the demo's kernel verified, judged by the worker's harness
        calls = [
            call["function"]["name"]
            for message in episode.record["messages"]
            for call in message.get("tool_calls") or []
        ]
        assert calls[:5] == ["list_files", "write_file", "write_file", "write_file", "compile"]


def test_grpo_steps_whose_rollouts_ran_on_the_worker(rollout_worker, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(RELU_SCALE) + "\n")
    plan = grpo.GrpoPlan(
        base=str(serving.build_tiny_model(tmp_path / "tiny")),
        problems=str(problems),
        output=str(tmp_path / "policy"),
        served_by="transformers",
        max_turns=1,
        max_new_tokens=24,
        num_generations=2,
        steps=2,
        learning_rate=1e-4,
        rollouts_on="cpu",
    )
    log = rollout_worker.folder / "rollouts.log"
    before = len(log.read_text().splitlines())
    summary = grpo.train(plan)
    assert summary["steps"] == 2 and summary["rollouts"] == 4
    # a random model writes no tool call: every episode ended with no candidate, reward -1
    assert summary["rewards"] == [FAILURE] * 4 and summary["harness_failures"] == 0
    lines = log.read_text().splitlines()[before:]
    ran = [line for line in lines if "rollout_episode[" in line and "succeeded" in line]
    assert len(ran) == 4, rollout_worker.logs()  # every one ran on the worker


def test_a_gpu_type_no_worker_takes_stops_the_command_at_once(redis_server, tmp_path, capsys):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(RELU_SCALE) + "\n")
    argv = ["grpo", "--base", str(tmp_path / "never-loaded"), "--problems", str(problems)]
    argv += ["--output", str(tmp_path / "out"), "--rollouts-on", "h100"]

    assert train_command.main(argv) == 2

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("agent.train grpo: no worker takes gpu.h100.run: start the site's")
