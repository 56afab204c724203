"""One wording per message (issue 14, item 11): no GPU, the host-code advice per front end,
occupancy's limiter."""

from __future__ import annotations

import pytest

from kernel_lsp.archs import occupancy
from kernel_lsp.cli.formats import format_resources
from kernel_lsp.compile.hostcode import find_host_code, host_code_message
from kernel_lsp.gpu import no_gpu_message
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
