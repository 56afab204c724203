"""Kernel launches read from host code (see launches.py), as plain data (model.py)."""

from .launches import argument_root, bounds_threads, launch_bounds, parse_host
from .model import (
    HostCall,
    HostCode,
    HostFunction,
    HostLaunch,
    LaunchArgument,
    LaunchBounds,
    Quantity,
    launch_matches,
)

__all__ = [
    "HostCall",
    "HostCode",
    "HostFunction",
    "HostLaunch",
    "LaunchArgument",
    "LaunchBounds",
    "Quantity",
    "argument_root",
    "bounds_threads",
    "launch_bounds",
    "launch_matches",
    "parse_host",
]
