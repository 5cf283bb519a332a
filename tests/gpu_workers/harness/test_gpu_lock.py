import subprocess
import sys
import time

from gpu_workers.harness.judge import gpu_lock

HOLDER = """
import time
from gpu_workers.harness.judge import gpu_lock
with gpu_lock.hold("cpu"):
    print("held", flush=True)
    time.sleep(1.5)
"""


def test_a_second_process_waits_for_the_lock():
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    with gpu_lock.hold("cpu") as waited:
        pass
    holder.wait()
    assert waited >= 0.5 and time.monotonic() - started >= 0.5
