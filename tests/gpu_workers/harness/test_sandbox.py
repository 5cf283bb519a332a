import os
import socket
import sys
import textwrap

from gpu_workers.harness import sandbox


def run_python(code: str, tmp_path, **limits) -> sandbox.SandboxResult:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    return sandbox.run(
        [sys.executable, str(script)], cwd=tmp_path, device="cpu", limits=sandbox.Limits(**limits)
    )


def test_it_scrubs_secrets_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = run_python("import os; print(sorted(os.environ))", tmp_path)
    assert result.ok
    assert "DATABASE_URL" not in result.stdout and "OPENAI_API_KEY" not in result.stdout
    assert "PYTHONPATH" in result.stdout


def test_it_has_no_network_when_the_os_allows_it(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    code = f"""
    import socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2)
        print("connected")
    except OSError as exc:
        print("refused", exc)
    """
    result = run_python(code, tmp_path)
    listener.close()
    if sandbox.network_isolation_available():
        assert result.network_isolated and "refused" in result.stdout
    else:
        assert not result.network_isolated


def test_it_kills_the_whole_process_group_on_timeout(tmp_path):
    marker = tmp_path / "grandchild.pid"
    code = f"""
    import subprocess, time
    p = subprocess.Popen(["sleep", "60"])
    open({str(marker)!r}, "w").write(str(p.pid))
    time.sleep(60)
    """
    result = run_python(code, tmp_path, timeout_s=2)
    assert result.timed_out and "timed out" in result.failure()
    pid = int(marker.read_text())
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]


def test_a_segfault_becomes_a_reason(tmp_path):
    result = run_python("import ctypes; ctypes.string_at(0)", tmp_path)
    assert "SIGSEGV" in result.failure()


def test_file_size_limit_stops_runaway_writes(tmp_path):
    code = "open('big', 'wb').write(b'x' * (8 << 20))"
    result = run_python(code, tmp_path, file_size_bytes=1 << 20)
    assert not result.ok and (tmp_path / "big").stat().st_size <= 1 << 20


def test_output_is_truncated_to_its_tail(tmp_path):
    result = run_python("print('a' * 100000); print('THE END')", tmp_path, output_bytes=1000)
    assert "bytes cut" in result.stdout and result.stdout.rstrip().endswith("THE END")
    assert len(result.stdout) < 1100
