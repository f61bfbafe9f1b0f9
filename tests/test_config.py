"""Every config option composes and builds the right kind of object; bad values fail early."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lade.config import ConfigError, register_schemas, validate
from lade.data import Prompt
from lade.interfaces import EvictionPolicy, NGramPool, Proposer, Verifier
from lade.options import DRAFT_SOURCES, resolve
from lade.sweep import CONFIG_DIR

SPEC_BENCH = Path("../shared/data/spec_bench/question.jsonl")


def compose_config(*overrides: str, hydra: bool = False):
    register_schemas()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def test_defaults_compose_with_one_lookahead_node():
    cfg = compose_config()
    assert (cfg.lookahead.window, cfg.lookahead.ngram, cfg.lookahead.guess) == (7, 5, 7)
    assert cfg.model.name_or_path == "smollm2" and cfg.data.limit == 10 and cfg.max_new_tokens == 128


def test_guess_follows_window_unless_set():
    assert compose_config("window=4").lookahead.guess == 4
    assert compose_config("window=4", "guess=2").lookahead.guess == 2


def test_top_level_aliases_reach_every_component():
    cfg = compose_config("window=5", "ngram=4", "guess=3")
    assert cfg.proposer.window == 5 and cfg.proposer.ngram == 4
    assert cfg.pool.ngram == 4 and cfg.pool.capacity == 3
    assert (cfg.lookahead.window, cfg.lookahead.ngram, cfg.lookahead.guess) == (5, 4, 3)


@pytest.mark.parametrize("option", options("proposer"))
def test_every_proposer_builds_a_proposer(option):
    assert isinstance(instantiate(compose_config(f"proposer={option}").proposer), Proposer)


@pytest.mark.parametrize("option", options("pool"))
def test_every_pool_builds_with_every_eviction_it_takes(option):
    cfg = compose_config(f"pool={option}")
    evictions = options("pool/eviction") if "eviction" in cfg.pool else [None]
    for eviction in evictions:
        overrides = [f"pool={option}"] + ([f"pool/eviction={eviction}"] if eviction else [])
        pool = instantiate(compose_config(*overrides).pool)
        assert isinstance(pool, NGramPool)
        assert eviction is None or isinstance(pool.eviction, EvictionPolicy)


def test_prompt_lookup_proposer_brings_its_pool():
    cfg = compose_config("proposer=prompt_lookup")
    assert cfg.pool._target_ == "pools.PromptLookupPool"
    components = validate(compose_config("experiment=quick", "proposer=prompt_lookup"))
    assert components.pool.__class__.__name__ == "PromptLookupPool"


def test_token_recycling_proposer_brings_its_pool():
    components = validate(compose_config("experiment=quick", "proposer=token_recycling"))
    assert components.pool.__class__.__name__ == "TokenRecyclingPool" and components.pool.span == 5


@pytest.mark.parametrize("option", options("verifier"))
def test_every_verifier_builds_a_verifier(option):
    assert isinstance(instantiate(compose_config(f"verifier={option}").verifier), Verifier)


@pytest.mark.parametrize("option", options("logger"))
def test_every_logger_builds(option):
    assert callable(instantiate(compose_config(f"logger={option}").logger).log_job)


@pytest.mark.parametrize("option", options("data"))
def test_every_data_option_loads_prompts(option, tmp_path):
    overrides = [f"data={option}"]
    if option == "jsonl":
        path = tmp_path / "prompts.jsonl"
        path.write_text('{"prompt": "hello"}\n{"turns": ["first", "second"]}\n')
        overrides.append(f"data.path={path}")
    if option in ("spec_bench", "mt_bench"):
        if not SPEC_BENCH.exists():
            pytest.skip(f"{SPEC_BENCH} is not beside the checkout")
    components = validate(compose_config("experiment=quick", *overrides))
    assert components.prompts and all(isinstance(p, Prompt) for p in components.prompts)
    assert len(components.prompts) <= compose_config(*overrides).data.limit


@pytest.mark.parametrize("option", options("model"))
def test_every_model_option_composes_and_names_a_loadable_model(option, tmp_path):
    overrides = [f"model={option}"]
    if option == "hf":  # any local folder: save a tiny model to load back
        model, _ = instantiate(compose_config("model=tiny").model)
        model.save_pretrained(tmp_path)
        overrides.append(f"model.name_or_path={tmp_path}")
    cfg = compose_config("experiment=quick", *overrides)
    validate(cfg)  # checks the name without loading
    if option in ("tiny", "hf"):  # the packaged models load in tests/test_model.py, test_packaged.py
        model, _ = instantiate(cfg.model)
        assert model.config.vocab_size == 128


@pytest.mark.parametrize("option", options("experiment"))
def test_every_experiment_validates(option):
    validate(compose_config(f"experiment={option}"))


def test_sweep_options_set_the_sweeper():
    assert compose_config("sweep=none", hydra=True).hydra.sweeper.params in (None, {})
    grid = compose_config("sweep=wng_grid", hydra=True)
    assert grid.hydra.sweeper.params.window == "1,3,5,7,10,15"
    optuna = compose_config("sweep=optuna", hydra=True)
    assert "optuna" in optuna.hydra.sweeper._target_.lower() and optuna.hydra.sweeper.direction == "maximize"
    assert set(optuna.hydra.sweeper.params) == {"window", "ngram", "guess"}


@pytest.mark.parametrize(
    ("override", "target"),
    [
        ("hydra/launcher=joblib", "joblib"),
        ("hydra/launcher=submitit_slurm", "submitit"),
        ("hydra/launcher=basic", "basic"),
    ],
)
def test_launchers_compose(override, target):
    cfg = compose_config(override, hydra=True)
    assert target in cfg.hydra.launcher._target_.lower()


def test_multirun_is_the_default_mode():
    assert str(compose_config(hydra=True).hydra.mode) == "RunMode.MULTIRUN"


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (["proposer=nope"], (ConfigCompositionException, MissingConfigException)),
        (["pool/eviction=nope"], (ConfigCompositionException, MissingConfigException)),
        (["data=nope"], (ConfigCompositionException, MissingConfigException)),
    ],
)
def test_bad_types_and_unknown_options_fail_at_compose(overrides, error):
    with pytest.raises(error):
        compose_config(*overrides)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["window=0"], "window must be >= 1"),
        (["ngram=one"], "ngram must be an integer >= 2 or 'auto', got 'one'"),
        (["window=2.5"], "window must be an integer >= 1 or 'auto'"),
        (["guess=Auto"], "guess must be an integer >= 0 or 'auto'"),
        (["ngram=1"], "ngram must be >= 2"),
        (["guess=-1"], "guess must be >= 0"),
        (["max_new_tokens=-5"], "max_new_tokens"),
        (["batch_size=0"], "batch_size must be >= 1"),
        (["model.name_or_path=nope"], "Unknown model 'nope'"),
        (["data=spec_bench", "data.path=/nonexistent/question.jsonl"], "/nonexistent/question.jsonl"),
        (["data=spec_bench", "data.category=poetry"], "poetry"),
        (["data.limit=0"], "limit"),
        (["logger=wandb", "logger.mode=sometimes"], "logger.mode"),
    ],
)
def test_bad_values_fail_before_any_model_loads(overrides, match):
    cfg = compose_config(*overrides)
    with pytest.raises(ConfigError, match=match):
        validate(cfg)


def test_resolved_config_is_plain_yaml():
    text = OmegaConf.to_yaml(compose_config("window=3"), resolve=True)
    assert "${" not in text and "window: 3" in text


@pytest.mark.parametrize("option", options("ablation"))
def test_every_ablation_validates_and_is_tagged(option):
    cfg = compose_config("experiment=quick", f"ablation={option}")
    components = validate(cfg)
    assert cfg.tag == option and isinstance(components.proposer, Proposer)


def test_auto_sizes_build_components_at_the_auto_maxima():
    cfg = compose_config("experiment=quick", "window=auto", "ngram=auto", "guess=auto")
    components = validate(cfg)
    assert cfg.lookahead.window == "auto" and cfg.lookahead.guess == "auto"
    assert components.proposer.window == 15 and components.proposer.ngram == 6
    assert components.pool.ngram == 6 and components.pool.capacity == 7


def test_auto_experiment_matches_the_python_default():
    cfg = compose_config("experiment=auto")
    assert (cfg.lookahead.window, cfg.lookahead.ngram, cfg.lookahead.guess) == ("auto",) * 3
    pool = validate(compose_config("experiment=auto", "data.limit=1")).pool
    default = resolve("auto", "auto", "auto", None, None)[1]  # LookaheadDecoder(model).pool
    assert pool.names == default.names == DRAFT_SOURCES and pool.merged and default.merged
    assert not pool.persistent and not default.persistent  # a call never changes the decoder
    for name in DRAFT_SOURCES:
        ours, theirs = pool.sources[name], default.sources[name]
        assert type(ours) is type(theirs)
        assert ours.span == theirs.span == 10 or name == "token_recycling"
    lookahead = pool.sources["lookahead"]
    assert lookahead.key_length == 3 and lookahead.seed_prompt and lookahead.seed_output


def test_sampling_controls_default_to_the_models_generation_config_as_generate_does():
    """``verifier=sampling`` alone passes no control, so HF and the decoder both read the model's
    generation config (``generate(do_sample=True)``); the ones set are passed as set."""
    from lade.experiment import call_options, sampling_controls

    assert sampling_controls(compose_config("verifier=sampling")) == {}
    assert instantiate(compose_config("verifier=sampling").verifier).controls == {}
    set_ = sampling_controls(compose_config("verifier=sampling", "temperature=0.7", "top_k=0"))
    assert set_ == {"temperature": 0.7, "top_k": 0}
    assert sampling_controls(compose_config()) is None  # greedy
    assert call_options(None, [2], {})["do_sample"] is True
