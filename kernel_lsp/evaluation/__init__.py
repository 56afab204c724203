"""The evaluation stage: compiled artifacts → a backend on a GPU → verdicts and measurements
(plain results: kernel_lsp/gpu_results.py).

specs.py         spec resolution: launch steps and entry symbols from a source and its artifact
backend.py       the EvaluationBackend protocol (check / compare / profile / device / close)
local.py         `local`: one GPU of this machine through a worker process
worker_process.py  the worker subprocess and its wire (runner/protocol.py)
pool.py          several backends, one per GPU, for parallel work
ray_backend.py   `ray`: one Ray actor per GPU owning a local backend (the only module importing ray)
choose.py        evaluation.backend / --backend → the backends of a run, and Ray's messages
"""
