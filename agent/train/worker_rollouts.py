"""A batch's rollouts on the site's GPU workers (`agent.train grpo --rollouts-on GPU_TYPE`): each
episode is a Celery task on that GPU type's run queue (gpu_workers/rollout.py), whose replies are
asked of this trainer's policy endpoint (policy_server.py), so the harness's work (compile,
verify, profile) spreads over every worker of the type while the policy stays in one process.
The trainer joins the site's broker as a `manage.py` command does (REDIS_URL, or the stack that
`make run` started in this checkout). Rollouts queue with the type's runs, in order."""

from __future__ import annotations

import time

from agent.train.episodes import Episode

# How long a batch's rollouts may take from their sending, their wait in the queue included
# (each result is kept for longer: webapp.celery.ROLLOUT_RESULT_KEPT_S).
WAIT_S = 4 * 3600


class NoRolloutWorkers(RuntimeError):
    """No worker takes the run queue the rollouts would go to."""


def run_episodes_on_workers(
    problems: list[dict], policy_url: str, gpu_type: str, max_turns: int
) -> list[Episode]:
    """One episode per problem, in order, each run by whichever worker takes it."""
    from webapp.celery import ROLLOUT_EPISODE, app, rollout_results
    from webapp.work_kinds import RUN

    queue, results = RUN.queue(gpu_type), rollout_results()
    sent = [
        app.send_task(ROLLOUT_EPISODE, args=[problem, policy_url, max_turns, gpu_type], queue=queue)
        for problem in problems
    ]
    sent = [app.AsyncResult(task.id, backend=results) for task in sent]
    episodes, deadline = [], time.monotonic() + WAIT_S
    for problem, result in zip(problems, sent, strict=True):
        try:
            left = max(1.0, deadline - time.monotonic())
            episodes.append(Episode.from_json(result.get(timeout=left)))
        except Exception as error:
            name = problem.get("name", "a problem")
            raise RuntimeError(f"the rollout of {name} on {queue} failed: {error!r}") from error
    return episodes


def check_workers(gpu_type: str) -> None:
    """Fails at once, naming the queue, where no worker would take the rollouts."""
    from webapp.celery import app
    from webapp.work_kinds import RUN

    queue = RUN.queue(gpu_type)
    answers = app.control.inspect(timeout=5.0).active_queues() or {}
    if not any(q["name"] == queue for queues in answers.values() for q in queues):
        raise NoRolloutWorkers(
            f"no worker takes {queue}: start the site's workers for that GPU type (make run, "
            "or celery -A webapp.celery worker -Q " + queue + ") with this trainer's REDIS_URL"
        )
