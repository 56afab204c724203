"""The evaluation stage without a GPU: entry symbols from a compiled artifact (C++ mangled names,
template instances), launch steps, and checks through GpuSession over the fake worker, with
artifacts shaped like the nvcc backend's (mangled entries of a host+device file)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from kernel_lsp.evaluation.pool import BackendPool, parse_gpus
from kernel_lsp.evaluation.specs import instance_name, kernel_symbols, launch_steps
from kernel_lsp.gpu import GpuCompareRequest, GpuSession, check_file
from kernel_lsp.model import CompileResult, KernelResources, TimingSettings
from kernel_lsp.runner.fake import fake_cubin
from kernel_lsp.spec import load_specs

HOST_DEVICE = """\
#include <cstdio>
#include <cuda_runtime.h>

// kernel-lsp: launch vadd grid=cdiv(n, 256) block=256
__global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main()
{
    float *a, *b, *c;
    cudaMalloc(&a, 4096); cudaMalloc(&b, 4096); cudaMalloc(&c, 4096);
    vadd<<<4, 256>>>(a, b, c, 1024);
    printf("%d\\n", (int)cudaDeviceSynchronize());
}
"""

TEMPLATE = """\
// kernel-lsp: launch scale grid=cdiv(n, 256) block=256
template <typename T>
__global__ void scale(const T* a, const T* b, T* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
template __global__ void scale<float>(const float*, const float*, float*, int);
template __global__ void scale<double>(const double*, const double*, double*, int);
"""

VADD_MANGLED = "_Z4vaddPKfS0_Pfi"
SCALE_FLOAT = "_Z5scaleIfEvPKT_S2_PS0_i"
SCALE_DOUBLE = "_Z5scaleIdEvPKT_S2_PS0_i"


def spec_text(kernel: str) -> str:
    return textwrap.dedent(
        f"""\
        from kernel_lsp.spec import In, Out, Scalar, Spec
        SPEC = Spec(
            kernel="{kernel}",
            sizes=[{{"n": 1}}, {{"n": 1000}}],
            timing_sizes=[{{"n": 4096}}],
            args={{"a": In("float32"), "b": In("float32"), "c": Out("float32"), "n": Scalar("int32")}},
            reference=lambda a, b: {{"c": a + b}},
        )
        """
    )


def artifact(path: str, entries: dict[str, tuple[str, str]]) -> CompileResult:
    """What a compiler backend returns for `entries` {source name: (symbol, fake behaviour)}."""
    kernels = [KernelResources(name, sym, "sm_90", 16, 0, 0, 0, 0) for name, (sym, _) in entries.items()]
    cubin = fake_cubin({sym: behaviour for sym, behaviour in entries.values()})
    return CompileResult(path, "sm_90", True, kernels=kernels, cubin=cubin)


def write(tmp_path: Path, name: str, source: str, kernel: str) -> Path:
    cu = tmp_path / f"{name}.cu"
    cu.write_text(source)
    (tmp_path / f"{name}.spec.py").write_text(spec_text(kernel))
    return cu


@pytest.fixture(scope="module")
def gpu():
    # Warm L2: no speed-of-light bound, which the fake's instant kernel can fall under when the
    # copy bandwidth was measured on a busy CPU.
    timing = TimingSettings(cold_l2=False, budget_s=0.2)
    with GpuSession(fake=True, launch_timeout_s=2.0, timing=timing) as s:
        yield s


# --- entry symbols -------------------------------------------------------------------------------


def test_spec_names_match_plain_and_template_entries():
    art = artifact(
        "t.cu",
        {
            "vadd": (VADD_MANGLED, "vadd"),
            "scale<float>": (SCALE_FLOAT, "vadd"),
            "scale<double>": (SCALE_DOUBLE, "const"),
            "ns::total<float>": ("_ZN2ns5totalIfEEvPf", "vadd"),
        },
    )
    found, problems = kernel_symbols(art, ["vadd", "scale<float>", "scale< double >", "total"])
    assert found == {
        "vadd": VADD_MANGLED,
        "scale<float>": SCALE_FLOAT,
        "scale< double >": SCALE_DOUBLE,
        "total": "_ZN2ns5totalIfEEvPf",  # the one instance of `total`
    }
    assert problems == []
    found, problems = kernel_symbols(art, ["scale", "scale<int>", "gone"])
    assert found == {}
    assert (
        "2 instances (scale<double>, scale<float>)" in problems[0] and 'kernel="scale<double>"' in problems[0]
    )
    assert "scale<int>" in problems[1] and "explicit instantiation" in problems[1]
    assert "`gone` not in the compiled module" in problems[2]


def test_entry_symbols_fall_back_to_the_cubin_string_table():
    # A log without resource lines: the artifact names no kernel, the CUBIN still has the entry.
    art = CompileResult(
        "v.cu", "sm_90", True, cubin=b"\0.text._Z4vaddPKfS0_Pfi\0" + VADD_MANGLED.encode() + b"\0"
    )
    assert kernel_symbols(art, ["vadd"]) == ({"vadd": VADD_MANGLED}, [])


def test_launch_steps_of_a_template_instance(tmp_path):
    cu = write(tmp_path, "scale", TEMPLATE, "scale<float>")
    spec = load_specs(str(tmp_path / "scale.spec.py")).specs[0]
    art = artifact(str(cu), {"scale<float>": (SCALE_FLOAT, "vadd"), "scale<double>": (SCALE_DOUBLE, "const")})
    steps, problems = launch_steps(spec, TEMPLATE, art)
    assert problems == []
    assert [(s["kernel"], s["symbol"], s["params"], s["block"]) for s in steps] == [
        ("scale<float>", SCALE_FLOAT, ["a", "b", "c", "n"], "256")
    ]


# --- checks through the session, with backend-shaped artifacts -----------------------------------


def test_a_kernel_of_a_host_device_file_is_verified_and_timed(gpu, tmp_path):
    cu = write(tmp_path, "hd", HOST_DEVICE, "vadd")
    art = artifact(str(cu), {"vadd": (VADD_MANGLED, "vadd")})
    [check] = check_file(gpu, str(cu), artifact=art)
    assert check.ok, check.message
    assert check.timings and check.timings[-1].case == "n=4096"
    assert check.device_index == 0 and check.host


def test_a_wrong_host_device_kernel_fails_at_its_line(gpu, tmp_path):
    cu = write(tmp_path, "hd", HOST_DEVICE, "vadd")
    [check] = check_file(gpu, str(cu), artifact=artifact(str(cu), {"vadd": (VADD_MANGLED, "const")}))
    assert check.status == "failed"
    assert check.diagnostics[0].line == 5  # the definition of vadd, below the includes


def test_the_named_template_instance_is_the_one_that_runs(gpu, tmp_path):
    cu = write(tmp_path, "scale", TEMPLATE, "scale<float>")
    right = artifact(
        str(cu), {"scale<float>": (SCALE_FLOAT, "vadd"), "scale<double>": (SCALE_DOUBLE, "const")}
    )
    [check] = check_file(gpu, str(cu), artifact=right)
    assert check.ok and check.kernel == "scale<float>"
    assert check.diagnostics == []
    # The same file whose float instance is wrong: the check sees it, so it ran that instance.
    wrong = artifact(
        str(cu), {"scale<float>": (SCALE_FLOAT, "const"), "scale<double>": (SCALE_DOUBLE, "vadd")}
    )
    [check] = check_file(gpu, str(cu), artifact=wrong)
    assert check.status == "failed"
    assert check.diagnostics[0].line == 3  # the template's definition


def test_a_template_named_without_its_instance_is_a_spec_error(gpu, tmp_path):
    cu = write(tmp_path, "scale", TEMPLATE, "scale")
    art = artifact(str(cu), {"scale<float>": (SCALE_FLOAT, "vadd"), "scale<double>": (SCALE_DOUBLE, "vadd")})
    [check] = check_file(gpu, str(cu), artifact=art)
    assert check.status == "spec_error"
    assert 'kernel="scale<double>"' in check.message
    assert check.diagnostics[0].path.endswith("scale.spec.py")


def test_compare_runs_both_sides_on_one_device(gpu, tmp_path):
    cu = write(tmp_path, "hd", HOST_DEVICE, "vadd")
    slow = artifact(str(cu), {"vadd": (VADD_MANGLED, "slow")})
    fast = artifact(str(cu), {"vadd": (VADD_MANGLED, "vadd")})
    request = GpuCompareRequest(
        HOST_DEVICE, HOST_DEVICE, str(cu), kernel="vadd", baseline_artifact=slow, candidate_artifact=fast
    )
    c = gpu.compare(request)
    assert c.error is None and c.faster and c.speedup > 1.5
    assert (c.device_index, c.device_name) == (0, gpu.device.name)


def test_a_compile_error_artifact_is_reported_as_such(gpu, tmp_path):
    from kernel_lsp.model import Diagnostic, Severity

    cu = write(tmp_path, "hd", HOST_DEVICE, "vadd")
    error = Diagnostic(str(cu), 14, 5, Severity.ERROR, 'identifier "x" is undefined', source="nvcc")
    broken = CompileResult(str(cu), "sm_90", False, diagnostics=[error])
    [check] = check_file(gpu, str(cu), artifact=broken)
    assert check.status == "compile_error" and check.message == 'identifier "x" is undefined'


# --- the pool ------------------------------------------------------------------------------------


def test_parse_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert parse_gpus("all") == ([0, 1, 2], None)
    assert parse_gpus("2", first=1) == ([1, 2], None)
    assert parse_gpus(None, first=3) == ([3], None)
    devices, problem = parse_gpus("two")
    assert devices == [0] and "`two`" in (problem or "")


def test_pool_map_keeps_order_and_uses_every_member():
    import threading
    import time

    pool = BackendPool(["gpu0", "gpu1"])
    seen: dict[str, set[str]] = {}
    lock = threading.Lock()

    def job(member: str, item: int) -> int:
        time.sleep(0.05)
        with lock:
            seen.setdefault(member, set()).add(threading.current_thread().name)
        return item * 10

    assert pool.map(job, range(6)) == [0, 10, 20, 30, 40, 50]
    assert set(seen) == {"gpu0", "gpu1"}


def _fake_compile(self, source: str, path: str, options=None) -> CompileResult:
    """Stands in for compile_source on the fake GPU: `// fake: BEHAVIOUR` picks the kernel."""
    m = re.search(r"// fake: (\w+)", source)
    return artifact(path, {"vadd": (VADD_MANGLED, m.group(1) if m else "vadd")})


@pytest.mark.parametrize(
    ("mangled", "name"),
    [
        ("_Z5scaleIfEvPKT_S2_PS0_i", "scale<float>"),
        ("_Z3addILi4EEvPf", "add<4>"),
        ("_Z5totalI4PairEvPKT_PS1_i", "total<Pair>"),
        ("_ZN2ns5totalIdLb1EEEvPT_", "total<double, true>"),
        ("_Z4vaddPKfS0_Pfi", None),  # not a template
        ("vadd", None),  # extern "C"
        ("_Z5scaleIN2ns4PairEEvPT_", "scale<ns::Pair>"),  # a class argument inside a namespace
    ],
)
def test_instance_names_from_entry_symbols(mangled, name):
    assert instance_name(mangled) == name


def test_template_instances_of_a_real_nvrtc_compile(tmp_path):
    # NVRTC's artifact names both instances `scale`: the symbols tell them apart.
    from kernel_lsp.compile import CompileOptions, compile_source

    result = compile_source(TEMPLATE, str(tmp_path / "scale.cu"), CompileOptions(arch="sm_90"))
    assert result.ok, result.diagnostics
    found, problems = kernel_symbols(result, ["scale<float>", "scale<double>"])
    assert problems == []
    assert found == {"scale<float>": SCALE_FLOAT, "scale<double>": SCALE_DOUBLE}


# --- the optimizer keeps host code ---------------------------------------------------------------


def test_a_candidate_without_the_files_host_code_keeps_it():
    from kernel_lsp.optimizer.extract import extract_candidate

    answer = (
        "```cuda\n#include <cuda_runtime.h>\n// kernel-lsp: launch vadd grid=cdiv(n, 512) block=512\n"
        "__global__ void vadd(const float* a, const float* b, float* c, int n)\n{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = b[i] + a[i];\n}\n```\n"
        "Bigger blocks."
    )
    got = extract_candidate(answer, HOST_DEVICE, ["vadd"])
    assert got.source is not None and "keeping its host code" in got.message
    assert "int main()" in got.source and "vadd<<<4, 256>>>" in got.source
    assert "c[i] = b[i] + a[i]" in got.source and "c[i] = a[i] + b[i]" not in got.source
    assert "launch vadd grid=cdiv(n, 512) block=512" in got.source and "block=256" not in got.source
    # An answer that kept the host code is taken as it is.
    whole = "```cuda\n" + HOST_DEVICE.replace("a[i] + b[i]", "b[i] + a[i]") + "```"
    whole = whole.replace("cudaDeviceSynchronize());", "cudaDeviceSynchronize());\n    return 0;")
    kept = extract_candidate(whole, HOST_DEVICE, ["vadd"])
    assert kept.source is not None and "return 0;" in kept.source and "spliced" not in kept.message


def test_a_template_instance_candidate_is_extracted_by_its_template():
    from kernel_lsp.optimizer.extract import extract_candidate

    answer = "```cuda\n" + TEMPLATE.replace("c[i] = a[i] + b[i]", "c[i] = b[i] + a[i]") + "```"
    got = extract_candidate(answer, TEMPLATE, ["scale<float>"])
    assert got.source is not None and "c[i] = b[i] + a[i]" in got.source


def test_an_artifact_for_another_arch_is_refused_with_the_reason(gpu, tmp_path):
    cu = write(tmp_path, "hd", HOST_DEVICE, "vadd")
    art = artifact(str(cu), {"vadd": (VADD_MANGLED, "vadd")})
    art.arch = "sm_80"  # the fake GPU is sm_90
    [check] = check_file(gpu, str(cu), artifact=art)
    assert check.status == "compile_error"
    assert "compiled for sm_80" in check.message and "sm_90" in check.message
