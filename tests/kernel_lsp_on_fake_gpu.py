"""kernel-lsp (the language server, or a CLI command: the same arguments as `python -m
kernel_lsp`) on the fake GPU (kernel_lsp/runner/fake.py): the GPU road without a GPU, for tests and
benchmarks that start kernel-lsp as a process. The choice is injected here, in this launcher's
process, as tests/e2e/server_with_test_evaluator.py injects its evaluator: kernel-lsp reads no
setting that could select the fake GPU, and its backends hand the choice to their worker processes
themselves (`--fake`, a job's "fake", a Ray actor's argument)."""

import sys

from kernel_lsp.__main__ import main
from kernel_lsp.evaluation import local

local.FAKE_GPU_DEFAULT = True

# Guarded: the compile workers start with "spawn", which imports this file again.
if __name__ == "__main__":
    sys.exit(main())
