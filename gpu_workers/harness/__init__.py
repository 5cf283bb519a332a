"""Evaluation harness: load and validate problems, build workspaces, and compile, verify and
profile candidate kernels in a sandbox. Needs only Python and torch (no Django)."""
