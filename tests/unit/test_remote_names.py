"""An editor on a machine without a GPU, figures from a cluster's: the status bar's device, the
hover's and an optimize result's name the host that holds the GPU; a local GPU stays as before."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from kernel_lsp.optimizer.session import _where as optimize_where
from kernel_lsp.server.requests.hover import _where as hover_where
from kernel_lsp.workspace import gpu_name


def test_a_remote_gpu_is_named_with_its_host_and_a_local_one_as_before():
    here = socket.gethostname()
    device = SimpleNamespace(name="NVIDIA H200")
    assert gpu_name(device, "gpu-host") == "NVIDIA H200 on gpu-host"
    assert gpu_name(device, here) == "NVIDIA H200"
    assert gpu_name(device, "") == "NVIDIA H200"
    assert gpu_name(None, "gpu-host") == "GPU on gpu-host"  # a device that did not say its name
    assert hover_where(SimpleNamespace(device=device, host="gpu-host"), "GPU") == "NVIDIA H200 on gpu-host"
    assert hover_where(SimpleNamespace(device=device, host=here), "GPU") == "NVIDIA H200"
    assert (
        hover_where(SimpleNamespace(device=None, host=""), "NVIDIA H200 on gpu-host")
        == "NVIDIA H200 on gpu-host"
    )


def test_an_optimize_result_names_the_ray_host():
    from kernel_lsp.evaluation.local import LocalBackend

    ray_like = SimpleNamespace(session=SimpleNamespace(backend=SimpleNamespace(host="gpu-host")))
    assert optimize_where(ray_like, "NVIDIA H200") == "NVIDIA H200 on gpu-host (Ray)"
    local = LocalBackend.__new__(LocalBackend)
    local.host = "gpu-host"
    assert (
        optimize_where(SimpleNamespace(session=SimpleNamespace(backend=local)), "NVIDIA H200")
        == "NVIDIA H200"
    )
    assert optimize_where(SimpleNamespace(), "NVIDIA H200") == "NVIDIA H200"
