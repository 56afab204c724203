"""One wording per message (issue 14, item 11): no GPU, the host-code advice per front end,
occupancy's limiter."""

from __future__ import annotations

import pytest

from kernel_lsp.archs import occupancy
from kernel_lsp.cli.formats import format_resources
from kernel_lsp.gpu import no_gpu_message
from kernel_lsp.hostcode import find_host_code, host_code_message
from kernel_lsp.model import Diagnostic, KernelResources, Severity
from kernel_lsp.optimizer.session import OptimizeError, RunRequest, run
from kernel_lsp.server.convert import to_lsp
from kernel_lsp.server.requests.hover import resources_markdown

# What cuda.bindings says on a machine without the NVIDIA driver (seen in the worker's hello).
DRIVER_LOADER_TEXT = (
    'no CUDA driver: "cuda" is an NVIDIA driver library and can only be found via system search. '
    "Ensure the NVIDIA display driver is installed."
)


def test_no_gpu_is_worded_once_without_the_loaders_text():
    msg = no_gpu_message(DRIVER_LOADER_TEXT)
    assert msg == "no GPU: no NVIDIA driver is installed (libcuda cannot be loaded)"
    assert (
        no_gpu_message("CUDA_VISIBLE_DEVICES hides every GPU")
        == "no GPU: CUDA_VISIBLE_DEVICES hides every GPU"
    )
    # A reason that ends its own sentence does not end ours: no "..", one sentence only.
    assert no_gpu_message("cuInit failed: CUDA_ERROR_UNKNOWN. Try again.") == (
        "no GPU: cuInit failed: CUDA_ERROR_UNKNOWN"
    )
    assert no_gpu_message("") == "no GPU: none found"


class _NoGpuEvaluator:
    available = False
    reason = DRIVER_LOADER_TEXT

    def close(self) -> None:
        pass


def test_optimize_without_a_gpu_says_so_in_one_sentence(samples_dir):
    cu = samples_dir / "vector_add" / "vector_add_fp32.cu"
    with pytest.raises(OptimizeError) as e:
        run(RunRequest(path=str(cu), kernel="vector_add"), evaluator=_NoGpuEvaluator())
    text = str(e.value)
    assert text.startswith("no GPU: no NVIDIA driver is installed (libcuda cannot be loaded). FSR ")
    assert ".." not in text and "system search" not in text


def test_host_code_advice_names_the_cli_flag_on_the_cli_and_the_setting_in_the_editor():
    message = host_code_message(find_host_code("int main(){}\n"))
    assert "--default-device" in message and "kernelLsp." not in message
    d = Diagnostic("x.cu", 1, 1, Severity.ERROR, message, code="host-code", source="kernel-lsp")
    in_editor = to_lsp(d).message
    assert "kernelLsp.defaultDevice" in in_editor and "--default-device" not in in_editor
    assert "#ifndef __CUDACC_RTC__" in in_editor


def test_missing_header_advice_names_the_flag_on_the_cli_and_the_setting_in_the_editor(tmp_path):
    from kernel_lsp.check import check_source
    from kernel_lsp.config import Settings

    source = '#include "absent.cuh"\n__global__ void k() {}\n'
    (d,) = check_source(source, str(tmp_path / "k.cu"), Settings(arch=("sm_90",))).diagnostics
    assert "-I/--include DIR" in d.message and "kernelLsp." not in d.message
    in_editor = to_lsp(d).message
    assert "kernelLsp.includeDirs" in in_editor and "--include" not in in_editor


@pytest.mark.parametrize(
    ("registers", "block", "words"),
    [(32, 256, "limited by the SM's warp slots"), (128, 256, "limited by registers")],
)
def test_occupancy_reads_the_same_in_hover_and_cli(registers, block, words):
    occ = occupancy("sm_90", block, registers, 0)
    k = KernelResources("k", "_Z1kv", "sm_90", registers, 0, 0, 0, 0, block_size=block, occupancy=occ)
    text = occ.describe()
    assert words in text and f"at {block} threads/block" in text
    assert text in format_resources(k) and text in resources_markdown("k", [k])
    assert "warps; " not in resources_markdown("k", [k])


def test_optimize_without_a_gpu_or_a_key_says_what_is_missing_and_how_to_get_each(monkeypatch):
    from kernel_lsp.config import Settings
    from kernel_lsp.optimizer.requirements import GET_A_GPU, fsr_cannot_run

    for name in ("OPENAI_API_KEY", "OPENAI_MODEL", "KERNEL_LSP_LLM_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    no_gpu = no_gpu_message(DRIVER_LOADER_TEXT)
    neither = fsr_cannot_run(no_gpu, Settings())
    assert neither.startswith(f"{no_gpu}. {GET_A_GPU}.")
    assert "--backend ray" in neither  # another way to a GPU
    assert "No LLM is configured either" in neither and "OPENAI_API_KEY" in neither and "--model" in neither
    assert "--proposer tune" in neither  # what runs without one
    # A model without a key: the key is what is missing.
    keyless = fsr_cannot_run(no_gpu, Settings(llm_model="some-model"))
    assert "has no API key" in keyless and "No LLM is configured" not in keyless
    # The tuner needs no LLM, and a configured LLM lacks nothing: the GPU alone.
    assert fsr_cannot_run(no_gpu, Settings(), proposer="tune") == f"{no_gpu}. {GET_A_GPU}."
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert fsr_cannot_run(no_gpu, Settings(llm_model="m")) == f"{no_gpu}. {GET_A_GPU}."


def test_the_cli_optimize_says_both(monkeypatch, capsys, samples_dir):
    from kernel_lsp.cli import main

    for name in ("OPENAI_API_KEY", "OPENAI_MODEL", "KERNEL_LSP_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, on any machine
    cu = samples_dir / "vector_add" / "vector_add_fp32.cu"
    assert main(["optimize", str(cu)]) == 2
    err = capsys.readouterr().err
    assert "no GPU: CUDA_VISIBLE_DEVICES hides every GPU. FSR verifies and times every candidate" in err
    assert "No LLM is configured either" in err


def test_no_gpu_reads_the_same_in_the_cli_check_hover_and_the_action(capsys, samples_dir):
    from kernel_lsp.cli import main
    from kernel_lsp.compile import local_gpu_arch
    from kernel_lsp.config import Settings
    from kernel_lsp.gpu import LocalBackend, local_gpu_absence
    from kernel_lsp.workspace import Workspace

    if local_gpu_arch() is not None:
        pytest.skip("this machine has a GPU")
    probe = LocalBackend(fake=False)  # what hover's GPU probe answers
    try:
        hover_words = no_gpu_message(probe.reason)
    finally:
        probe.close()
    assert hover_words == no_gpu_message(local_gpu_absence())
    # The CLI and the editor's action ask the Workspace; Ray's GPUs are the cluster's, not this machine's.
    assert Workspace.fixed(Settings()).gpu_absence() == hover_words
    assert Workspace.fixed(Settings(evaluation_backend="ray")).gpu_absence() is None
    assert main(["check", "--arch", "sm_90", str(samples_dir / "vector_add" / "vector_add_fp32.cu")]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.endswith(f"not verified on a GPU ({hover_words})"), summary
