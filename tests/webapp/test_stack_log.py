"""`make run`'s log: a file per stack, the newest kept, the oldest removed as a stack starts."""

from __future__ import annotations

from webapp.stack_log import KEPT, StackLog


def test_a_starting_stack_keeps_the_newest_logs_and_its_own(tmp_path):
    older = [tmp_path / f"stack-20260101-0000{n:02d}-1.log" for n in range(KEPT + 5)]
    for path in older:
        path.write_text("a stack that stopped\n")
    (tmp_path / "notes.txt").write_text("not a stack's log")

    log = StackLog.open(tmp_path)
    log.write("started")
    log.file.close()

    kept = sorted(tmp_path.glob("stack-*.log"))
    assert len(kept) == KEPT and log.path in kept
    assert kept[0] == older[-(KEPT - 1)]  # the oldest went first
    assert (tmp_path / "notes.txt").exists()
    assert log.path.read_text().endswith("] started\n")
