#!/usr/bin/env bash
# Prepare the H200 for gpu-check / gpu-bench (see README, "GPU"). Source it from the repo root:
#   . ops/gpu/on_device.sh            wheels only (.whl/ carried): gguf is not in the device image
#   . ops/gpu/on_device.sh stash      + copy .weights/part.aa (carried) to ~/aotx-weights/
#   . ops/gpu/on_device.sh assemble   + join ~/aotx-weights/part.aa with .weights/part.ab (carried),
#                                       check the sha256, export AOTX_MODEL_PATH
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || return 1 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AOTX_CUDA=1
mkdir -p ~/aotx-weights
case "${1:-}" in
  stash) cp .weights/part.aa ~/aotx-weights/part.aa && echo "stashed part 1 ($(stat -c %s ~/aotx-weights/part.aa) bytes)" ;;
  assemble)
    cat ~/aotx-weights/part.aa .weights/part.ab > ~/aotx-weights/model.gguf
    got=$(sha256sum ~/aotx-weights/model.gguf | cut -d' ' -f1)
    if [ "$got" != "$MODEL_SHA256" ]; then echo "model sha256 mismatch: $got" >&2; return 1 2>/dev/null || exit 1; fi
    export AOTX_MODEL_PATH=~/aotx-weights/model.gguf
    echo "model assembled, sha256 ok" ;;
esac
