"""Typed schema and validation of the Hydra configs in ``conf/``.

The schema types the top level (a wrong type such as ``ngram=one`` fails when Hydra composes the
config); ``validate`` checks values and builds the cheap components (proposer, pool, verifier,
prompts), so a bad value (``window=0``) or a missing data file fails with a clear message before
any model loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.utils import instantiate
from omegaconf import MISSING, DictConfig, OmegaConf

from lade.autotune import is_auto
from lade.decoding import AUTO_GUESS, AUTO_NGRAM, AUTO_WINDOW
from lade.interfaces import EvictionPolicy, NGramPool, Proposer, Verifier
from lade.model import check_model_name
from lade.tracking import job_dir_name

SCHEMA_NAME = "lade_schema"


class ConfigError(ValueError):
    """A config value that cannot work; raised before any model loads."""


@dataclass
class LookaheadSchema:
    """W, N, G: the one node every component interpolates. Each is an integer or ``"auto"`` (chosen
    step by step from the hardware's latency curve, ``lade.autotune``); ``validate`` checks them."""

    window: Any = 7
    ngram: Any = 5
    guess: Any = 7


@dataclass
class LadeSchema:
    """Top level of ``conf/config.yaml``."""

    window: Any = 7
    ngram: Any = 5
    guess: Any = 7
    lookahead: LookaheadSchema = field(default_factory=LookaheadSchema)
    max_new_tokens: int = 128
    batch_size: int = 1
    temperature: float | None = None  # None: the model's generation config, as ``generate`` reads it
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0
    name: str = "lade"
    tag: str = ""
    chat: Any = None  # python -m lade.chat only
    model: Any = MISSING
    proposer: Any = MISSING
    pool: Any = MISSING
    verifier: Any = MISSING
    data: Any = MISSING
    logger: Any = MISSING


def register_schemas() -> None:
    """Make ``lade_schema`` available to the defaults list and the ``lade_job_dir`` resolver to the
    sweep's job folders (``lade.tracking.job_dir_name``) (idempotent)."""
    ConfigStore.instance().store(name=SCHEMA_NAME, node=LadeSchema)
    if not OmegaConf.has_resolver("lade_job_dir"):
        OmegaConf.register_new_resolver("lade_job_dir", job_dir_name)


@dataclass(frozen=True)
class Components:
    """What a job builds from its config before loading the model."""

    proposer: Proposer
    pool: NGramPool
    verifier: Verifier
    prompts: list  # [lade.data.Prompt]
    chat_template: bool | str
    logger: Any  # lade.tracking.WandbLogger or NullLogger: has log_job(...)


def _at_least(name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")


def _size(name: str, value, minimum: int) -> None:
    if is_auto(value):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer >= {minimum} or 'auto', got {value!r}")
    _at_least(name, value, minimum)


def with_auto_maxima(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` whose ``"auto"`` sizes are replaced by what auto searches up to (the
    components are built at those sizes; the decoder gets ``"auto"`` and chooses per step)."""
    sized = cfg.copy()
    for name, maximum in (("window", AUTO_WINDOW), ("ngram", AUTO_NGRAM), ("guess", AUTO_GUESS)):
        if is_auto(cfg.lookahead[name]):
            sized.lookahead[name] = maximum
    return sized


def validate(cfg: DictConfig) -> Components:
    """Check values and build the strategies and prompts; raise ``ConfigError`` on anything wrong."""
    _size("window", cfg.lookahead.window, 1)
    _size("ngram", cfg.lookahead.ngram, 2)
    _size("guess", cfg.lookahead.guess, 0)
    _at_least("max_new_tokens", cfg.max_new_tokens, 0)
    _at_least("batch_size", cfg.get("batch_size", 1), 1)
    sized = with_auto_maxima(cfg)
    if cfg.model.get("_target_") == "lade.model.load_model":
        try:
            check_model_name(cfg.model.name_or_path)
        except ValueError as err:
            raise ConfigError(f"model.name_or_path: {err}") from err
    built = {}
    for role, kind in (("proposer", Proposer), ("pool", NGramPool), ("verifier", Verifier)):
        try:
            built[role] = instantiate(sized[role])
        except Exception as err:  # hydra wraps constructor errors; keep the message, name the group
            raise ConfigError(f"{role}: {_root_cause(err)}") from err
        if not isinstance(built[role], kind):
            raise ConfigError(f"{role} built a {type(built[role]).__name__}, which is not a {kind.__name__}")
    eviction = getattr(built["pool"], "eviction", None)
    if eviction is not None and not isinstance(eviction, EvictionPolicy):
        raise ConfigError(f"pool.eviction built a {type(eviction).__name__}, which is not an EvictionPolicy")
    data = OmegaConf.to_container(cfg.data, resolve=True)
    chat_template = data.pop("chat_template", "auto")
    try:
        prompts = instantiate(data)
    except Exception as err:
        raise ConfigError(f"data: {_root_cause(err)}") from err
    if not prompts:
        raise ConfigError("data selected no prompts (check data.category and data.limit)")
    try:
        logger = instantiate(cfg.logger)
    except Exception as err:
        raise ConfigError(f"logger: {_root_cause(err)}") from err
    return Components(built["proposer"], built["pool"], built["verifier"], prompts, chat_template, logger)


def _root_cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return f"{type(err).__name__}: {err}"
