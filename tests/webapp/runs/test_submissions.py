"""A person's own kernel: POST /api/problems/{id}/submissions and the problem page's "Submit your
own kernel" form. Accepted files become a queued run of kind `submission` holding them; each
refusal says what to fix, before any run exists."""

from __future__ import annotations

import html
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.conftest import candidate_dir
from tests.webapp.conftest import api_client, make_problem
from webapp import dispatch
from webapp.runs import lifecycle
from webapp.runs.models import Run, RunKind, RunStatus
from webapp.runs.submission import MAX_FILES

BIG = 512 * 1024 + 1  # one byte over workspace_paths.MAX_FILE_BYTES


def good_files() -> dict[str, str]:
    """tests/fixtures/candidates/cpu/good_relu_scale, as workspace path -> text."""
    root = candidate_dir("cpu", "good_relu_scale")
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def run_hook(monkeypatch):
    queued: list[tuple[int, str]] = []
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *args: queued.append(args))
    return queued


def submit(client: Client, problem_id: int, files: dict, **options):
    body = {"files": files, "gpu_type": "cpu", **options}
    return client.post(
        f"/api/problems/{problem_id}/submissions", json.dumps(body), content_type="application/json"
    )


def refused(response, status: int) -> str:
    assert response.status_code == status, response.content
    assert not Run.objects.exists()
    return response.json()["detail"]


# ---- API: accepted ------------------------------------------------------------------------


def test_it_queues_a_submission_with_its_files_after_commit(
    alice, relu_scale, run_hook, django_capture_on_commit_callbacks
):
    problem = make_problem(alice, relu_scale)
    files = good_files()
    with django_capture_on_commit_callbacks(execute=True):
        r = submit(api_client(alice), problem.pk, files, protocol="fp32-strict")

    assert r.status_code == 201, r.json()
    body = r.json()
    assert (body["status"], body["owner"], body["agent"]) == ("queued", "alice", "submission")
    assert (body["problem_id"], body["gpu_type"], body["protocol"]) == (
        problem.pk,
        "cpu",
        "fp32-strict",
    )
    run = Run.objects.get()
    assert (run.pk, run.kind, run.owner, run.status) == (
        body["id"],
        RunKind.SUBMISSION,
        alice,
        RunStatus.QUEUED,
    )
    assert run.submitted_sources == files
    assert run_hook == [(run.pk, "cpu")]


def test_it_stores_normalised_paths(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    files = {"./model_new.py": "class ModelNew: ...\n", "kernels//op.cpp": "// op\n"}
    r = submit(api_client(alice), problem.pk, files)
    assert r.status_code == 201, r.json()
    assert Run.objects.get().submitted_sources == {
        "model_new.py": "class ModelNew: ...\n",
        "kernels/op.cpp": "// op\n",
    }


def test_it_takes_cuda_files_on_a_gpu_type(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks
):
    settings.GPU_TYPES = ["cpu", "h100"]
    problem = make_problem(alice, relu_scale)
    files = {"model_new.py": "x = 1\n", "kernels/op.cu": "// op\n", "kernels/op.cuh": "\n"}
    with django_capture_on_commit_callbacks(execute=True):
        r = submit(api_client(alice), problem.pk, files, gpu_type="h100")
    assert r.status_code == 201, r.json()
    assert sorted(Run.objects.get().submitted_sources) == [
        "kernels/op.cu",
        "kernels/op.cuh",
        "model_new.py",
    ]
    assert run_hook == [(r.json()["id"], "h100")]


def test_it_takes_someone_elses_public_problem(alice, bob, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale, public=True)
    r = submit(api_client(bob), problem.pk, good_files())
    assert r.status_code == 201, r.json()
    assert Run.objects.get().owner == bob


# ---- API: refused, saying what to fix -----------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda f: f.pop("model_new.py"),
            "model_new.py is missing: it defines ModelNew",
        ),
        (
            lambda f: f.update({"../x.cu": "// x\n"}),
            "'../x.cu' is outside the workspace",
        ),
        (
            lambda f: f.update({"kernels/../../x.cpp": "// x\n"}),
            "'kernels/../../x.cpp' is outside the workspace",
        ),
        (
            lambda f: f.update({"/etc/x.cpp": "// x\n"}),
            "'/etc/x.cpp' is outside the workspace",
        ),
        (
            # .cu is for CUDA GPU types; the cpu target builds .cpp only.
            lambda f: f.update({"kernels/relu.cu": "// x\n"}),
            "'kernels/relu.cu' cannot be written: only model_new.py and "
            "kernels/<name>{.cpp,.h,.hpp}",
        ),
        (
            lambda f: f.update({"kernels/relu.py": "x = 1\n"}),
            "'kernels/relu.py' cannot be written",
        ),
        (
            lambda f: f.update({"kernels/sub/relu.cpp": "// x\n"}),
            "'kernels/sub/relu.cpp' cannot be written",
        ),
        (
            lambda f: f.update({"model.py": "x = 1\n"}),
            "model.py is read-only: write model_new.py and files in kernels/",
        ),
        (
            lambda f: f.update({"binding.cpp": "// x\n"}),
            "binding.cpp is read-only",
        ),
        (
            lambda f: f.update({"kernels/big.cpp": "/" * BIG}),
            "kernels/big.cpp is 524,289 bytes; a file may be at most 524,288 bytes (512 KiB)",
        ),
        (
            lambda f: f.update({"kernels/nul.cpp": "int x;\x00"}),
            "kernels/nul.cpp contains a NUL character (line 1): source files are text, not binary",
        ),
        (
            lambda f: f.update({"kernels/half.cpp": "// \ud800\n"}),  # a lone surrogate
            "kernels/half.cpp is not valid UTF-8 text",
        ),
        (
            lambda f: f.update({"kernels/relu_scale.cpp/": "// x\n"}),  # same file, twice
            "kernels/relu_scale.cpp is given twice: send each file once",
        ),
    ],
    ids=[
        "missing model_new.py",
        "path escaping",
        "escaping through kernels/",
        "absolute path",
        "bad suffix",
        "python kernel",
        "nested folder",
        "read-only model.py",
        "read-only binding.cpp",
        "oversized file",
        "binary file",
        "not UTF-8",
        "duplicate path",
    ],
)
def test_it_refuses_files_saying_what_to_fix(alice, relu_scale, run_hook, change, message):
    problem = make_problem(alice, relu_scale)
    files = good_files()
    change(files)
    detail = refused(submit(api_client(alice), problem.pk, files), 422)
    assert message in detail
    assert run_hook == []


def test_it_names_every_file_at_fault_at_once(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    files = {"model.py": "x\n", "../x.cpp": "x\n", "kernels/ok.cpp": "// fine\n"}
    detail = refused(submit(api_client(alice), problem.pk, files), 422)
    parts = detail.split("; ")
    assert parts[0].startswith("model_new.py is missing")
    assert any(p.startswith("model.py is read-only") for p in parts)
    assert any("'../x.cpp' is outside the workspace" in p for p in parts)
    assert "ok.cpp" not in detail


def test_it_refuses_more_files_than_the_limit(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    files = {"model_new.py": "x = 1\n"} | {f"kernels/k{i}.cpp": "//\n" for i in range(MAX_FILES)}
    detail = refused(submit(api_client(alice), problem.pk, files), 422)
    assert f"{MAX_FILES + 1} files: a submission may have at most {MAX_FILES}" in detail


def test_it_refuses_an_empty_submission(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    detail = refused(submit(api_client(alice), problem.pk, {}), 422)
    assert "no files: send model_new.py" in detail


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gpu_type": "tpu"}, "unknown GPU type 'tpu': use one of cpu"),
        ({"protocol": "lax"}, "unknown protocol 'lax': use one of loose, fp32-strict"),
    ],
)
def test_it_lists_the_known_options(alice, relu_scale, run_hook, options, message):
    problem = make_problem(alice, relu_scale)
    detail = refused(submit(api_client(alice), problem.pk, good_files(), **options), 422)
    assert message in detail


def test_it_refuses_a_problem_not_yet_valid(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale, valid=False)
    detail = refused(submit(api_client(alice), problem.pk, good_files()), 409)
    assert f"problem {problem.pk} is pending, not valid" in detail


def test_it_hides_someone_elses_private_problem(alice, charlie, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    detail = refused(submit(api_client(charlie), problem.pk, good_files()), 404)
    assert detail == f"no problem {problem.pk} that you can see"
    detail = refused(submit(api_client(charlie), problem.pk + 1000, good_files()), 404)
    assert "that you can see" in detail


def test_it_asks_who_you_are(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale, public=True)
    detail = refused(submit(Client(), problem.pk, good_files()), 401)
    assert detail.startswith("not signed in")


def test_it_counts_submissions_against_the_hourly_limit(alice, relu_scale, run_hook, settings):
    settings.RUNS_PER_HOUR = 2
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)
    lifecycle.start_run(alice, problem, "scripted-demo", "cpu", "loose")  # an agent run counts
    assert submit(client, problem.pk, good_files()).status_code == 201

    r = submit(client, problem.pk, good_files())

    assert r.status_code == 429
    assert "you started 2 runs in the last hour and the limit is 2" in r.json()["detail"]
    assert Run.objects.filter(kind=RunKind.SUBMISSION).count() == 1


# ---- the page -----------------------------------------------------------------------------


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload(name: str, text: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode() if isinstance(text, str) else text)


def good_uploads() -> tuple[SimpleUploadedFile, list[SimpleUploadedFile]]:
    files = good_files()
    kernels = [upload(path.removeprefix("kernels/"), text) for path, text in files.items()]
    model_new = kernels.pop([k.name for k in kernels].index("model_new.py"))
    return model_new, kernels


def post_form(client: Client, problem_id: int, model_new=None, kernels=(), **options):
    body = {"submit-gpu_type": "cpu", "submit-protocol": "loose"}
    body.update({f"submit-{key}": value for key, value in options.items()})
    if model_new is not None:
        body["submit-model_new"] = model_new
    if kernels:
        body["submit-kernels"] = list(kernels)
    return client.post(f"/problems/{problem_id}/submit", body)


def page_refusal(response, status: int) -> str:
    assert response.status_code == status
    assert not Run.objects.exists()
    page = html.unescape(response.content.decode())
    assert 'id="submit"' in page  # the form is shown again, with the message
    return page


def test_the_page_offers_the_form_to_people_logged_in(alice, bob, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    page = logged_in(bob).get(f"/problems/{problem.pk}/").content.decode()
    assert "Submit your own kernel" in page
    assert f'action="/problems/{problem.pk}/submit"' in page
    assert 'enctype="multipart/form-data"' in page
    assert 'name="submit-model_new"' in page
    assert 'name="submit-kernels"' in page and "multiple" in page
    assert 'name="submit-gpu_type"' in page and 'name="submit-protocol"' in page

    anonymous = Client().get(f"/problems/{problem.pk}/").content.decode()
    assert "to submit your own kernel" in anonymous
    assert "submit-model_new" not in anonymous


def test_the_page_disables_the_form_until_the_problem_is_valid(alice, relu_scale):
    problem = make_problem(alice, relu_scale, valid=False)
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert "A kernel can be submitted once validation has passed." in page


def test_the_page_queues_uploaded_files_and_shows_the_run(
    alice, relu_scale, run_hook, django_capture_on_commit_callbacks
):
    problem = make_problem(alice, relu_scale)
    model_new, kernels = good_uploads()

    with django_capture_on_commit_callbacks(execute=True):
        r = post_form(logged_in(alice), problem.pk, model_new, kernels)

    run = Run.objects.get()
    assert r.status_code == 302 and r.url == f"/runs/{run.pk}/"
    assert (run.kind, run.agent, run.owner, run.gpu_type, run.protocol) == (
        RunKind.SUBMISSION,
        "submission",
        alice,
        "cpu",
        "loose",
    )
    assert run.submitted_sources == good_files()
    assert run_hook == [(run.pk, "cpu")]


def test_the_page_places_files_by_name(alice, relu_scale, run_hook):
    # model_new.py chosen among the kernel files still lands at model_new.py; a name with a
    # folder in it keeps only its last part (Django strips it), so it cannot leave kernels/.
    problem = make_problem(alice, relu_scale)
    kernels = [upload("model_new.py", "x = 1\n"), upload("../../evil.cpp", "// e\n")]
    r = post_form(logged_in(alice), problem.pk, kernels=kernels)
    assert r.status_code == 302
    assert Run.objects.get().submitted_sources == {
        "model_new.py": "x = 1\n",
        "kernels/evil.cpp": "// e\n",
    }


@pytest.mark.parametrize(
    ("model_new", "kernels", "message"),
    [
        (None, [upload("relu.cpp", "// r\n")], "model_new.py is missing"),
        (
            upload("model_new.py", "x = 1\n"),
            [upload("relu.cu", "// r\n")],
            "'kernels/relu.cu' cannot be written: only model_new.py and "
            "kernels/<name>{.cpp,.h,.hpp}",
        ),
        (
            # The file name decides the path: a model.py can only go to kernels/, where .py is
            # no kernel's suffix, and the missing model_new.py is named too.
            upload("model.py", "x = 1\n"),
            [],
            "'kernels/model.py' cannot be written",
        ),
        (
            upload("model_new.py", "x = 1\n"),
            [upload("big.cpp", "/" * BIG)],
            "big.cpp is 524,289 bytes; a file may be at most 524,288 bytes (512 KiB)",
        ),
        (
            upload("model_new.py", "x = 1\n"),
            [upload("latin.cpp", "// café\n".encode("latin-1"))],
            "latin.cpp is not UTF-8 text (byte 0xe9 at offset 6)",
        ),
        (
            upload("model_new.py", "x = 1\n"),
            [upload("a.cpp", "//\n"), upload("a.cpp", "//\n")],
            "a.cpp is chosen twice",
        ),
    ],
    ids=[
        "missing model_new.py",
        "bad suffix",
        "model.py",
        "oversized file",
        "not UTF-8",
        "chosen twice",
    ],
)
def test_the_page_shows_what_to_fix(alice, relu_scale, run_hook, model_new, kernels, message):
    problem = make_problem(alice, relu_scale)
    r = post_form(logged_in(alice), problem.pk, model_new, kernels)
    page = page_refusal(r, 422)
    assert message in page
    assert run_hook == []


def test_the_page_refuses_a_problem_not_yet_valid(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale, valid=False)
    model_new, kernels = good_uploads()
    page = page_refusal(post_form(logged_in(alice), problem.pk, model_new, kernels), 409)
    assert f"problem {problem.pk} is pending, not valid" in page


def test_the_page_hides_someone_elses_private_problem(alice, charlie, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    model_new, kernels = good_uploads()
    r = post_form(logged_in(charlie), problem.pk, model_new, kernels)
    assert r.status_code == 404
    assert not Run.objects.exists()


def test_the_page_sends_anonymous_visitors_to_log_in(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale, public=True)
    model_new, kernels = good_uploads()
    r = post_form(Client(), problem.pk, model_new, kernels)
    assert r.status_code == 302 and r.url.startswith("/accounts/login/")
    assert not Run.objects.exists()


def test_the_page_goes_back_to_the_problem_on_a_get(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    r = logged_in(alice).get(f"/problems/{problem.pk}/submit")
    assert r.status_code == 302 and r.url == f"/problems/{problem.pk}/"


def test_the_page_keeps_to_the_hourly_limit(alice, relu_scale, run_hook, settings):
    settings.RUNS_PER_HOUR = 1
    problem = make_problem(alice, relu_scale)
    lifecycle.start_run(alice, problem, "scripted-demo", "cpu", "loose")  # an agent run counts
    model_new, kernels = good_uploads()

    r = post_form(logged_in(alice), problem.pk, model_new, kernels)

    assert r.status_code == 429
    page = html.unescape(r.content.decode())
    assert "you started 1 runs in the last hour and the limit is 1: try again in" in page
    assert not Run.objects.filter(kind=RunKind.SUBMISSION).exists()


def test_the_page_names_an_unknown_gpu_type(alice, relu_scale, run_hook):
    problem = make_problem(alice, relu_scale)
    model_new, kernels = good_uploads()
    r = post_form(logged_in(alice), problem.pk, model_new, kernels, gpu_type="tpu")
    assert "unknown GPU type 'tpu': use one of cpu" in page_refusal(r, 422)
