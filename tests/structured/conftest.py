import pytest


@pytest.fixture(scope="session")
def tokenizer():
    from kernels import load_model_cached
    return load_model_cached(progress=False).tokenizer


@pytest.fixture(scope="session")
def compiler(tokenizer):
    from aotx.structured import ConstraintCompiler
    return ConstraintCompiler(tokenizer)
