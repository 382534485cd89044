"""The default KV pool and batch: a fraction of the GPU's free memory, the batch it holds."""
import pytest

from kernels.pool_size import default_max_batch, kv_page_bytes, pages_for_memory


def test_an_h200_holds_256_whole_contexts_at_half_its_free_memory():
    # SmolLM2-135M: 30 layers, 3 KV heads x 64; 16-token pages of bf16 K and V
    assert kv_page_bytes(30, 192, 16) == 368_640
    pages = pages_for_memory(139 * 2**30, 0.5, 30, 192, 16)
    assert pages == 139 * 2**30 // 2 // 368_640 and pages > 190_000
    assert 256 * (8192 // 16) / pages < 0.7          # 256 streams each reserving a whole 8k context
    assert default_max_batch(pages, 16, 1024 + 512, 256) == 256
    assert default_max_batch(2048, 16, 1024 + 512, 512) == 21        # a small pool bounds the batch
    assert default_max_batch(2048, 16, 1024 + 512, None) == 64       # numpy: as before


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_a_fraction_outside_0_1_is_refused(fraction):
    with pytest.raises(ValueError):
        pages_for_memory(2**30, fraction, 30, 192, 16)


def test_numpy_keeps_its_pool_when_none_is_given(bundle):
    from kernels import create_backend
    backend = create_backend("numpy", bundle, num_pages=None, page_size=16)
    assert backend.num_pages == 2048


async def test_the_service_sizes_numpy_as_before_and_follows_an_explicit_pool(bundle):
    from aotx.serving import ModelService, ServiceConfig

    svc = ModelService.load(ServiceConfig(backend="numpy"), bundle=bundle, progress=False)
    assert (svc.engine.config.max_batch, svc.engine.config.num_pages) == (64, 2048)
    await svc.stop()
    svc = ModelService.load(ServiceConfig(backend="numpy", kv_pages=300, max_batch=5), bundle=bundle, progress=False)
    assert (svc.engine.config.max_batch, svc.engine.config.num_pages) == (5, 300)
    await svc.stop()
