"""Evaluation harness: load and validate problems, build workspaces, and compile, verify and
profile candidate kernels in a sandbox. Needs only Python and torch (no Django).

Subpackages, one job each (docs/architecture.md): sandbox (confinement of untrusted code), runner
(what runs inside a sandboxed runner process), judge (the trusted side that measures and
decides), capture (graph capture and lowering), build (workspaces and compilation). The modules
at the top are shared by all of them (vocabulary, settings, problem_source, synthesis) or are
the entry points (session, __main__)."""
