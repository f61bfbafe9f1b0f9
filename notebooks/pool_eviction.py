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
# # Pool and eviction ablation
#
# The ablation sweep (`experiments/ablations.py`, i.e. `python -m lade.sweep
# experiment=strategy_ablation`) loaded through `lade.results`: which n-grams the pool should hold
# (the lookahead branch's, the prompt's, or both), how it should key them, and what it should evict
# when a bucket is full, around W=7 N=5 G=7 on HumanEval and MT-Bench (SmolLM2).
#
# `QUICK = True` reruns the ablation's quick mode (tiny random model) instead of reading the
# committed full-mode results; CI executes this notebook that way.

# %% tags=["parameters"]
QUICK = False

# %%
import matplotlib.pyplot as plt

from lade.figures import REPO, dataset_names, experiment_sweep
from lade.results import load_prompts, load_sweep

SWEEP = experiment_sweep("ablations", QUICK)
jobs = load_sweep(SWEEP).assign(dataset=dataset_names)
prompts = load_prompts(SWEEP).assign(dataset=dataset_names)
print(f"{len(jobs)} jobs, {len(prompts)} prompt runs from {SWEEP.relative_to(REPO)}")

# %% [markdown]
# ## Which n-grams to verify
# `reference`: the lookahead branch's n-grams only; `prompt_only`: the prompt's only (no lookahead
# window); `seed_prompt`: both. `plain` is the floor (one token per step).

# %%
sources = ["plain", "reference", "prompt_only", "seed_prompt"]
table = jobs[jobs["tag"].isin(sources)].pivot_table(
    index="tag", columns="dataset", values=["compression", "speedup"]
)
table.reindex(sources).round(3)

# %% [markdown]
# ## Eviction and keys
# At capacity G = 7 per key, how often does a bucket overflow? If rarely, the policy cannot matter;
# `evict_unbounded` (no eviction at all) is the control.

# %%
pool_tags = ["reference", "evict_fifo", "evict_lfu", "evict_random", "evict_unbounded", "key_length_2"]
pool_table = jobs[jobs["tag"].isin(pool_tags)].pivot_table(
    index="tag", columns="dataset", values="compression"
)
pool_table.reindex(pool_tags).round(3)

# %%
figure, axis = plt.subplots(figsize=(8, 3.5))
shown = sources + pool_tags[1:]
view = (
    jobs[jobs["tag"].isin(shown)]
    .pivot_table(index="tag", columns="dataset", values="compression")
    .reindex(shown)
)
view.plot.bar(ax=axis, rot=30)
axis.axhline(1.0, color="k", linewidth=0.8)
axis.set_ylabel("compression")
axis.grid(axis="y", alpha=0.3)
plt.show()

# %% [markdown]
# ## Prompt by prompt
# Per-prompt compression (from `prompts.csv`): does prompt seeding help every prompt a little, or a
# few prompts a lot?

# %%
per_prompt = prompts[prompts["tag"].isin(["reference", "seed_prompt", "prompt_only"])].pivot_table(
    index=["dataset", "prompt"], columns="tag", values="compression"
)
per_prompt["seeding gain"] = per_prompt["seed_prompt"] / per_prompt["reference"]
per_prompt.round(3)

# %% [markdown]
# ## Every output identical to HF greedy?

# %%
jobs.groupby("tag")[["identical", "prompts"]].sum()
