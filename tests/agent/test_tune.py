"""The tune tool through the real loop and harness session on the cpu target: variants judged in
one call, ranked, each verified one a candidate, a failing one a row of the table; the workspace
left holding the fastest. A call it cannot run changes nothing."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from agent.tune import MAX_VARIANTS, Variant, tune
from tests.agent.test_loop import write_all

LAUNCH = "kernel_ext.relu_scale_forward(x, self.scale)"


def variant(good: dict[str, str], name: str, call: str) -> dict:
    return {"name": name, "files": {"model_new.py": good["model_new.py"].replace(LAUNCH, call)}}


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # its profiles pass on a busy host too
def test_variants_are_ranked_recorded_and_the_fastest_is_kept(run_script, session, good_relu_scale):
    variants = [
        variant(
            good_relu_scale, "block=1024", "kernel_ext.relu_scale_forward(x, self.scale, 1024)"
        ),
        # known-bad beside them: twice the scale fails verify, and the call goes on
        variant(good_relu_scale, "wrong", "kernel_ext.relu_scale_forward(x, 2 * self.scale)"),
        variant(
            good_relu_scale, "block=65536", "kernel_ext.relu_scale_forward(x, self.scale, 65536)"
        ),
    ]
    run = run_script(
        [
            write_all(good_relu_scale),
            {"tool": "compile"},
            {"tool": "tune", "args": {"variants": variants}},
            {"tool": "finish", "args": {"summary": "tuned the block"}},
        ]
    )
    text = run.tool_texts()[-2]
    rows = {row.split(" | ")[1]: row for row in text.splitlines()[2:5]}
    assert "not timed" in rows["wrong"] and "mismatch" in rows["wrong"]
    table = run.of_kind("tool_result")[-2]["verdict"]["variants"]
    assert list(rows) == [row["name"] for row in table]  # the text's order is the verdict's
    assert {row["name"]: row["verified"] for row in table} == {
        "block=1024": True,
        "wrong": False,
        "block=65536": True,
    }
    # a profile a busy host held for its clock is a row "not timed" too: count what was timed
    timed = [row for row in table if row["timed"]]
    assert timed, text
    assert text.startswith(f"tune: {len(timed)} of 3 variants verified and timed; fastest "), text
    assert table[0] == timed[0] and f'fastest "{timed[0]["name"]}"' in text

    # each variant said on the run's status as it was judged, before the call's result
    events = run.events
    called = next(i for i, e in enumerate(events) if e["payload"].get("name") == "tune")
    answered = next(i for i in range(called, len(events)) if events[i]["kind"] == "tool_result")
    said = [e["payload"].get("detail") for e in events[called:answered] if e["kind"] == "status"]
    assert [line.split(";")[0] for line in said] == [
        f"tune: {n} of 3 variants judged" for n in (1, 2, 3)
    ]
    assert said[1].startswith("tune: 2 of 3 variants judged; wrong: not timed (")
    assert "mismatch" in said[1]

    result = run.result
    assert len(result.candidates) == 3 and len(run.of_kind("candidate")) == 3
    assert [c.verified for c in result.candidates] == [True, False, True]  # in the order judged
    kept = next(v for v in variants if v["name"] == timed[0]["name"])["files"]["model_new.py"]
    assert session.read_file("model_new.py") == kept
    assert result.best.sources["model_new.py"] == kept and result.best.timed
    fastest = max(c.speedup_vs_eager for c in result.candidates if c.timed)
    assert result.best.speedup_vs_eager == fastest == timed[0]["speedup_vs_eager"]
    # ranked on the session's screening, the kept one then measured in full, as a profile is
    assert not table[0]["screened"] and not result.best.profile.get("screened")


class ScreenedWorkspace:
    """A workspace whose screening flatters: each variant's speedup over eager, screened and in
    full, by the name its model_new.py holds (the tune policy alone, without a harness)."""

    SPEEDUPS = {"a": (2.0, 1.2), "b": (1.5, 1.4), "c": (1.0, 0.9)}

    def __init__(self):
        self.files = {"model_new.py": "a"}
        self.full_measurements: list[str] = []
        self._screening = False

    def list_files(self):
        return list(self.files)

    def read_file(self, path):
        return self.files[path]

    def write_file(self, path, content):
        self.files[path] = content

    def sources(self):
        return dict(self.files)

    @contextmanager
    def screening(self):
        self._screening = True
        try:
            yield
        finally:
            self._screening = False

    def verify(self):
        return {"ok": True}

    def profile(self):
        name = self.files["model_new.py"]
        screened, full = self.SPEEDUPS[name]
        if self._screening:
            return {"ok": True, "speedup_vs_eager": screened, "screened": True}
        self.full_measurements.append(name)
        return {"ok": True, "speedup_vs_eager": full}


def test_a_screening_that_flatters_is_measured_in_full_before_it_is_kept():
    """Known-bad: a ranks first on its screening (2.0x) and is 1.2x in full; b (1.5x screened)
    is then measured in full (1.4x) and kept. c, slower on its screening than both, never is."""
    workspace = ScreenedWorkspace()
    variants = [Variant(name, {"model_new.py": name}) for name in "abc"]

    ranked = tune(workspace, variants)

    assert workspace.full_measurements == ["a", "b"]
    assert [(v.name, v.screened) for v in ranked] == [("b", False), ("a", False), ("c", True)]
    assert workspace.files["model_new.py"] == "b"


@pytest.mark.parametrize(
    ("variants", "says"),
    [
        ([], "at least one variant"),
        ([{"files": {"kernels/new.cpp": "x"}}], "write it first with write_file"),
        ([{"name": "a", "files": {"model_new.py": "x"}}] * 2, "two variants are named 'a'"),
        ([{"files": {"model_new.py": "x"}}] * (MAX_VARIANTS + 1), f"at most {MAX_VARIANTS}"),
        (["model_new.py"], "must be an object"),
        ([{"files": {"model_new.py": 3}}], "whole new text"),
        ([{"files": {"model.py": "x"}}], "read-only"),
    ],
)
def test_a_call_it_cannot_run_changes_nothing(run_script, session, variants, says):
    before = {path: session.read_file(path) for path in session.list_files()}
    run = run_script([{"tool": "tune", "args": {"variants": variants}}, {"tool": "finish"}])
    assert run.tool_texts()[0].startswith("Error") and says in run.tool_texts()[0]
    assert {path: session.read_file(path) for path in session.list_files()} == before
    assert run.result.candidates == []


def test_variants_that_are_not_an_array_are_a_format_error(run_script):
    run = run_script([{"tool": "tune", "args": {"variants": "model_new.py"}}, {"tool": "finish"}])
    assert "tune: variants must be an array" in run.tool_texts()[0]
