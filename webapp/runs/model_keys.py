"""People's own model API keys: which agents take one, saving and removing a key, and the key a
run uses. A person's key for an agent replaces the operator's for their own runs of it; it is
stored encrypted (webapp/runs/secrets.py), decrypted only on the worker that runs the agent, and
never written into a trajectory, an event, a bundle, a log or a page (the test that plants a
known key and searches every artifact: tests/gpu_workers/test_model_keys_leak.py)."""

from __future__ import annotations

from django.urls import reverse

from agent.config import agents_file, load_agents
from webapp.errors import Unprocessable
from webapp.runs.models import ModelKey, Run
from webapp.runs.secrets import UnreadableSecret, decrypt, encrypt

MAX_KEY_LENGTH = 500
SHOWN_TAIL_FROM = 16  # keys shorter than this show no characters at all


class BadModelKey(Unprocessable):
    """An agent that takes no key, or a key that cannot be one (HTTP 422)."""


class UnusableModelKey(Exception):
    """A saved key this server can no longer decrypt; the message says what to do."""


def agents_taking_keys() -> list[str]:
    """The agents whose configuration names an API key (frontier APIs, a vLLM with --api-key)."""
    return sorted(name for name, config in load_agents(agents_file()).items() if config.api_key_env)


def model_keys_url() -> str:
    return reverse("model_keys")


def missing_key_message(agent: str, variable: str) -> str:
    """Why a run of an agent that takes a key cannot start, with both fixes: the person's own
    (the Model keys page) and the operator's (the workers' variable)."""
    return (
        f"agent {agent!r} needs an API key and none is saved for you: save yours on the "
        f"Model keys page ({model_keys_url()}), or ask the operator to set ${variable} "
        "on the workers"
    )


def save_key(owner, agent: str, key: str) -> ModelKey:
    known = agents_taking_keys()
    if agent not in known:
        listed = ", ".join(known) or "none is configured"
        raise BadModelKey(f"agent {agent!r} takes no API key: keys are for {listed}")
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH or any(c.isspace() or not c.isprintable() for c in key):
        raise BadModelKey(
            f"an API key is 1 to {MAX_KEY_LENGTH} printable characters without spaces: "
            "paste the key exactly as your provider shows it"
        )
    tail = key[-4:] if len(key) >= SHOWN_TAIL_FROM else ""
    saved, _ = ModelKey.objects.update_or_create(
        owner=owner, agent=agent, defaults={"encrypted": encrypt(key), "last4": tail}
    )
    return saved


def remove_key(owner, agent: str) -> bool:
    deleted, _ = ModelKey.objects.filter(owner=owner, agent=agent).delete()
    return bool(deleted)


def keys_of(owner) -> list[ModelKey]:
    return list(ModelKey.objects.filter(owner=owner).order_by("agent"))


def key_for_run(run: Run) -> str | None:
    """The run owner's own key for its agent, or None: the operator's key applies."""
    saved = ModelKey.objects.filter(owner_id=run.owner_id, agent=run.agent).first()
    if saved is None:
        return None
    try:
        return decrypt(saved.encrypted)
    except UnreadableSecret as error:
        raise UnusableModelKey(
            f"your saved API key for agent {run.agent!r} cannot be read ({error}): "
            f"save it again on the Model keys page ({model_keys_url()})"
        ) from error
