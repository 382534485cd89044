"""Is there an NVIDIA GPU here? Decided once, from the filesystem alone: never from the driver.

FIELD-NOTES: on a machine without a GPU a failed driver call can leave a lock held and hang later
calls, so "no GPU" must be decided before anything loads libcuda. ``AOTX_CUDA=0`` forces no,
``AOTX_CUDA=1`` forces yes.
"""
from __future__ import annotations

import functools
import glob
import os

ENV = "AOTX_CUDA"


@functools.lru_cache(maxsize=1)
def gpu_present() -> bool:
    forced = os.environ.get(ENV)
    if forced in ("0", "1"):
        return forced == "1"
    if glob.glob("/proc/driver/nvidia/gpus/*"):
        return True
    return os.path.exists("/dev/nvidia0") and os.path.exists("/dev/nvidiactl")
