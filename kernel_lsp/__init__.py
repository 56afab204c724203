"""kernel-lsp: a language server and checker for CUDA kernels."""

__version__ = "0.1.0"
