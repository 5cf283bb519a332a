"""The KernelArena web app: a Django project. It never imports torch, the harness or user code:
it stores problems and runs, and hands work to the GPU workers through hooks (see
webapp/problems/validation.py and webapp/runs/lifecycle.py)."""
