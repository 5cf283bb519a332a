"""What runs on a GPU host: Celery tasks, and the evaluation harness (gpu_workers.harness)."""
