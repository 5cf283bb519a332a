"""What runs inside a sandboxed runner process: the runner program (`python -m
gpu_workers.harness.runner.main ROLE FD`), its state between the judge's commands, the candidate's
and the reference's commands, and the problem loader. Untrusted code runs here; nothing here
decides a verdict."""
