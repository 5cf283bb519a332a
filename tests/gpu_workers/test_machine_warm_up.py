"""A worker pays the machine's once-only costs as it starts, so a user's first run does not."""

from gpu_workers import machine_warm_up
from gpu_workers.harness.build import compile
from gpu_workers.harness.judge import compiler_seed, roofline


def test_warm_up_leaves_the_prelude_and_the_peaks_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path / "cache"))
    pch = tmp_path / "cache" / "pch"
    # known-bad: a fresh machine has neither, so its first compile and profile would pay them
    assert not list(pch.glob("*/prelude.h.gch")) and not roofline.peaks_file("cpu").is_file()
    assert compiler_seed.ready("cpu") is None

    seconds = machine_warm_up.warm("cpu")

    assert set(seconds) == {"precompiled header", "compiler seed", "peaks"}
    seed = compiler_seed.ready("cpu")
    assert seed is not None and list((seed / "inductor").rglob("*.so"))
    built = list(pch.glob("*/prelude.h.gch"))
    assert len(built) == 1 and built[0].parent.name == compile.toolchain("cpu").digest()
    peaks = roofline.peaks("cpu")  # read from the cache the warm-up wrote
    assert peaks.bandwidth_gbs > 0 and peaks.fp32_tflops > 0
    kept = (built[0], roofline.peaks_file("cpu"), seed)
    stamps = [p.stat().st_mtime_ns for p in kept]
    machine_warm_up.warm("cpu")  # a second worker of the machine finds all three
    assert [p.stat().st_mtime_ns for p in kept] == stamps
