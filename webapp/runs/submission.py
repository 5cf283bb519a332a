"""A person's own kernel: which files a submission may hold, checked before the run is created.

The worker replays the files through the agent's tools (agent.submission), which enforce the
same path rule (gpu_workers.harness.build.workspace_paths, standard library only); checking here too
means a mistake comes back at once, with what to fix, instead of as a failed run.

`check_files` takes workspace path -> text (the API's JSON); `files_from_uploads` turns the page's
uploaded files into that, the file's name deciding its path: model_new.py stays model_new.py,
any other name goes to kernels/<name>.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from gpu_workers.harness.build.workspace_paths import (
    MAX_FILE_BYTES,
    size_fault,
    text_fault,
    writable_path,
)
from gpu_workers.harness.vocabulary import device_for
from webapp.errors import Unprocessable

MODEL_NEW = "model_new.py"
MAX_FILES = 32


class BadSubmission(Unprocessable):
    """The submitted files cannot be checked as they are (HTTP 422); the message says what to
    fix, one sentence per file at fault."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))

    @property
    def reasons(self) -> list[str]:
        return self.problems


def check_files(files: object, gpu_type: str) -> dict[str, str]:
    """The files keyed by their normalised workspace paths; BadSubmission listing every fault."""
    if not isinstance(files, dict) or not files:
        raise BadSubmission(
            [f"no files: send {MODEL_NEW} (and your kernels/ files) as path -> text"]
        )
    if len(files) > MAX_FILES:
        raise BadSubmission(
            [f"{len(files)} files: a submission may have at most {MAX_FILES}; merge some kernels"]
        )
    target = device_for(gpu_type)
    problems: list[str] = []
    checked: dict[str, str] = {}
    named: set[str] = set()  # paths that passed the rule, whatever their text
    for path, text in files.items():
        if not isinstance(path, str) or not isinstance(text, str):
            problems.append(f"{path!r}: each file must be a path with its text")
            continue
        try:
            rel = writable_path(path, target)
        except (ValueError, PermissionError) as exc:  # PermissionError: a read-only file
            problems.append(str(exc))
            continue
        if rel in named:
            problems.append(f"{rel} is given twice: send each file once")
            continue
        named.add(rel)
        fault = text_fault(rel, text)
        if fault:
            problems.append(fault)
        else:
            checked[rel] = text
    if MODEL_NEW not in named:
        problems.insert(
            0,
            f"{MODEL_NEW} is missing: it defines ModelNew, which the checks import and call "
            "in place of Model",
        )
    if problems:
        raise BadSubmission(problems)
    return checked


def path_for_upload(name: str) -> str:
    """Where an uploaded file goes: model_new.py by that name, anything else into kernels/."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return MODEL_NEW if base == MODEL_NEW else f"kernels/{base}"


def files_from_uploads(uploads: Iterable) -> dict[str, str]:
    """Uploaded files (Django UploadedFile: .name, .size, .read()) as path -> text, read as
    UTF-8 (a leading byte-order mark dropped). The paths are checked later, by check_files."""
    problems: list[str] = []
    files: dict[str, str] = {}
    for upload in uploads:
        path = path_for_upload(upload.name)
        if path in files:
            problems.append(f"{upload.name} is chosen twice: choose each file once")
            continue
        if upload.size > MAX_FILE_BYTES:
            problems.append(size_fault(upload.name, upload.size))
            continue
        data = upload.read()
        try:
            files[path] = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            problems.append(
                f"{upload.name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                f"{exc.start}): save it as UTF-8 and upload it again"
            )
    if problems:
        raise BadSubmission(problems)
    return files
