"""Agent configurations: which model, behind which endpoint, with which prompt, budget and prices.

Configurations live in a TOML (or JSON) file, one table per agent under `agents`; see
agent/configs/agents.toml. This is the one place that reads agent settings from the environment:

    KERNELARENA_AGENTS_FILE             the agents file (default: agent/configs/agents.toml)
    KERNELARENA_AGENT_<NAME>_BASE_URL   overrides base_url of agent NAME alone (e.g. for
                                        vllm-kernel: KERNELARENA_AGENT_VLLM_KERNEL_BASE_URL)
    KERNELARENA_AGENT_<NAME>_MODEL      overrides model of agent NAME alone
    <api_key_env>                       the API key itself; a file never holds a key

Overrides are per agent so that no setting sends one agent's requests (and its key) to another
agent's endpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_AGENTS_FILE = Path(__file__).parent / "configs" / "agents.toml"
BACKENDS = ("openai", "text", "scripted", "fusion")
MODEL_BACKENDS = ("openai", "text")  # those that talk to a model server (and can be checked)
# How requests travel, not what the agent does: left out of a config's identity.
_TRANSPORT = (
    "api_key_env",
    "stream",
    "request_timeout_s",
    "max_retries",
    "backoff_s",
    "max_backoff_s",
)


class ConfigError(ValueError):
    """An agents file or environment that cannot give a working configuration."""


class MissingApiKey(ConfigError):
    """The agent takes an API key and its variable is unset here: the operator has no key."""

    def __init__(self, agent: str, variable: str):
        self.agent, self.variable = agent, variable
        super().__init__(f"agent {agent!r} needs its API key in ${variable}")


@dataclass(frozen=True)
class Budget:
    """When a run stops. 0 means no limit (except max_turns, which is always on)."""

    max_turns: int = 30  # model replies
    max_tokens: int = 0  # prompt + completion tokens over the whole run
    max_seconds: float = 0  # wall-clock seconds, model and tools together
    max_dollars: float = 0
    max_format_errors: int = 3  # malformed replies in a row before the run ends


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens, from the provider's price list."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class AgentConfig:
    name: str
    version: str = "1"
    # openai (native tool calls) | text (text actions) | scripted | fusion (no model)
    backend: str = "openai"
    model: str = ""
    base_url: str = ""
    api_key_env: str = ""  # name of the environment variable holding the key; "" for none
    prompt_version: str = "v1"
    sampling: dict = field(default_factory=dict)  # sent as-is in the request body
    budget: Budget = field(default_factory=Budget)
    prices: Prices = field(default_factory=Prices)
    stream: bool = True
    request_timeout_s: float = 600.0  # per request; a long kernel file takes a while to generate
    max_retries: int = 4  # on timeouts, connection errors, 429 and 5xx
    backoff_s: float = 2.0  # first retry delay; doubles each retry
    max_backoff_s: float = 60.0
    script: str = ""  # scripted backend: the JSON action list (relative to the agents file)
    # a checkpoint made by `python -m agent.train` that `model` serves (relative to the agents
    # file); its provenance (`training`: method, base model, data, steps) is read from it and is
    # part of the agent's identity, so a retrained model is a new row on the board
    checkpoint: str = ""
    training: dict = field(default_factory=dict)

    def api_key(self, environ: Mapping[str, str] = os.environ) -> str:
        if not self.api_key_env:
            return "EMPTY"  # vLLM without --api-key accepts any key; the SDK insists on one
        key = environ.get(self.api_key_env, "")
        if not key:
            raise MissingApiKey(self.name, self.api_key_env)
        return key

    def operator_key_set(self, environ: Mapping[str, str] = os.environ) -> bool:
        """Whether this process has the operator's key (true for an agent that takes none)."""
        return not self.api_key_env or bool(environ.get(self.api_key_env))

    def identity(self) -> dict:
        """What a leaderboard row is keyed on: everything that changes the agent's behaviour."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in _TRANSPORT}
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        return {**fields, "fingerprint": digest[:16]}

    def with_budget(self, **changes: float) -> AgentConfig:
        return dataclasses.replace(self, budget=dataclasses.replace(self.budget, **changes))


def load_agents(path: Path | str) -> dict[str, AgentConfig]:
    """Every agent in a TOML or JSON agents file, by name."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read agents file {path}: {error}") from error
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"agents file {path} is not valid: {error}") from error
    agents = data.get("agents")
    if not isinstance(agents, dict) or not agents:
        raise ConfigError(f"{path} has no [agents.<name>] tables")
    return {name: agent_from_table(name, table, path.parent) for name, table in agents.items()}


def load_agent(
    name: str, path: Path | str | None = None, environ: Mapping[str, str] = os.environ
) -> AgentConfig:
    """One agent by name, with the environment's overrides applied."""
    path = agents_file(path, environ)
    agents = load_agents(path)
    if name not in agents:
        raise ConfigError(f"no agent {name!r} in {path}; known: {', '.join(sorted(agents))}")
    config = agents[name]
    _refuse_shared_overrides(name, environ)
    overrides = {key: environ.get(override_variable(name, key)) for key in ("base_url", "model")}
    return dataclasses.replace(config, **{k: v for k, v in overrides.items() if v})


def override_variable(agent: str, key: str) -> str:
    """The environment variable that overrides one key of one agent."""
    return f"KERNELARENA_AGENT_{re.sub(r'[^A-Z0-9]', '_', agent.upper())}_{key.upper()}"


def _refuse_shared_overrides(name: str, environ: Mapping[str, str]) -> None:
    # These once overrode every agent at once, so a frontier agent's key went to the vLLM host.
    for key in ("base_url", "model"):
        shared = f"KERNELARENA_AGENT_{key.upper()}"
        if environ.get(shared):
            raise ConfigError(
                f"${shared} is no longer read: it pointed every agent at one endpoint; "
                f"set ${override_variable(name, key)} for agent {name!r} instead"
            )


def agents_file(path: Path | str | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """The agents file: the one given, else $KERNELARENA_AGENTS_FILE, else the shipped example."""
    return Path(path or environ.get("KERNELARENA_AGENTS_FILE") or DEFAULT_AGENTS_FILE)


def agent_from_table(name: str, table: dict, base_dir: Path) -> AgentConfig:
    """An AgentConfig from one file table; unknown keys and keys-in-files fail loudly."""
    table = dict(table)
    if "api_key" in table:
        raise ConfigError(
            f"agent {name!r}: never put a key in a file; name its variable in api_key_env"
        )
    budget = _nested(name, "budget", Budget, table.pop("budget", {}))
    prices = _nested(name, "prices", Prices, table.pop("prices", {}))
    known = {f.name for f in dataclasses.fields(AgentConfig)} - {"name", "budget", "prices"}
    known -= {"training"}  # read from the checkpoint, never written by hand
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"agent {name!r}: unknown keys {sorted(unknown)}")
    config = AgentConfig(name=name, budget=budget, prices=prices, **table)
    if config.backend not in BACKENDS:
        raise ConfigError(f"agent {name!r}: backend must be one of {', '.join(BACKENDS)}")
    if config.backend == "scripted":
        if not config.script:
            raise ConfigError(f"agent {name!r}: the scripted backend needs `script`")
        return dataclasses.replace(config, script=str((base_dir / config.script).resolve()))
    if config.backend == "fusion":
        return config  # the built-in compiler: no model, no endpoint
    if not config.model or not config.base_url:
        raise ConfigError(f"agent {name!r}: the {config.backend} backend needs model and base_url")
    if config.checkpoint:
        folder = (base_dir / config.checkpoint).resolve()
        return dataclasses.replace(
            config, checkpoint=str(folder), training=training_provenance(name, folder)
        )
    return config


TRAINING_RECORD = "kernelarena_training.json"  # written by agent/train beside the weights


def training_provenance(name: str, folder: Path) -> dict:
    """What a trained checkpoint was made from, as the board shows it."""
    try:
        record = json.loads((folder / TRAINING_RECORD).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(
            f"agent {name!r}: checkpoint {folder} has no readable {TRAINING_RECORD} "
            f"(python -m agent.train writes it): {error}"
        ) from error
    plan = record.get("plan", {})
    return {
        "method": record.get("kind", ""),
        "base": plan.get("base", ""),
        "data": plan.get("data") or plan.get("problems", ""),
        "trajectories": (record.get("data") or {}).get("kept"),
        "rollouts": record.get("rollouts"),
        "steps": record.get("steps"),
    }


def describe_training(training: dict) -> str:
    """A trained checkpoint's provenance in one line, as the board, the trace and the agents page
    show it ("sft (rejection fine-tuning) of Qwen/Qwen2.5-7B on 120 trajectories, 300 steps");
    "" for an agent that is not a trained checkpoint."""
    if not training:
        return ""
    line = f"{training.get('method') or 'trained'} of {training.get('base') or 'an unnamed base'}"
    for key, words in (("trajectories", "on {} trajector{}"), ("rollouts", "with {} rollout{}")):
        count = training.get(key)
        if count:
            plural = ("ies" if count != 1 else "y") if key == "trajectories" else "s" * (count != 1)
            line += " " + words.format(count, plural)
    steps = training.get("steps")
    return line + (f", {steps} step{'s' * (steps != 1)}" if steps is not None else "")


def _nested(name: str, key: str, cls: type, values: dict):
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - allowed
    if unknown:
        raise ConfigError(f"agent {name!r}: unknown {key} keys {sorted(unknown)}")
    return cls(**values)
