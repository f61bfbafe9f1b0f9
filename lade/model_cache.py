"""The models a process has loaded for its sweep jobs, so that jobs sharing a model load it once.

Hydra's basic launcher runs a sweep's jobs one after another in one process; each job instantiates its
``model`` config. Jobs with the same model config (a sweep over W, N, G, pools or verifiers) would
load the same weights again each time, seconds to minutes per job. A ``ModelCache`` made by the sweep's
entry point (not a module global: it lives as long as that call) hands each job the model already
loaded for an identical config. It holds one model at a time, so a sweep over models keeps one in
memory, not all. Jobs must not change the model (a decoder never does: it only runs forwards).
Launchers that run each job elsewhere (joblib, submitit) pickle the task per job, so there each job
loads its own model, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf


class ModelCache:
    """``(model, tokenizer)`` by model config, the most recent one only.

    Args:
        load: builds ``(model, tokenizer)`` from a model config (default ``hydra.utils.instantiate``).
    """

    def __init__(self, load: Callable[[DictConfig], tuple] | None = None):
        if load is None:
            from hydra.utils import instantiate as load
        self._load = load
        self._key: str | None = None
        self._loaded: tuple | None = None
        self.loads = 0  # models loaded so far (for the tests and the log)

    def get(self, model_config: DictConfig) -> tuple:
        """The ``(model, tokenizer)`` of ``model_config``, loaded unless the last call had the same
        config (compared resolved, as YAML)."""
        key = OmegaConf.to_yaml(model_config, resolve=True)
        if key != self._key:
            self._key, self._loaded = None, None  # release the previous model first (and forget it
            self._loaded = self._load(model_config)  # if this load fails)
            self._key = key
            self.loads += 1
        return self._loaded
