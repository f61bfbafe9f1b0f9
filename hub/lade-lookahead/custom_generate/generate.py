"""Lookahead decoding (Fu, Bailis, Stoica, Zhang, ICML 2024) as a transformers ``custom_generate`` method.

    model.generate(input_ids, custom_generate="<this repository>", trust_remote_code=True, max_new_tokens=128)

Lossless: greedy outputs equal ``generate``'s, sampled ones follow the model's distribution exactly.
The decoding is the ``lade`` library's (distribution ``lookahead-lade``, see requirements.txt);
lookahead settings are keyword arguments: ``window``, ``ngram``, ``guess`` (default ``"auto"``),
``decoder`` (a ``lade.LookaheadDecoder`` to reuse) and ``generator``.
"""

import lade


def generate(model, *args, **kwargs):
    """transformers calls this with every argument of ``model.generate`` (``model`` instead of ``self``)."""
    return lade.generate(model, *args, **kwargs)
