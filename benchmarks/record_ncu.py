"""Record real Nsight Compute output for the CI stand-in (tests/fixtures/fake_ncu.py) and time the
profiling run per kernel. Run on a GPU host with ncu:

    python benchmarks/record_ncu.py OUT_DIR [samples/reduce_sum/reduce_sum_fp32.cu ...]

For each sample it verifies and times the kernel (GpuSession.check), writes the profiled job the
way GpuSession does, and runs ncu on it in several ways, each timed (wall seconds):
  minimal   the two occupancy metrics (the cost before issue 15)
  sections  the sections kernel_lsp.runner.profile asks for, `--import-source yes`, to a report
  full      `--set full` (for comparison of cost only)
then prints the report's pages (raw, details, source as cuda / sass / cuda,sass). Everything lands
in OUT_DIR/<sample>/; OUT_DIR/probe/ holds ncu's version, help, sections and sets;
OUT_DIR/timings.json the wall times. Nothing here raises on a failing ncu: its output is recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_SAMPLES = [
    "samples/reduce_sum/reduce_sum_fp32.cu",
    "samples/stencil2d/stencil2d_fp32.cu",
    "samples/gemm/gemm_fp32.cu",
    "samples/gemm/gemm_bf16.cu",
    "samples/vector_add/vector_add_fp32.cu",
]
DEADLINE_S = float(os.environ.get("RECORD_DEADLINE_S", "330"))
HARD_STOP_S = float(os.environ.get("RECORD_HARD_STOP_S", "390"))
START = time.monotonic()


def run(cmd: list[str], out_base: str, timeout: float = 120.0, env: dict | None = None) -> dict:
    timeout = max(5.0, min(timeout, HARD_STOP_S - (time.monotonic() - START)))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = (
            124,
            (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""),
            "TIMEOUT",
        )
    except OSError as e:
        rc, so, se = 127, "", str(e)
    wall = time.perf_counter() - t0
    with open(out_base + ".out", "w") as f:
        f.write(so)
    if se.strip():
        with open(out_base + ".err", "w") as f:
            f.write(se)
    with open(out_base + ".cmd", "w") as f:
        f.write(json.dumps({"cmd": cmd, "rc": rc, "wall_s": wall}) + "\n")
    print(f"  rc={rc} {wall:6.2f}s {os.path.basename(out_base)}", flush=True)
    return {"rc": rc, "wall_s": wall}


def probe(ncu: str, out: str) -> list[str]:
    d = os.path.join(out, "probe")
    os.makedirs(d, exist_ok=True)
    run([ncu, "--version"], os.path.join(d, "version"))
    run([ncu, "--help"], os.path.join(d, "help"))
    run([ncu, "--list-sections"], os.path.join(d, "list-sections"))
    run([ncu, "--list-sets"], os.path.join(d, "list-sets"))
    run(["nvidia-smi"], os.path.join(d, "nvidia-smi"))
    with open(os.path.join(d, "list-sections.out")) as f:
        text = f.read()
    return text.split()


EXTRA_METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
]


def main(argv: list[str]) -> int:
    from kernel_lsp.compile import CompileOptions
    from kernel_lsp.gpu import GpuCheckRequest, GpuSession
    from kernel_lsp.model import TimingSettings
    from kernel_lsp.runner.limiter import ACHIEVED, THEORETICAL
    from kernel_lsp.runner.profile import SECTIONS, find_ncu
    from kernel_lsp.spec import load_specs, spec_path_for

    out = os.path.abspath(argv[0])
    samples = argv[1:] or DEFAULT_SAMPLES
    os.makedirs(out, exist_ok=True)
    ncu = find_ncu()
    print("ncu:", ncu, flush=True)
    if ncu is None:
        return 2
    known = probe(ncu, out)
    sections = [s for s in SECTIONS if s in known]
    print("sections:", sections, flush=True)
    timings: dict = {"sections": sections, "samples": {}}
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with GpuSession(timing=TimingSettings(budget_s=0.2)) as gpu:
        print("device:", gpu.device.name if gpu.device else gpu.reason, flush=True)
        for sample in samples:
            if time.monotonic() - START > DEADLINE_S:
                print("deadline: skipping", sample, flush=True)
                continue
            path = os.path.join(ROOT, sample)
            name = os.path.splitext(os.path.basename(sample))[0]
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            print("==", name, flush=True)
            with open(path) as f:
                source = f.read()
            loaded = load_specs(spec_path_for(path))
            spec = loaded.specs[0]
            options = CompileOptions()
            t0 = time.perf_counter()
            check = gpu.check(
                GpuCheckRequest(source, path, kernel=spec.kernel, spec=loaded, artifact=options)
            )
            check_s = time.perf_counter() - t0
            print(f"  check {check.status} {check.headline} ({check_s:.1f}s)", flush=True)
            entry: dict = {"check": check.status, "headline": check.headline, "check_s": check_s}
            timings["samples"][name] = entry
            if not (check.ok and check.timings):
                continue
            cubin, symbols, _ = gpu._build(source, path, spec.kernels, options)
            steps, _ = gpu._steps(spec, source, symbols, ())
            timed = check.timings[-1]
            job = {
                "spec": gpu._spec_desc(spec, None),
                "steps": steps,
                "sizes": timed.sizes,
                "case": timed.case,
                "device": gpu.device_index,
                "fake": False,
            }
            job_dir = os.path.join(d, "job")
            os.makedirs(job_dir, exist_ok=True)
            with open(os.path.join(job_dir, "job.json"), "w") as f:
                json.dump(job, f)
            with open(os.path.join(job_dir, "kernel.cubin"), "wb") as f:
                f.write(cubin)
            entry["case"] = timed.case
            entry["symbols"] = {symbols[k]: k for k in spec.kernels}
            entry["median_s"] = timed.measurement.median_s
            pattern = "|".join(sorted({symbols[k].replace("$", r"\$") for k in spec.kernels}))
            prog = [sys.executable, "-m", "kernel_lsp.runner.profile", job_dir]
            common = [
                "--kernel-name-base",
                "mangled",
                "--print-kernel-base",
                "mangled",
                "-k",
                f"regex:^({pattern})$",
            ]
            # bare process (no ncu): what the process itself costs
            entry["bare"] = run(prog, os.path.join(d, "bare"), env=env)
            entry["minimal"] = run(
                [ncu, "--csv", "--metrics", f"{ACHIEVED},{THEORETICAL}", *common, *prog],
                os.path.join(d, "minimal"),
                env=env,
            )
            rep = os.path.join(d, "sections")
            sec_args = [a for s in sections for a in ("--section", s)]
            entry["sections"] = run(
                [ncu, "-f", "-o", rep, "--import-source", "yes", *sec_args, *common, *prog],
                os.path.join(d, "sections-collect"),
                env=env,
            )
            rep2 = os.path.join(d, "sections_metrics")
            entry["sections_metrics"] = run(
                [
                    ncu,
                    "-f",
                    "-o",
                    rep2,
                    "--import-source",
                    "yes",
                    *sec_args,
                    "--metrics",
                    ",".join(EXTRA_METRICS),
                    *common,
                    *prog,
                ],
                os.path.join(d, "sections_metrics-collect"),
                env=env,
            )
            for r, tag in ((rep, "sections"), (rep2, "sections_metrics")):
                if not os.path.exists(r + ".ncu-rep"):
                    continue
                i = [ncu, "-i", r + ".ncu-rep", "--print-kernel-base", "mangled"]
                run([*i, "--page", "raw", "--csv"], os.path.join(d, f"{tag}-raw"))
                run(
                    [*i, "--page", "raw", "--csv", "--print-units", "base"],
                    os.path.join(d, f"{tag}-raw-base"),
                )
                if tag == "sections":
                    run([*i, "--page", "details", "--csv"], os.path.join(d, f"{tag}-details-csv"))
                    run([*i, "--page", "details"], os.path.join(d, f"{tag}-details"))
                    run(
                        [*i, "--page", "source", "--csv", "--print-source", "cuda,sass"],
                        os.path.join(d, f"{tag}-source-cuda-sass"),
                    )
                    run(
                        [*i, "--page", "source", "--csv", "--print-source", "sass"],
                        os.path.join(d, f"{tag}-source-sass"),
                    )
                    run(
                        [*i, "--page", "source", "--print-source", "cuda"],
                        os.path.join(d, f"{tag}-source-cuda-text"),
                    )
                run(
                    [*i, "--page", "source", "--csv", "--print-source", "cuda"],
                    os.path.join(d, f"{tag}-source-cuda"),
                )
            if time.monotonic() - START < DEADLINE_S - 60:
                rep3 = os.path.join(d, "full")
                entry["full"] = run(
                    [ncu, "-f", "-o", rep3, "--set", "full", "--import-source", "yes", *common, *prog],
                    os.path.join(d, "full-collect"),
                    env=env,
                )
                if os.path.exists(rep3 + ".ncu-rep"):
                    run([ncu, "-i", rep3 + ".ncu-rep", "--page", "raw", "--csv", "--print-units", "base"], os.path.join(d, "full-raw-base"))  # fmt: skip
                    os.remove(rep3 + ".ncu-rep")
            for r in (rep, rep2):  # pages are printed; the binary reports stay behind
                if os.path.exists(r + ".ncu-rep"):
                    os.remove(r + ".ncu-rep")
            with open(os.path.join(out, "timings.json"), "w") as f:
                json.dump(timings, f, indent=1)
    with open(os.path.join(out, "timings.json"), "w") as f:
        json.dump(timings, f, indent=1)
    print("table: sample, check s, bare s, minimal s, sections s, sections+metrics s, full s", flush=True)
    for name, e in timings["samples"].items():
        cells = [f"{e.get(k, {}).get('wall_s', float('nan')):.2f}" for k in ("bare", "minimal", "sections", "sections_metrics", "full")]  # fmt: skip
        print(name, f"{e['check_s']:.1f}", *cells, e.get("headline", ""), flush=True)
    shutil.rmtree(os.path.join(out, "__pycache__"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
