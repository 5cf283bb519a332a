"""The KernelArena web app: a Django project. It never imports torch, the harness or user code:
it stores problems and runs, and hands work to the GPU workers after commit (webapp/dispatch.py)."""
