"""The web process never imports torch or the harness's runtime (DESIGN.md, dependency
direction); of gpu_workers it may use only the standard-library source and file-name checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
import django
django.setup()
import webapp.urls, webapp.asgi, webapp.wsgi
from django.contrib import admin
admin.autodiscover()
allowed = {
    "gpu_workers", "gpu_workers.harness", "gpu_workers.harness.problem_source",
    "gpu_workers.harness.build", "gpu_workers.harness.build.workspace_paths",
    "gpu_workers.harness.vocabulary",
}
bad = sorted(
    m for m in sys.modules
    if m == "torch" or m.startswith("torch.") or (m.startswith("gpu_workers") and m not in allowed)
)
print(bad)
sys.exit(1 if bad else 0)
"""


def test_it_loads_without_torch_or_the_harness():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
