"""``python -m lade.chat``: a streaming multi-turn chat on a lookahead decoder (for self-hosters).

Every committed token is printed as soon as the verifier accepts it; blocks of several tokens
committed by one step are coloured (``chat.color``). ``python -m lade.chat --model qwen2.5-coder-1.5b
--dtype bfloat16`` picks a model (a built-in name, a folder or a hub id) and its dtype; Hydra overrides
(``model=...``, ``temperature=0.7``) work too. After each answer: tokens, tokens/s and the
compression ratio. The n-gram pool persists across turns (``pool.persistent``). Ctrl-C stops the
current answer and keeps what was printed; Ctrl-D (end of input) or ``/exit`` leaves; ``/reset``
clears the conversation and the pool. Configured by ``conf/chat.yaml`` (same groups as the sweep).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig

from lade.config import register_schemas, with_auto_maxima
from lade.decoding import LookaheadDecoder

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")
BLOCK_COLOR, RESET = "\033[36m", "\033[0m"


class TextStreamer:
    """Receives each step's committed tokens and writes the new text (decoding the whole answer so
    far, so multi-token characters come out whole)."""

    def __init__(self, tokenizer, write: Callable[[str], None], color: bool):
        self.tokenizer = tokenizer
        self.write = write
        self.color = color
        self.tokens: list[int] = []
        self._printed = ""

    def __call__(self, new_tokens: list[int]) -> None:
        self.tokens.extend(new_tokens)
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        fresh, self._printed = text[len(self._printed) :], text
        if fresh:
            self.write(f"{BLOCK_COLOR}{fresh}{RESET}" if self.color and len(new_tokens) > 1 else fresh)


def chat_session(
    decoder: LookaheadDecoder,
    tokenizer,
    cfg: DictConfig,
    read: Callable[[str], str] = input,
    write: Callable[[str], None] = sys.stdout.write,
) -> int:
    """Run the chat until end of input; return the number of answered turns."""
    system = cfg.chat.get("system_prompt")
    messages = [{"role": "system", "content": system}] if system else []
    turns = 0
    while True:
        try:
            line = read("\n> ")
        except EOFError:
            write("\n")
            return turns
        except KeyboardInterrupt:
            write("\n")
            continue
        command = line.strip()
        if not command:
            continue
        if command in ("/exit", "/quit"):
            return turns
        if command == "/reset":
            messages = messages[:1] if system else []
            decoder.pool.reset()
            write("(conversation and n-gram pool cleared)\n")
            continue
        messages.append({"role": "user", "content": line})
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        color = cfg.chat.color and sys.stdout.isatty()  # no escape codes into pipes and files
        streamer = TextStreamer(tokenizer, lambda text: (write(text), sys.stdout.flush()), color)
        started = time.perf_counter()
        result = None
        try:
            result = decoder.generate(ids["input_ids"], cfg.max_new_tokens, streamer=streamer)
        except KeyboardInterrupt:
            write(" [interrupted]")
        elapsed = time.perf_counter() - started
        messages.append(
            {"role": "assistant", "content": tokenizer.decode(streamer.tokens, skip_special_tokens=True)}
        )
        turns += 1
        if cfg.chat.stats:
            count = len(streamer.tokens)
            compression = (
                f", {result.metrics.compression_ratio:.2f} tokens/step" if result is not None else ""
            )
            write(f"\n[{count} tokens, {count / max(elapsed, 1e-9):.1f} tokens/s{compression}]\n")


register_schemas()


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="chat")
def main(cfg: DictConfig) -> None:
    model, tokenizer = instantiate(cfg.model)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"model {cfg.model.name_or_path!r} has no tokenizer with a chat template")
    sized = with_auto_maxima(cfg)  # components at the sizes "auto" searches up to
    decoder = LookaheadDecoder(
        model,
        cfg.lookahead.window,
        cfg.lookahead.ngram,
        cfg.lookahead.guess,
        proposer=instantiate(sized.proposer),
        pool=instantiate(sized.pool),
        verifier=instantiate(sized.verifier),
        seed=cfg.seed,
        calibration_dir=cfg.chat.get("calibration_dir"),
    )
    sys.stdout.write("lade chat: Ctrl-C stops an answer, Ctrl-D or /exit leaves, /reset forgets.\n")
    chat_session(decoder, tokenizer, cfg)


def hydra_arguments(argv: list[str]) -> list[str]:
    """``--model NAME`` and ``--dtype D`` as Hydra overrides (``model=NAME`` when ``conf/model`` has
    it, else ``model=hf model.name_or_path=NAME``; ``model.dtype=D``); other arguments unchanged."""
    out, rest = [], list(argv)
    while rest:
        argument = rest.pop(0)
        flag, _, value = argument.partition("=")
        if flag not in ("--model", "--dtype"):
            out.append(argument)
            continue
        if not value:
            if not rest:
                raise SystemExit(f"{flag} needs a value")
            value = rest.pop(0)
        if flag == "--dtype":
            out.append(f"model.dtype={value}")
        elif (Path(CONFIG_DIR) / "model" / f"{value}.yaml").is_file():
            out.insert(0, f"model={value}")  # a group choice comes before overrides of its fields
        else:
            out[:0] = ["model=hf", f"model.name_or_path={value}"]
    return out


if __name__ == "__main__":
    sys.argv[1:] = hydra_arguments(sys.argv[1:])
    main()
