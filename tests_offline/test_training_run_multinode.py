"""Multi-node training flags: ``--nnodes N --ray-address ADDR`` map to verl's ``trainer.nnodes``,
``trainer.n_gpus_per_node`` (same world size) and ``ray_kwargs.ray_init.address``, shown by print-config."""

from __future__ import annotations

import yaml

from trace_lib.cli.main import main


def _print_config(release, capsys, *extra):
    code = main(["train", "print-config", "--config", "trace-qwen2.5-vl-3b", "--trace-root", str(release.path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_nnodes_and_ray_address_reach_verl_keys(release, capsys):
    code, out, _ = _print_config(release, capsys)
    single = yaml.safe_load(out)["verl_overrides"]
    code, out, _ = _print_config(release, capsys, "--nnodes", "2", "--ray-address", "10.0.0.1:6379")
    multi = yaml.safe_load(out)["verl_overrides"]
    assert code == 0
    assert (single["trainer"]["nnodes"], multi["trainer"]["nnodes"]) == (1, 2)
    gpus = single["trainer"]["n_gpus_per_node"]
    assert multi["trainer"]["n_gpus_per_node"] * 2 == gpus  # same world size, spread over two nodes
    assert multi["ray_kwargs"]["ray_init"]["address"] == "10.0.0.1:6379"
    assert "ray_init" not in single.get("ray_kwargs", {})


def test_a_node_count_that_does_not_split_the_gpus_is_a_usage_error(release, capsys):
    code, _, err = _print_config(release, capsys, "--nnodes", "3")
    assert code != 0 and "--nnodes: the node count must split the GPUs evenly" in err
    assert "Traceback" not in err


def test_multinode_run_without_a_ray_address_is_refused(release, tmp_path, capsys):
    code = main(["train", "run", "--config", "trace-qwen2.5-vl-3b", "--trace-root", str(release.path),
                 "--input-dir", str(tmp_path / "in"), "--output-dir", str(tmp_path / "out"), "--nnodes", "2"])
    err = capsys.readouterr().err
    assert code != 0 and "--nnodes above 1 needs the Ray cluster's address" in err
