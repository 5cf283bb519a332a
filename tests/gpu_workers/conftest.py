"""Django for the worker-side tests (gpu_workers/agent_run.py, problem_validation.py): the same
set-up, database blocking and fixtures as tests/webapp (alice, bob, charlie, relu_scale,
redis_server), so both sides of a run share one vocabulary. The harness tests below need none of
it; a test that asks for no database cannot reach one."""

from tests.webapp.conftest import *  # noqa: F401,F403  (fixtures and the pytest_configure hook)
