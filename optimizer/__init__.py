"""FSR optimization (Feature Search and Reinforcement, arXiv 2506.09092) for CUDA kernels.

loop.py        the rounds: propose → compile → verify → time → feed back; the A/B decision
evaluator.py   the gates behind one interface (GpuEvaluator over kernel_lsp.gpu.GpuSession)
proposers/     llm.py (openai client, any OpenAI-compatible endpoint), tuner.py (offline search)
strategies/    the tuner's search strategies (hill_climb, annealing, random_sample, brute_force)
features.py    what the proposer is given; prompts/ the LLM prompt templates
extract.py     a whole .cu out of an LLM answer
report.py      the JSON + Markdown report of every run; cli.py `kernel-lsp optimize`
session.py     one run from a path and a kernel name (the CLI's and the server's entry)
"""
