"""Every forward call a model makes, and what those calls would cost on another machine.

Whether lookahead pays depends on how a forward's time grows with the tokens fed (``lade.calibration``),
and that curve differs between machines (on an AVX2 CPU a bf16 forward over 16 tokens costs ~8x one
token; on a CPU with native bf16 ~1.3x). A ``ForwardLog`` records the shape of each forward call (rows,
tokens fed, tokens already cached) and the wall time spent inside it, through hooks that change
nothing, for any method alike (HF ``generate``, prompt lookup, the library's decoders). Then

    modeled seconds = sum over calls of latency(tokens fed, cached)  +  measured time outside forwards

is what the same calls would take on a machine whose forward latency is ``latency``: the decisions
the methods take (steps, sizes) are real, only the forward's price is swapped. An auto decoder given
that latency plans as it would on that machine, so its policy can be studied on a machine that lacks
the regime (``experiments/modeled_auto.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lade.calibration import LatencyModel


@dataclass(frozen=True)
class ForwardCall:
    """One forward call: ``rows`` x ``tokens`` fed after ``cached`` tokens, ``seconds`` inside it."""

    rows: int
    tokens: int
    cached: int
    seconds: float


@dataclass
class ForwardLog:
    """Records every forward call of ``model`` (``attach``), until ``detach``.

    Use as a context manager: ``with ForwardLog(model) as log: model.generate(...)``; then
    ``log.calls``, ``log.forward_seconds`` and ``log.modeled_seconds(latency, wall)``.
    """

    model: object
    calls: list[ForwardCall] = field(default_factory=list)

    def __post_init__(self):
        self._handles = []
        self._started: float | None = None
        self._shape: tuple[int, int, int] | None = None

    def __enter__(self) -> ForwardLog:
        self._handles = [
            self.model.register_forward_pre_hook(self._before, with_kwargs=True),
            self.model.register_forward_hook(self._after),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _before(self, module, args, kwargs) -> None:
        fed = kwargs.get("input_ids", args[0] if args else None)
        if fed is None:
            fed = kwargs["inputs_embeds"]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        cached = cache.get_seq_length() if cache is not None and hasattr(cache, "get_seq_length") else 0
        self._shape = (fed.shape[0], fed.shape[1], int(cached))
        self._started = time.perf_counter()

    def _after(self, module, args, output) -> None:
        rows, tokens, cached = self._shape
        self.calls.append(ForwardCall(rows, tokens, cached, time.perf_counter() - self._started))

    @property
    def forward_seconds(self) -> float:
        """Wall time spent inside the recorded forward calls."""
        return sum(call.seconds for call in self.calls)

    @property
    def tokens_fed(self) -> int:
        """Tokens fed over all calls (rows x tokens), prefills included."""
        return sum(call.rows * call.tokens for call in self.calls)

    def modeled_seconds(self, latency: LatencyModel, wall_seconds: float | None = None) -> float:
        """The recorded calls priced by ``latency`` (one row of ``rows * tokens``, after ``cached``),
        plus, given the call's measured ``wall_seconds``, the time it spent outside the forwards."""
        modeled = sum(latency(call.rows * call.tokens, call.cached) for call in self.calls)
        if wall_seconds is not None:
            modeled += max(0.0, wall_seconds - self.forward_seconds)
        return modeled
