"""Settings: camelCase, nested or dotted, a `kernelLsp` wrapper, pyproject; bad input is reported
and the default kept, never an exception."""

from __future__ import annotations

import os

from kernel_lsp.config import Settings, find_pyproject, settings_from_dict, settings_from_pyproject


def test_defaults():
    s, problems = settings_from_dict(None)
    assert s == Settings() and problems == []
    assert s.arch == ("auto",) and s.check_on == "save"


def test_camel_case_nested_dotted_and_wrapper_agree():
    nested, p1 = settings_from_dict({"kernelLsp": {"arch": ["sm_80"], "gpu": {"enabled": False}}})
    dotted, p2 = settings_from_dict({"arch": "sm_80", "gpu.enabled": False})
    prefixed, p3 = settings_from_dict({"kernelLsp.arch": "sm_80", "kernelLsp.gpu.enabled": False})
    assert p1 == p2 == p3 == []
    assert nested == dotted == prefixed
    assert nested.arch == ("sm_80",) and nested.gpu_enabled is False


def test_achieved_occupancy_setting():
    assert Settings().achieved_occupancy is True
    s, problems = settings_from_dict({"kernelLsp": {"gpu": {"achievedOccupancy": False}}})
    assert problems == [] and s.achieved_occupancy is False
    s, problems = settings_from_dict({"gpu.achievedOccupancy": "off"})
    assert s.achieved_occupancy is True and "expected true or false" in problems[0]


def test_arch_string_with_commas_and_spaces():
    s, _ = settings_from_dict({"arch": "sm_80, sm_90  sm_100"})
    assert s.arch == ("sm_80", "sm_90", "sm_100")
    assert s.archs() == ["sm_80", "sm_90", "sm_100"]


def test_duplicate_archs_collapse():
    s, _ = settings_from_dict({"arch": ["sm_90", "sm_90"]})
    assert s.archs() == ["sm_90"]


def test_bad_types_are_reported_and_defaults_kept():
    s, problems = settings_from_dict(
        {
            "defaultDevice": "yes",
            "maxFileBytes": -5,
            "defines": [1, 2],
            "checkOn": "typing",
            "optimizer": {"rounds": True},
            "includeDirs": {"a": 1},
        }
    )
    assert s.default_device is False
    assert s.max_file_bytes == Settings().max_file_bytes
    assert s.defines == () and s.check_on == "save" and s.optimizer_rounds == 3
    assert len(problems) == 6
    joined = "\n".join(problems)
    for key in ("defaultDevice", "maxFileBytes", "defines", "checkOn", "optimizer.rounds", "includeDirs"):
        assert f"`{key}`" in joined
    assert "expected one of save, change" in joined


def test_unknown_keys_are_reported_not_fatal():
    s, problems = settings_from_dict({"arhc": "sm_80", "trace": {"server": "verbose"}, "defines": "X=1"})
    assert problems == ["unknown setting `arhc`"]
    assert s.defines == ("X=1",)


def test_not_an_object():
    s, problems = settings_from_dict(["sm_90"])
    assert s == Settings() and "must be an object" in problems[0]


def test_null_clears_optional_values_only():
    base, _ = settings_from_dict({"llm": {"model": "m", "apiKey": "sk-secret"}, "defaultDevice": True})
    s, problems = settings_from_dict({"llm": {"model": None}, "defaultDevice": None}, base)
    assert problems == [] and s.llm_model is None and s.default_device is True


def test_api_key_never_in_repr():
    s, _ = settings_from_dict({"llm": {"apiKey": "sk-very-secret"}})
    assert s.llm_api_key == "sk-very-secret"
    assert "sk-very-secret" not in repr(s)


def test_compile_options_resolve_relative_include_dirs():
    s, _ = settings_from_dict({"includeDirs": ["inc", "/abs/inc"], "defines": ["N=4"], "defaultDevice": True})
    opts = s.compile_options("sm_90", base_dir="/work/proj")
    assert opts.include_dirs == ("/work/proj/inc", "/abs/inc")
    assert opts.defines == ("N=4",) and opts.default_device and opts.arch == "sm_90"


def test_pyproject_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernel-lsp]\narch = ["sm_80"]\ninclude = ["include"]\nexclude = ["third_party"]\n'
        "default-device = true\nbogus = 1\n"
    )
    (tmp_path / "src").mkdir()
    assert find_pyproject(str(tmp_path / "src")) == str(tmp_path / "pyproject.toml")
    s, problems = settings_from_pyproject(str(tmp_path / "pyproject.toml"))
    assert s.arch == ("sm_80",) and s.default_device is True
    assert s.include_dirs == (os.path.join(str(tmp_path), "include"),)
    assert s.exclude == (os.path.join(str(tmp_path), "third_party"),)
    assert len(problems) == 1 and "unknown setting `bogus`" in problems[0]


def test_broken_pyproject_is_a_problem_not_a_crash(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.kernel-lsp\narch = ")
    s, problems = settings_from_pyproject(str(p))
    assert s == Settings() and "cannot read" in problems[0]
    s, problems = settings_from_pyproject(str(tmp_path / "missing.toml"))
    assert s == Settings() and problems


def test_compiler_and_host_check_settings_reach_the_compile_options(tmp_path):
    s, problems = settings_from_dict({"kernelLsp": {"compiler": "nvcc", "hostCheck": True}})
    assert problems == []
    options = s.compile_options("sm_90")
    assert (options.compiler, options.host_check) == ("nvcc", True)
    s, problems = settings_from_dict({"compiler": "gcc", "hostCheck": "yes"})
    assert (s.compiler, s.host_check) == ("auto", False)
    assert any("expected one of auto, nvrtc, nvcc" in p for p in problems)
    assert any("hostCheck" in p and "expected true or false" in p for p in problems)
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-lsp]\ncompiler = "nvrtc"\nhost-check = true\n')
    s, problems = settings_from_pyproject(str(tmp_path / "pyproject.toml"))
    assert problems == [] and (s.compiler, s.host_check) == ("nvrtc", True)


def test_compiler_flags_on_the_cli(tmp_path):
    import argparse

    from kernel_lsp.cli.flags import add_compile_flags, resolve_settings

    p = argparse.ArgumentParser()
    add_compile_flags(p)
    s, problems = resolve_settings(p.parse_args(["--compiler", "nvcc", "--host-check"]), str(tmp_path))
    assert problems == [] and (s.compiler, s.host_check) == ("nvcc", True)


def test_every_vs_code_setting_reaches_the_server_without_a_problem():
    # The extension sends its whole section (package.json's defaults where the user set nothing)
    # as initializationOptions: each one must be a setting the server knows.
    import json
    from pathlib import Path

    manifest = Path(__file__).resolve().parents[2] / "editor-client" / "package.json"
    properties = json.loads(manifest.read_text())["contributes"]["configuration"]["properties"]
    defaults = {key: schema["default"] for key, schema in properties.items()}
    settings, problems = settings_from_dict(defaults)
    assert problems == []
    assert settings == Settings()
    chosen, problems = settings_from_dict(
        {
            "kernelLsp.evaluation.backend": "ray",
            "kernelLsp.gpu.devices": "all",
            "kernelLsp.cluster.address": "ray://h:1",
        }
    )
    assert problems == [] and (chosen.evaluation_backend, chosen.gpu_devices, chosen.cluster_address) == (
        "ray",
        "all",
        "ray://h:1",
    )


def test_the_gpus_flag_is_read_without_asking_the_machine(monkeypatch, tmp_path):
    """`--gpus all` is syntax when the command line is read: the GPUs are counted when they
    open. An nvidia-smi on the PATH: running it (a process) would fail this unit-tier test."""
    import argparse

    import pytest

    from kernel_lsp.cli.flags import gpus_arg

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: fake'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus_arg(" All ") == "all" and gpus_arg("2") == "2"
    for bad in ("0", "two", "-1", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="`all` or a number of GPUs"):
            gpus_arg(bad)
    s, problems = settings_from_dict({"gpu.devices": "ALL"})
    assert problems == [] and s.gpu_devices == "all"
    _, problems = settings_from_dict({"gpu.devices": True})
    assert problems and "positive number of GPUs" in problems[0]
