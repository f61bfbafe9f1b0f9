"""N-gram pools and their eviction policies."""

from pools.bucket import BucketedNGramPool
from pools.combined import CombinedPool
from pools.eviction import FIFOEviction, LFUEviction, LRUEviction, NoEviction, RandomEviction
from pools.prompt_lookup import PromptLookupPool
from pools.suffix_tree import SuffixIndex, SuffixTreePool
from pools.token_recycling import TokenRecyclingPool

__all__ = [
    "BucketedNGramPool",
    "CombinedPool",
    "FIFOEviction",
    "LFUEviction",
    "LRUEviction",
    "NoEviction",
    "PromptLookupPool",
    "RandomEviction",
    "SuffixIndex",
    "SuffixTreePool",
    "TokenRecyclingPool",
]
