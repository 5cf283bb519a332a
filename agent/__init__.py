"""The KernelArena agent: an LLM loop that writes, compiles, verifies and profiles kernels.

It knows the workspace only through agent.workspace.Workspace; gpu_workers and webapp are never
imported here (only agent.cli wires in the harness's Session).
"""
