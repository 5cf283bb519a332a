"""Which backend a config names. Apart from agent.backends, which every backend imports for its
Reply and ToolCall: choosing the fusion backend there made that package and agent.fusion import
each other."""

from __future__ import annotations

from agent.backends import Backend
from agent.config import AgentConfig


def make_backend(config: AgentConfig, api_key: str | None = None) -> Backend:
    """The backend a config names. The openai SDK is imported only when a config needs it.
    api_key, where given (a person's own key), replaces the one the config's variable holds."""
    if config.backend == "scripted":
        from agent.backends.scripted import ScriptedBackend

        return ScriptedBackend.from_file(config.script)
    if config.backend == "fusion":
        from agent.fusion.backend import FusionBackend

        return FusionBackend()
    from agent.backends.openai import OpenAIBackend

    if config.backend == "text":
        from agent.backends.text_actions import TextActionBackend

        return TextActionBackend(OpenAIBackend(config, api_key))
    return OpenAIBackend(config, api_key)
