"""Agents files and the environment: the one place agent settings are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config import (
    DEFAULT_AGENTS_FILE,
    AgentConfig,
    ConfigError,
    Prices,
    describe_training,
    load_agent,
    load_agents,
)

MINIMAL = """
[agents.local]
backend = "openai"
model = "m"
base_url = "http://localhost:8000/v1"
"""


def write(tmp_path: Path, text: str, name: str = "agents.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shipped_agents_file_loads():
    agents = load_agents(DEFAULT_AGENTS_FILE)
    assert {"vllm-kernel", "vllm-text", "openai-frontier", "scripted-demo"} <= set(agents)
    assert agents["vllm-kernel"].backend == "openai"
    assert agents["vllm-text"].backend == "text"
    assert agents["openai-frontier"].api_key_env == "OPENAI_API_KEY"
    assert agents["openai-frontier"].budget.max_dollars > 0
    assert Path(agents["scripted-demo"].script).is_file()


def test_sections_fill_budget_prices_and_sampling(tmp_path):
    text = (
        MINIMAL
        + """
[agents.local.sampling]
temperature = 0.1
[agents.local.budget]
max_turns = 7
[agents.local.prices]
input_per_mtok = 3.0
"""
    )
    config = load_agents(write(tmp_path, text))["local"]
    assert config.sampling == {"temperature": 0.1}
    assert config.budget.max_turns == 7 and config.budget.max_format_errors == 3
    assert config.prices.input_per_mtok == 3.0


def test_json_files_work_too(tmp_path):
    data = {"agents": {"j": {"backend": "scripted", "script": "s.json"}}}
    config = load_agents(write(tmp_path, json.dumps(data), "agents.json"))["j"]
    assert config.script == str(tmp_path / "s.json")


@pytest.mark.parametrize(
    "text,says",
    [
        (MINIMAL + 'api_key = "sk-123"\n', "never put a key in a file"),
        (MINIMAL + "temprature = 0.2\n", "unknown keys"),
        (MINIMAL.replace('"openai"', '"anthropic"'), "backend must be one of"),
    ],
)
def test_bad_tables_fail_loudly(tmp_path, text, says):
    with pytest.raises(ConfigError, match=says):
        load_agents(write(tmp_path, text))


def test_an_openai_agent_needs_model_and_base_url(tmp_path):
    with pytest.raises(ConfigError, match="needs model and base_url"):
        load_agents(write(tmp_path, '[agents.x]\nbackend = "openai"\n'))


def test_unknown_budget_keys_fail(tmp_path):
    with pytest.raises(ConfigError, match="unknown budget keys"):
        load_agents(write(tmp_path, MINIMAL + "[agents.local.budget]\nmax_turn = 3\n"))


def test_the_environment_picks_the_file_and_overrides_endpoint_and_model(tmp_path):
    path = write(tmp_path, MINIMAL)
    environ = {
        "KERNELARENA_AGENTS_FILE": str(path),
        "KERNELARENA_AGENT_LOCAL_BASE_URL": "http://vllm:8000/v1",
        "KERNELARENA_AGENT_LOCAL_MODEL": "other",
    }
    config = load_agent("local", environ=environ)
    assert (config.base_url, config.model) == ("http://vllm:8000/v1", "other")
    with pytest.raises(ConfigError, match="no agent 'missing'"):
        load_agent("missing", environ=environ)


def test_an_override_reaches_only_its_own_agent(tmp_path):
    path = write(tmp_path, MINIMAL + MINIMAL.replace("local", "frontier-api"))
    environ = {"KERNELARENA_AGENT_FRONTIER_API_BASE_URL": "https://api.example.com/v1"}
    assert load_agent("frontier-api", path, environ).base_url == "https://api.example.com/v1"
    assert load_agent("local", path, environ).base_url == load_agents(path)["local"].base_url


def test_the_old_override_for_every_agent_is_refused_with_the_new_name(tmp_path):
    path = write(tmp_path, MINIMAL)
    environ = {"KERNELARENA_AGENT_BASE_URL": "http://vllm:8000/v1"}
    with pytest.raises(ConfigError, match=r"\$KERNELARENA_AGENT_LOCAL_BASE_URL"):
        load_agent("local", path, environ)


def test_the_key_comes_only_from_the_named_variable():
    config = AgentConfig(name="a", api_key_env="MY_KEY")
    assert config.api_key({"MY_KEY": "sk-1"}) == "sk-1"
    with pytest.raises(ConfigError, match=r"\$MY_KEY"):
        config.api_key({})
    assert AgentConfig(name="b").api_key({}) == "EMPTY"


def test_identity_changes_with_behaviour_not_with_transport():
    base = AgentConfig(name="a", model="m")
    assert "api_key_env" not in base.identity()
    slower = AgentConfig(name="a", model="m", request_timeout_s=5, api_key_env="K")
    assert slower.identity()["fingerprint"] == base.identity()["fingerprint"]
    other = AgentConfig(name="a", model="m2")
    assert other.identity()["fingerprint"] != base.identity()["fingerprint"]
    assert base.with_budget(max_turns=3).budget.max_turns == 3


def test_prices_are_per_million_tokens():
    assert Prices(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)


def test_a_checkpoint_without_its_training_record_is_refused(tmp_path):
    (tmp_path / "ckpt").mkdir()
    path = write(tmp_path, MINIMAL + 'checkpoint = "ckpt"\n')
    with pytest.raises(ConfigError, match="has no readable kernelarena_training.json"):
        load_agents(path)
    # and provenance is never written by hand
    path = write(tmp_path, MINIMAL + "training = {steps = 1}\n")
    with pytest.raises(ConfigError, match="unknown keys \\['training'\\]"):
        load_agents(path)


@pytest.mark.parametrize(
    ("training", "line"),
    [
        (
            {"method": "sft (rejection fine-tuning)", "base": "b", "trajectories": 1, "steps": 1},
            "sft (rejection fine-tuning) of b on 1 trajectory, 1 step",
        ),
        (
            {"method": "grpo", "base": "ckpt/rft-1", "trajectories": None, "rollouts": 64},
            "grpo of ckpt/rft-1 with 64 rollouts",
        ),
        (
            {"method": "grpo", "base": "b", "rollouts": 1, "steps": 0},
            "grpo of b with 1 rollout, 0 steps",
        ),
        ({}, ""),  # known-bad: an agent that is no checkpoint has no line
    ],
)
def test_a_checkpoints_provenance_in_one_line(training, line):
    assert describe_training(training) == line
