"""webapp.celery through the real broker: what a grade worker takes first from its queue."""

from __future__ import annotations

from webapp import celery
from webapp.work_kinds import GRADE

GPU = "ordertest"  # a GPU type of this test's own: no worker takes from its queue


def taken_in_order(count: int) -> list[tuple[str, list]]:
    """The next `count` tasks of the grade queue, as a worker would take them."""
    with celery.app.connection_for_read() as connection:
        queue = connection.SimpleQueue(GRADE.queue(GPU))
        try:
            messages = [queue.get(timeout=10) for _ in range(count)]
            for message in messages:
                message.ack()
        finally:
            queue.close()
    return [(m.headers["task"], m.payload[0]) for m in messages]


def test_a_regrade_is_taken_before_the_baselines_sent_ahead_of_it(redis_server):
    """A suite's baselines come by the hundred and a re-grade is what a board counts: it must not
    wait behind them. Known-bad beside it: the baselines among themselves keep the order they
    were sent in (the broker's priority is no shuffle)."""
    with celery.app.connection_for_write() as connection:
        connection.SimpleQueue(GRADE.queue(GPU)).clear()  # declared, and empty
    celery.send_baselines(1, GPU, 2)
    celery.send_baselines(2, GPU, 2)
    celery.send_regrade(7, GPU)

    assert taken_in_order(3) == [
        (celery.REGRADE_RUN, [7]),
        (celery.MEASURE_BASELINES, [1, 2]),
        (celery.MEASURE_BASELINES, [2, 2]),
    ]
