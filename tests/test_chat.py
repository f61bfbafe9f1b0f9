"""The streaming chat: scripted turns through a pipe, interruption, end of input."""

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

import lade
from lade.chat import TextStreamer, chat_session

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer():
    return lade.load_model("smollm2")[1]


def test_piped_turns_stream_answers_with_stats_and_exit_on_eof(tmp_path):
    turns = "Hi!\nName a colour.\n"
    # fixed W, N, G: auto would measure a latency curve beside the other test worker (a minute, and
    # too steep); chat.calibration_dir keeps any curve out of the user's home all the same
    overrides = [
        "max_new_tokens=12",
        "verifier=greedy",
        "window=3",
        "ngram=3",
        f"chat.calibration_dir={tmp_path}",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "lade.chat", *overrides],
        input=turns,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count(" tokens/s, ") == 2 and result.stdout.count("tokens/step]") == 2
    assert "Traceback" not in result.stderr and "\033[" not in result.stdout  # no colour codes into a pipe
    assert not list(tmp_path.glob("*.json"))  # fixed settings measure nothing


class FakeDecoder:
    """Streams two tokens, then is interrupted like a Ctrl-C in the middle of an answer."""

    class pool:  # noqa: N801 - stands in for the decoder's pool
        resets = 0

        @classmethod
        def reset(cls):
            cls.resets += 1

    def __init__(self, tokens):
        self.tokens = tokens

    def generate(self, input_ids, max_new_tokens, streamer):
        streamer(self.tokens[:2])
        raise KeyboardInterrupt


def test_ctrl_c_keeps_the_partial_answer_and_the_chat_goes_on(tokenizer):
    tokens = tokenizer("Hello world, how are you", add_special_tokens=False).input_ids
    lines = iter(["first question", "/reset", "second question"])
    written = []

    def read(_prompt):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    cfg = OmegaConf.create(
        {"max_new_tokens": 8, "chat": {"system_prompt": None, "color": False, "stats": True}}
    )
    turns = chat_session(FakeDecoder(tokens), tokenizer, cfg, read=read, write=written.append)
    output = "".join(written)
    assert turns == 2 and output.count("[interrupted]") == 2 and FakeDecoder.pool.resets == 1
    assert tokenizer.decode(tokens[:2]) in output


def test_streamer_colours_multi_token_blocks(tokenizer):
    chunks = []
    streamer = TextStreamer(tokenizer, chunks.append, color=True)
    ids = tokenizer("one two three", add_special_tokens=False).input_ids
    streamer(ids[:1])
    streamer(ids[1:])
    assert not chunks[0].startswith("\033[") and chunks[1].startswith("\033[")
    assert streamer.tokens == ids


def test_model_and_dtype_flags_become_hydra_overrides():
    from lade.chat import hydra_arguments

    assert hydra_arguments(["--model", "qwen2.5-coder-1.5b", "--dtype=bfloat16", "top_p=0.9"]) == [
        "model=qwen2.5-coder-1.5b",
        "model.dtype=bfloat16",
        "top_p=0.9",
    ]
    assert hydra_arguments(["--model=/some/folder"]) == ["model=hf", "model.name_or_path=/some/folder"]
    assert hydra_arguments(["window=5"]) == ["window=5"]
    with pytest.raises(SystemExit, match="--model needs a value"):
        hydra_arguments(["--model"])
