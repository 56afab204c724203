"""The package list, which pyproject.toml cannot express: the optimizer's source is the top-level
optimizer/ folder (the project brief's layout), installed as `kernel_lsp.optimizer` - a top-level
`optimizer` import name would collide with users' own modules. Everything else is in pyproject.toml.

kernel_lsp/optimizer is a link to ../optimizer: through it a checkout on PYTHONPATH (the tests,
the helpers, the Python children they start), an editable install (setuptools' import finder maps
kernel_lsp to the checkout's kernel_lsp/, and never puts the checkout, so `optimizer`, on sys.path)
and mypy import kernel_lsp.optimizer. A wheel does not need the link (the editor-client's wheel is
built from a copy without links): the packages under optimizer/ are listed here by their installed
names, and `package_dir` points them at optimizer/."""

from setuptools import find_packages, setup

OPTIMIZER = "kernel_lsp.optimizer"

setup(
    packages=[
        *find_packages(include=["kernel_lsp", "kernel_lsp.*"], exclude=[OPTIMIZER, OPTIMIZER + ".*"]),
        *(
            OPTIMIZER + name.removeprefix("optimizer")
            for name in find_packages(include=["optimizer", "optimizer.*"])
        ),
    ],
    package_dir={OPTIMIZER: "optimizer"},
)
