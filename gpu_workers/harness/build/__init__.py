"""Workspaces and compilation: the workspace an agent sees and which of its files may be
written, the compiler driver, its object cache and the precompiled header."""
