"""Fixtures shared by every test package: the real server, an in-process app, a started model service and
an embedded nats-server."""
from __future__ import annotations

import asyncio
import os
import random
import sys

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# No transparent huge pages for numpy's large arrays in the suite's processes (this one, its xdist workers'
# and every `aotx serve` / `aotx boot` / drill it starts inherit it): on the 2-core sandbox VM, faulting in
# the model's 620 MB of weights on madvised huge pages costs ~3 s of CPU per process start (mostly system
# time) against ~0.6 s on 4 KiB pages; decoding is not measurably slower. The product keeps numpy's default;
# benchmarks (not run by the suite) are unaffected. See docs/PERFORMANCE.md "Test time: huge pages".
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
if "numpy" in sys.modules:   # imported before this file (a plugin): the variable is read at numpy's import
    sys.modules["numpy"]._core.multiarray._set_madvise_hugepage(os.environ["NUMPY_MADVISE_HUGEPAGE"] != "0")

from tests.server_process import ServerProcess  # noqa: E402

# Hypothesis: random examples in every run (no @seed, no derandomize). `dev`, the default, draws more
# examples; `ci` (the environment has CI=true) bounds them so that the suite stays within ~10 min on a
# 2-core box. Tests scale their own counts from settings.default.max_examples where one example is costly.
# A failure prints its @reproduce_failure blob, and the session's seed (below) is printed with it.
# Both build on hypothesis' "default" profile: its built-in "ci" one (loaded when CI is set) is derandomized.
_DEFAULT = settings.get_profile("default")
settings.register_profile("dev", parent=_DEFAULT, max_examples=200, deadline=None, print_blob=True)
settings.register_profile("ci", parent=_DEFAULT, max_examples=100, deadline=None, print_blob=True, database=None,
                          derandomize=False, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("true", "1") else "dev")


# The modules that take longest on the 2-core sandbox, longest first: with `--dist loadscope
# --no-loadscope-reorder` (the Makefile) each module goes whole to one xdist worker in this order, one at a
# time as workers free up (a worker takes its next module while its current one has <= 2 tests left); a long
# module met last keeps one worker busy while the other idles. Every other module (each under 4 s) keeps its
# collection order, after these, so the two workers end together. Order of 2026-12-07 (session 9): each
# module's setup + call + teardown summed from a full `CI=true make test` with --durations=0 on the idle box
# (docs/PERFORMANCE.md "Test time, session 9"); remeasure when a module grows past the last ones here.
LONGEST_FIRST = (
    "tests/drill/test_cluster_drill.py", "tests/e2e/test_http_workers.py", "tests/kernels/test_fidelity_hf.py",
    "tests/ops/test_serve_shutdown.py", "tests/shared_http/test_stateful_inputs.py", "tests/drill/test_drill.py",
    "tests/e2e/test_structured_outputs.py", "tests/e2e/test_openai_chat.py",
    "tests/stored_surfaces/test_openapi.py", "tests/engine/test_engine_structured.py",
    "tests/web/test_page_browser.py", "tests/shared_api/test_grouping.py", "tests/cluster/test_leases.py",
    "tests/shared_api/test_read_rights.py", "tests/cluster/test_engine_pool.py",
    "tests/journal/test_event_registry.py", "tests/e2e/test_sampling_sdks.py", "tests/e2e/test_idempotency_keys.py",
    "tests/ops/test_serving_report.py", "tests/snapshot/test_boot.py", "tests/e2e/test_background_restart.py",
    "tests/ops/test_split.py", "tests/cluster/test_replicated_log.py", "tests/e2e/test_operations.py",
    "tests/kernels_cuda/test_fused.py", "tests/kernels_cuda/test_compile.py", "tests/engine/test_engine_model.py",
    "tests/shared_api/test_memory.py", "tests/structured/test_structured_check.py",
    "tests/memory/test_embedding.py", "tests/engine/test_structured_schemas.py", "tests/scenarios/test_sessions.py",
    "tests/e2e/test_openai_responses.py", "tests/e2e/test_stored_responses.py",
    "tests/engine/test_engine_mask_procs.py", "tests/engine/test_engine_service.py",
    "tests/shared_http/test_stateful.py", "tests/e2e/test_anthropic_messages.py",
    "tests/kernels/test_model_cache.py", "tests/e2e/test_openai_background.py", "tests/shared_api/test_attacker.py",
    "tests/api/test_fuzz_surfaces.py", "tests/cluster/test_boot_leases.py", "tests/runtime/test_split_inputs.py",
    "tests/e2e/test_idempotency_restart.py", "tests/runtime/test_stored_replay.py",
    "tests/shared_api/test_recovery.py", "tests/shared_api/test_inputs.py", "tests/e2e/test_openai_completions.py",
    "tests/ops/test_reload.py", "tests/e2e/test_overlap_serve.py", "tests/ops/test_serve_shared.py",
    "tests/state/test_stateful.py", "tests/ops/test_serve_snapshot.py", "tests/e2e/test_shared_inputs_serve.py",
    "tests/ops/test_serve_lock.py", "tests/ops/test_chat_cmd.py", "tests/journal/test_struct_decode.py",
    "tests/stored_surfaces/test_fuzz_stored.py", "tests/shared_api/test_admission_lease.py",
    "tests/ops/test_serve_nats_auth.py", "tests/eventlog/test_follow_heartbeat.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))   # stable: modules stay whole


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """One random hypothesis seed per session (HYPOTHESIS_SEED or --hypothesis-seed name one), so that a
    failure can be drawn again: `pytest --hypothesis-seed=N ...`."""
    if config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = os.environ.get("HYPOTHESIS_SEED") or str(random.SystemRandom().getrandbits(32))


def pytest_report_header(config):
    return f"hypothesis seed {config.getoption('hypothesis_seed')} (draw the same examples: --hypothesis-seed=N)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if terminalreporter.stats.get("failed"):
        seed = config.getoption("hypothesis_seed")
        terminalreporter.write_line(f"hypothesis seed of this run: {seed}; draw its examples again with "
                                    f"--hypothesis-seed={seed} (or a failure's @reproduce_failure blob)")


# Small, fast settings for the suite: budgets short, batch wide enough for the 16-stream test.
SERVER_ARGS = ("--max-batch", "32", "--kv-pages", "1024", "--default-max-tokens", "48")


@pytest.fixture(scope="session")
def server():
    proc = ServerProcess(*SERVER_ARGS).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.base_url


@pytest.fixture(scope="session")
def openai_client(base_url):
    import openai
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


@pytest.fixture
def async_openai_client(base_url):
    """One per test: an async client's pooled connections belong to the event loop of the test that
    opened them (pytest-asyncio gives each test its own), so a session-wide one breaks the next test
    with 'Event loop is closed' when it reuses or closes a connection of a finished loop."""
    import openai
    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def anthropic_client(base_url):
    import anthropic
    return anthropic.Anthropic(base_url=base_url, api_key="any-key", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def model_bundle():
    """The model, loaded once per process: the same bundle as tests/kernels' and tests/engine's `bundle` and
    the structured tests' tokenizer (kernels.load_model_cached), not a second ~620 MB copy in a worker that
    runs both kinds of module. Its weights are read-only."""
    from kernels import load_model_cached
    return load_model_cached(progress=False)


def started_service(model_bundle, **config):
    """A ModelService over the real model (ServiceConfig(**config)) with its engine started, stopped when the
    generator resumes: module-scoped fixtures `yield from` it."""
    from aotx.serving import ModelService, ServiceConfig

    svc = ModelService.load(ServiceConfig(**config), bundle=model_bundle, progress=False)
    svc.start()
    yield svc
    asyncio.run(svc.stop())


@pytest.fixture(scope="module")
def nats_url(tmp_path_factory):
    """A real nats-server (embedded) shared by the tests of a module."""
    from eventlog import EmbeddedNats

    with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server.client_url()  # the embedded server's user and password in the URL


@pytest.fixture
async def app(model_bundle):
    """A Quart app over the real model, served in-process (engine started and stopped with it)."""
    from api.app import create_app
    from api.settings import GatewaySettings
    from aotx.serving import ModelService, ServiceConfig

    service = ModelService.load(ServiceConfig(max_batch=16, kv_pages=512, default_max_tokens=32),
                                bundle=model_bundle)
    quart_app = create_app(service, GatewaySettings())
    async with quart_app.test_app():
        yield quart_app
