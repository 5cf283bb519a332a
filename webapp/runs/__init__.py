"""Runs: an agent optimising one problem on one GPU type, its trace and its candidates."""
