"""N-gram pools and their eviction policies."""

from pools.bucket import BucketedNGramPool
from pools.eviction import LRUEviction

__all__ = ["BucketedNGramPool", "LRUEviction"]
