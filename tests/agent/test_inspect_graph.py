"""inspect_graph: the operator's Graph IR through the tools, from a real cpu Session (the capture
runs in the sandbox), and an error, not a crash, from a workspace that cannot capture one."""

from __future__ import annotations

import json

from agent.backends.scripted import ScriptedBackend
from agent.config import AgentConfig, Budget
from agent.loop import Agent
from agent.tools import check_arguments, format_graph, run_tool

RELU_SCALE_NODES = [
    {
        "name": "relu",
        "op": "relu",
        "args": [{"input": "x"}],
        "attrs": {},
        "shape": [256, 1024],
        "dtype": "float32",
    },
    {
        "name": "mul",
        "op": "mul",
        "args": [{"node": "relu"}, {"const": 1.5}],
        "attrs": {},
        "shape": [256, 1024],
        "dtype": "float32",
    },
]


def test_the_tool_returns_the_graph_as_json(session):
    check_arguments("inspect_graph", {})
    result = run_tool(session, "inspect_graph", {})
    assert result.ok, result.text
    ir = result.verdict
    assert ir["format"] == "kernelarena.graph/1" and ir["device"] == "cpu"
    assert ir["inputs"] == [{"name": "x", "shape": [256, 1024], "dtype": "float32"}]
    assert ir["params"] == [] and ir["unsupported"] == []
    assert ir["nodes"] == RELU_SCALE_NODES
    assert ir["outputs"] == [{"node": "mul"}]
    assert json.loads(result.text) == ir
    # one line per node: readable, and far shorter than indent=2
    assert "    " + json.dumps(RELU_SCALE_NODES[1]) in result.text.splitlines()


def test_the_loop_records_the_graph_in_its_trace(run_script):
    run = run_script([{"tool": "inspect_graph"}, {"tool": "finish"}])
    assert run.result.status == "finished"
    [result] = [r for r in run.of_kind("tool_result") if r["name"] == "inspect_graph"]
    assert result["ok"] and result["verdict"]["nodes"] == RELU_SCALE_NODES
    assert json.loads(run.tool_texts()[0]) == result["verdict"]


class WithoutGraph:
    """A workspace from before inspect_graph: everything but graph, passed through."""

    def __init__(self, session):
        self._session = session

    def __getattr__(self, name):
        if name == "graph":
            raise AttributeError(name)
        return getattr(self._session, name)


def test_a_workspace_without_graph_answers_with_an_error_and_the_run_goes_on(session):
    workspace = WithoutGraph(session)
    result = run_tool(workspace, "inspect_graph", {})
    assert not result.ok and result.text.startswith("Error:") and result.verdict is None
    config = AgentConfig(name="t", backend="scripted", script="-", budget=Budget(max_turns=5))
    backend = ScriptedBackend(
        [{"tool": "inspect_graph"}, {"tool": "list_files"}, {"tool": "finish"}]
    )
    run = Agent(config, backend, workspace).run()
    assert run.status == "finished"
    texts = [m["content"] for m in run.messages if m["role"] == "tool"]
    assert texts[0].startswith("Error:") and "model.py" in texts[1]


def test_unsupported_ops_make_the_result_not_ok_but_keep_the_ir():
    ir = {
        "format": "kernelarena.graph/1",
        "device": "cpu",
        "inputs": [],
        "params": [],
        "nodes": [],
        "outputs": [],
        "unsupported": ["topk (call_function torch.topk): not supported by the fusion compiler"],
    }

    class Fake:
        def graph(self):
            return ir

    result = run_tool(Fake(), "inspect_graph", {})
    assert not result.ok and result.verdict is ir and json.loads(result.text) == ir
    assert "    " + json.dumps(ir["unsupported"][0]) in format_graph(ir).splitlines()
