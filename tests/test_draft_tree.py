"""Draft-tree shapes (``pools.draft_tree``): the uniform template, the likeliest tree against a brute
force over every tree of its size, and the rank-acceptance counter."""

import itertools
import math

import pytest

from pools.draft_tree import RankAcceptance, likeliest_tree, uniform_tree


def nodes_of(leaves):
    """Every node (rank path) on the way to the leaves."""
    return {leaf[:end] for leaf in leaves for end in range(1, len(leaf) + 1)}


def chance(path, acceptance):
    return math.prod(acceptance[rank] for rank in path)


def prefix_closed_sets(every_node, size):
    """Every set of ``size`` nodes that holds each node's parent (brute force: each node in or out,
    shallower nodes decided first, a node only in when its parent is)."""
    order = sorted(every_node, key=len)

    def grow(index, chosen):
        if len(chosen) == size:
            yield frozenset(chosen)
            return
        if index == len(order):
            return
        path = order[index]
        if len(path) == 1 or path[:-1] in chosen:
            yield from grow(index + 1, chosen | {path})
        yield from grow(index + 1, chosen)

    return grow(0, frozenset())


def test_uniform_tree_lists_its_leaves_in_rank_order():
    assert uniform_tree((2, 1, 2)) == [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)]
    assert len(nodes_of(uniform_tree((4, 2, 2, 1, 1)))) == 60
    with pytest.raises(ValueError, match="width"):
        uniform_tree((2, 0))


@pytest.mark.parametrize("acceptance", [(0.5, 0.2, 0.1), (0.3, 0.3, 0.05), (0.9, 0.05, 0.04)])
@pytest.mark.parametrize("size", [1, 3, 5, 7])
def test_likeliest_tree_beats_every_other_tree_of_its_size(acceptance, size):
    depth = 3
    every_node = [p for d in range(1, depth + 1) for p in itertools.product(range(len(acceptance)), repeat=d)]
    trees = prefix_closed_sets(every_node, size)
    best = max(sum(chance(path, acceptance) for path in tree) for tree in trees)
    leaves = likeliest_tree(size, acceptance, depth)
    tree = nodes_of(leaves)
    assert len(tree) == size
    assert sum(chance(path, acceptance) for path in tree) == pytest.approx(best)
    assert all(path not in {leaf[:-1] for leaf in leaves} for path in leaves)  # only leaves listed
    chances = [chance(leaf, acceptance) for leaf in leaves]
    assert chances == sorted(chances, reverse=True)  # likeliest first


def test_likeliest_tree_keeps_to_its_depth_and_checks_its_arguments():
    leaves = likeliest_tree(10, (0.99, 0.001), 3)
    assert max(len(leaf) for leaf in leaves) == 3 and len(nodes_of(leaves)) == 10
    for bad in ((0, (0.5,), 3), (3, (0.5,), 0), (3, (), 2), (3, (0.5, -0.1), 2)):
        with pytest.raises(ValueError):
            likeliest_tree(*bad)


def test_rank_acceptance_counts_the_rank_of_the_next_token_and_blends_the_prior():
    ranks = RankAcceptance((0.5, 0.25), prior_weight=4)
    assert ranks.estimate() == [0.5, 0.25]  # nothing counted: the prior
    for row, following in (((3, 4), 3), ((3, 4), 4), ((3, 4), 9), ((3, 4), 3)):
        ranks.count(row, following)
    assert (ranks.hits, ranks.seen) == ([2, 1], 4)
    assert ranks.estimate() == [(2 + 2) / 8, (1 + 1) / 8]
    ranks.reset()
    assert (ranks.hits, ranks.seen) == ([0, 0], 0)
