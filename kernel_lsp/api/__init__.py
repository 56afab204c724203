"""The front door: what the front ends (`kernel_lsp/cli/`, `kernel_lsp/server/`) may import from
the engine, and nothing else (tests/unit/test_architecture.py checks it).

`kernel_lsp.workspace.Workspace` is the engine's API: settings per file, compile options, checks,
GPU sessions, verification, bench, spec skeletons. This package adds what sits above the
optimizer (`api.optimize`) and names the engine's types and pure helpers a front end renders,
each group in a module of its own so that a front end loads only what it uses (the server answers
`initialize` before the compilers load):

- `api.model`    plain results and their words (Diagnostic, KernelResources, codes, statuses);
- `api.checks`   checking files: CheckRequest, CheckScheduler, FileCheck, Settings, CompileOptions;
- `api.watching` the file watcher and the include graph;
- `api.sources`  a file's text read as kernels, launches and specs; spec skeletons; safe writes;
- `api.gpu`      GPU sessions and their results, profiles;
- `api.optimize` FSR runs (over the Workspace) and their reports.

rust-analyzer's `ide` crate is the model: it re-exports the types of the crates below it."""
