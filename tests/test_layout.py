"""The step layout against a brute-force reading of its definition."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lade.layout import additive_mask, chain_layout, step_layout, visibility


def coordinates(levels, window, candidates, length):
    """Name every row of a step: ('root',), ('branch', r, c) or ('cand', i, j), in feeding order."""
    names = [("root",)]
    names += [("branch", r, c) for r in range(levels) for c in range(window)]
    names += [("cand", i, j) for i in range(candidates) for j in range(length)]
    return names


def position_offset(name):
    if name[0] == "root":
        return 0
    if name[0] == "branch":
        return 1 + name[1] + name[2]
    return 1 + name[2]


def sees(query, key):
    """The definition: level r, column c sees level 0 up to column c and column c below level r;
    a candidate token sees its own earlier tokens; everything sees the root; branches never mix."""
    if key == query or key[0] == "root":
        return True
    if query[0] != key[0]:
        return False
    if query[0] == "branch":
        (_, r, c), (_, r2, c2) = query, key
        return (r2 == 0 and c2 <= c) or (c2 == c and r2 <= r)
    (_, i, j), (_, i2, j2) = query, key
    return i2 == i and j2 <= j


shapes = st.tuples(st.integers(0, 4), st.integers(1, 6), st.integers(0, 4), st.integers(1, 4))


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_tree_mask_and_depths_match_definition(shape):
    levels, window, candidates, length = shape
    layout = step_layout(levels, window, candidates, length)
    names = coordinates(levels, window, candidates, length)
    assert layout.size == len(names) == 1 + levels * window + candidates * length
    for q, query in enumerate(names):
        assert int(layout.depths[q]) == position_offset(query)
        for k, key in enumerate(names):
            assert bool(layout.tree_mask[q, k]) == sees(query, key), (query, key)


@settings(max_examples=40, deadline=None)
@given(shapes)
def test_each_token_sees_exactly_one_token_per_earlier_position(shape):
    layout = step_layout(*shape)
    for q in range(layout.size):
        seen = sorted(layout.depths[layout.tree_mask[q]].tolist())
        assert seen == list(range(int(layout.depths[q]) + 1))


def test_slices_name_the_right_rows():
    layout = step_layout(3, 4, 2, 3)
    names = coordinates(3, 4, 2, 3)
    assert [names[i] for i in range(layout.size)[layout.newest_level]] == [("branch", 2, c) for c in range(4)]
    assert names[layout.candidate_row(1, 2)] == ("cand", 1, 2)
    assert all(names[i][0] == "cand" for i in range(layout.size)[layout.candidates])
    no_branch = step_layout(0, 4, 2, 3)
    assert len(range(no_branch.size)[no_branch.newest_level]) == 0


def test_chain_layout_is_causal():
    layout = chain_layout(5)
    assert torch.equal(layout.tree_mask, torch.ones(5, 5, dtype=torch.bool).tril())
    assert layout.depths.tolist() == [0, 1, 2, 3, 4]


@settings(max_examples=40, deadline=None)
@given(shapes, st.integers(0, 12), st.one_of(st.none(), st.integers(1, 8)))
def test_visibility_adds_prefix_and_sliding_window(shape, prefix_len, window):
    layout = step_layout(*shape)
    positions = prefix_len + layout.depths
    visible = visibility(layout.tree_mask, prefix_len, positions, window)
    key_positions = list(range(prefix_len)) + positions.tolist()
    for q in range(layout.size):
        for k in range(prefix_len + layout.size):
            in_tree = k < prefix_len or bool(layout.tree_mask[q, k - prefix_len])
            in_window = window is None or key_positions[k] > int(positions[q]) - window
            assert bool(visible[q, k]) == (in_tree and in_window)


def test_additive_mask_is_zero_or_min():
    visible = torch.tensor([[True, False], [True, True]])
    mask = additive_mask(visible, torch.float32)
    assert mask.shape == (1, 1, 2, 2)
    assert mask[0, 0, 0, 0] == 0 and mask[0, 0, 0, 1] == torch.finfo(torch.float32).min
