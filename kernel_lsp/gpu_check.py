"""GPU verification for `--check`: filled in once the GPU session lands."""
