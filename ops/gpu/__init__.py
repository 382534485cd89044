"""GPU-only scripts (run on the H200 through the device tool): gpu-check and gpu-bench."""
