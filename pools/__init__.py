"""N-gram pools and their eviction policies."""

# lade's modules build on these pools, and the pools on lade's interfaces: importing lade first lets
# `import pools` (or `from pools.x import ...`) come before `import lade` in a fresh interpreter.
import lade  # noqa: F401  (isort: keep it first)
from pools.bucket import BucketedNGramPool
from pools.combined import CombinedPool
from pools.eviction import FIFOEviction, LFUEviction, LRUEviction, NoEviction, RandomEviction
from pools.frequent_tokens import FrequentTokensPool
from pools.prompt_lookup import PromptLookupPool
from pools.suffix_tree import SuffixIndex, SuffixTreePool
from pools.token_recycling import TokenRecyclingPool

__all__ = [
    "BucketedNGramPool",
    "CombinedPool",
    "FIFOEviction",
    "FrequentTokensPool",
    "LFUEviction",
    "LRUEviction",
    "NoEviction",
    "PromptLookupPool",
    "RandomEviction",
    "SuffixIndex",
    "SuffixTreePool",
    "TokenRecyclingPool",
]
