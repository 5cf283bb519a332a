# Two images from one file:
#   web     the Django ASGI server (no torch: the web process never runs user code)
#   worker  a GPU worker: CUDA toolkit (nvcc for kernels), torch for CUDA 13.0, the harness
# docker-compose.yml builds both.

FROM python:3.11-slim AS web
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY webapp webapp
COPY agent agent
COPY gpu_workers gpu_workers
COPY skills skills
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install -e '.[web,agent]'
EXPOSE 8000
CMD ["sh", "-c", "python manage.py migrate --noinput && python manage.py collectstatic --noinput \
     && exec uvicorn webapp.asgi:application --host 0.0.0.0 --port 8000"]

FROM nvidia/cuda:13.0.1-devel-ubuntu24.04 AS worker
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_BREAK_SYSTEM_PACKAGES=1 \
    KERNELARENA_CACHE=/cache
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python3-dev \
      ninja-build util-linux && rm -rf /var/lib/apt/lists/*
WORKDIR /app
RUN pip install torch --index-url https://download.pytorch.org/whl/cu130
COPY pyproject.toml README.md ./
COPY webapp webapp
COPY agent agent
COPY gpu_workers gpu_workers
COPY skills skills
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install -e '.[harness,agent,web]'
# The run worker of one GPU; docker-compose.yml starts the validation and re-grade workers beside
# it (webapp/work_kinds.py: a queue and a worker per kind of work).
CMD ["celery", "-A", "webapp.celery", "worker", "-Q", "gpu.h100.run", "--concurrency", "2", "-l", "info"]
