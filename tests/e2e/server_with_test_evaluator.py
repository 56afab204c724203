"""The language server with the optimizer's GPU gates replaced by kernel_lsp.optimizer.testing's
stand-in (rules from KERNEL_LSP_TEST_RULES): the editor tests' FSR on a machine without a GPU.
The test injects it here, in its own launcher; the server reads nothing that could name it."""

import sys

from kernel_lsp.__main__ import main
from kernel_lsp.optimizer import evaluator, testing

evaluator.INJECTED = testing.make_content_evaluator

# Guarded: the server's compile workers start with "spawn", which imports this file again.
if __name__ == "__main__":
    sys.exit(main())
