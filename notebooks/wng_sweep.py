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
# # W, N, G sweep analysis
#
# The scaling-law sweep (`experiments/scaling_law.py`: W = 1, 2, 4, 8, 16 x N = 3, 4, 5, G = W,
# lookahead branch only, MT-Bench, SmolLM2) loaded through `lade.results`: where compression comes
# from, what it costs per step, how it varies from prompt to prompt, and how well the paper's
# analytic model (`lade.scaling`) describes it.
#
# `QUICK = True` reruns the sweep's quick mode (tiny random model, seconds) instead of reading the
# committed full-mode results; CI executes this notebook that way.

# %% tags=["parameters"]
QUICK = False

# %%
import matplotlib.pyplot as plt
import numpy as np

from lade.figures import REPO, experiment_sweep
from lade.results import load_prompts, load_steps, load_sweep, summary_table
from lade.scaling import candidate_shares, expected_tokens, fit, mixed_expected_tokens

SWEEP = experiment_sweep("scaling_law", QUICK)
jobs = load_sweep(SWEEP)
prompts = load_prompts(SWEEP)
steps = load_steps(SWEEP)
print(f"{len(jobs)} jobs, {len(prompts)} prompt runs, {len(steps)} steps from {SWEEP.relative_to(REPO)}")

# %% [markdown]
# ## Every job, as the sweep summarised it

# %%
print(summary_table(jobs))

# %% [markdown]
# ## Compression over the W x N grid
# Rows N, columns W (G = W). Compression = new tokens / decoding steps over all prompts.

# %%
grid = jobs.pivot_table(index="ngram", columns="window", values="compression")
grid.round(3)

# %%
figure, axis = plt.subplots(figsize=(5, 3))
image = axis.imshow(grid.to_numpy(), cmap="viridis", aspect="auto")
axis.set_xticks(range(len(grid.columns)), grid.columns)
axis.set_yticks(range(len(grid.index)), grid.index)
axis.set_xlabel("W (= G)")
axis.set_ylabel("N")
for (row, column), value in np.ndenumerate(grid.to_numpy()):
    axis.text(column, row, f"{value:.2f}", ha="center", va="center", color="w", fontsize=8)
figure.colorbar(image, label="compression")
plt.show()

# %% [markdown]
# ## What a step costs, and what it buys
# Tokens fed per step grow as (W + G)(N - 1); on a CPU the forward's time grows with them, so the
# speedup over HF greedy peaks early even as compression keeps rising.

# %%
figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for ngram, group in jobs.groupby("ngram"):
    axes[0].plot(group["step_tokens_mean"], group["compression"], "o-", label=f"N={ngram}")
    axes[1].plot(group["compression"], group["speedup"], "o-", label=f"N={ngram}")
axes[0].set_xscale("log", base=2)
axes[0].set_xlabel("tokens fed per step (log)")
axes[0].set_ylabel("compression")
axes[1].set_xlabel("compression")
axes[1].set_ylabel("speedup over HF greedy")
axes[1].axhline(1.0, color="k", linewidth=0.8)
for axis in axes:
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Prompt to prompt
# The per-prompt compression (from `prompts.csv`) at each W, for the largest N: the spread is as
# large as the effect of W, which is why a sweep needs several prompts per point.

# %%
largest = prompts[prompts["ngram"] == prompts["ngram"].max()]
per_prompt = largest.pivot_table(index="prompt", columns="window", values="compression")
per_prompt.round(2)

# %% [markdown]
# ## Tokens per step
# The share of steps that committed k tokens (from `steps.csv`), per W, at the largest N.

# %%
largest_steps = steps[steps["ngram"] == steps["ngram"].max()]
shares = largest_steps.groupby("window")["tokens"].value_counts(normalize=True).unstack(fill_value=0)
shares.round(3)

# %% [markdown]
# ## The paper's analytic model
# E[tokens per step] = 1 + sum_i (1 - (1 - p_i)^b) for b guesses whose first i tokens are right with
# probability p_i (`lade.scaling`). The paper: b = G independent guesses, p_i = a^i. But a step
# verifies only the candidates the pool holds for its key, often far fewer than G (`candidates` in
# `steps.csv`), so the fits below average the model over each step's count (`candidate_shares`),
# with the paper's b = G beside them. Relaxed: b^k effective guesses, and p_i = a * c^(i-1) (a guess
# that starts right tends to stay right).

# %%
jobs = jobs.sort_values(["ngram", "window"]).reset_index(drop=True)
counts = [steps.loc[steps["job_dir"] == job, "candidates"].to_numpy() for job in jobs["job_dir"]]
candidate_mix = candidate_shares(counts)  # [jobs, K] share of steps verifying b = 0..K-1 candidates
print(jobs[["window", "ngram", "guess"]].assign(candidates_mean=[c.mean() for c in counts]).round(2))
nominal = fit(jobs["guess"], jobs["ngram"], jobs["compression"], exponent=1.0)
paper = fit(candidate_mix, jobs["ngram"], jobs["compression"], exponent=1.0)
full = fit(candidate_mix, jobs["ngram"], jobs["compression"], continuation=True)
print(f"paper, b = G: a = {nominal['acceptance']:.3f}, RMSE {nominal['rmse']:.3f}")
print(f"paper, b = candidates verified: a = {paper['acceptance']:.3f}, RMSE {paper['rmse']:.3f}")
print(
    f"relaxed: a = {full['acceptance']:.3f}, c = {full['continuation']:.2f}, k = {full['exponent']:.2f}, "
    f"RMSE {full['rmse']:.3f}"
)
relaxed = mixed_expected_tokens(
    full["acceptance"], candidate_mix, jobs["ngram"], full["exponent"], full["continuation"]
)
as_stated = expected_tokens(nominal["acceptance"], jobs["guess"], jobs["ngram"])
figure, axis = plt.subplots(figsize=(6, 3.5))
for index, (ngram, group) in enumerate(jobs.groupby("ngram")):
    color = f"C{index}"
    axis.plot(group["window"], group["compression"], "o", color=color, label=f"N={ngram}")
    axis.plot(group["window"], relaxed[group.index], "-", color=color)
    axis.plot(group["window"], as_stated[group.index], ":", color=color)
axis.set_xscale("log", base=2)
axis.set_xlabel("W = G (log)")
axis.set_ylabel("compression")
axis.set_title("points: measured; solid: relaxed model (b measured); dotted: the paper's (b = G)", fontsize=9)
axis.legend(fontsize=8)
axis.grid(alpha=0.3)
plt.show()
