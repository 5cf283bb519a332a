"""The `accelerate launch` configs of docs/training.md load as accelerate reads them, each the
distribution it is named for."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("accelerate")

from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "agent" / "train" / "accelerate"


@pytest.mark.parametrize(
    ("name", "distributed"),
    [("one_gpu", "NO"), ("ddp", "MULTI_GPU"), ("fsdp", "FSDP"), ("deepspeed_zero3", "DEEPSPEED")],
)
def test_each_launch_config_is_the_distribution_it_is_named_for(name, distributed):
    config = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
    assert config.distributed_type.value == distributed
    assert str(config.mixed_precision) == "bf16"
    if distributed == "DEEPSPEED":
        assert config.deepspeed_config["zero_stage"] == 3
    if distributed == "FSDP":
        assert config.fsdp_config["fsdp_version"] == 2


def test_a_misspelt_key_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((CONFIGS / "ddp.yaml").read_text().replace("num_processes", "num_process"))
    with pytest.raises(ValueError, match="unknown keys .*num_process"):
        load_config_from_file(str(bad))
