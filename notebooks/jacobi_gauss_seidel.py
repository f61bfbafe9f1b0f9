# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Jacobi vs Gauss-Seidel, and the acceptance histogram
#
# The two proposers of the ablation sweep (`experiments/ablations.py`): `reference` (the paper's
# Jacobi window) and `gauss_seidel` (re-anchored on the accepted tokens, levels refreshed from this
# step's outputs; `strategies/gauss_seidel.py`), both at W=7 N=5 G=7 without prompt seeding, on
# HumanEval and MT-Bench (SmolLM2). Per-step records (`steps.csv`, via `lade.results.load_steps`) give
# the acceptance histogram: how many tokens each step committed.
#
# `QUICK = True` reruns the ablation's quick mode (tiny random model) instead of reading the
# committed full-mode results; CI executes this notebook that way.

# %% tags=["parameters"]
QUICK = False

# %%
import matplotlib.pyplot as plt
import numpy as np

from lade.figures import REPO, dataset_names, experiment_sweep
from lade.results import load_prompts, load_steps, load_sweep

SWEEP = experiment_sweep("ablations", QUICK)
PROPOSERS = ["reference", "gauss_seidel"]
jobs, steps, prompts = (
    frame[frame["tag"].isin(PROPOSERS)].assign(dataset=dataset_names)
    for frame in (load_sweep(SWEEP), load_steps(SWEEP), load_prompts(SWEEP))
)
print(f"{len(jobs)} jobs, {len(steps)} steps from {SWEEP.relative_to(REPO)}")

# %% [markdown]
# ## Compression and speed

# %%
jobs.pivot_table(index="tag", columns="dataset", values=["compression", "speedup", "identical"]).round(3)

# %% [markdown]
# ## Acceptance histogram
# The share of steps that committed k tokens (1 = only the model's own token: no candidate matched;
# N = 5 = a full n-gram plus the bonus token).

# %%
histogram = steps.groupby(["dataset", "tag"])["tokens"].value_counts(normalize=True).unstack(fill_value=0)
histogram.round(3)

# %%
datasets = sorted(steps["dataset"].unique())
figure, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 3.2), squeeze=False)
for axis, dataset in zip(axes[0], datasets, strict=True):
    for offset, tag in zip((-0.2, 0.2), PROPOSERS, strict=True):
        row = histogram.loc[(dataset, tag)] if (dataset, tag) in histogram.index else None
        if row is not None:
            axis.bar(np.asarray(row.index, dtype=float) + offset, row.to_numpy(), 0.4, label=tag)
    axis.set_title(dataset)
    axis.set_xlabel("tokens committed in a step")
    axis.set_ylabel("share of steps")
    axis.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Mean tokens per step, and where Gauss-Seidel loses
# A step that accepts k >= 2 tokens is one where the pool held the model's own continuation.

# %%
summary = steps.groupby(["dataset", "tag"])["tokens"].agg(
    steps="size", mean="mean", multi_token_share=lambda t: float((t >= 2).mean())
)
summary.round(3)

# %% [markdown]
# ## Per prompt

# %%
prompts.pivot_table(index="prompt_id", columns="tag", values="compression").round(3)
