"""Proposers and verifiers."""

from strategies.gauss_seidel import GaussSeidelProposer
from strategies.greedy import GreedyVerifier
from strategies.jacobi import JacobiProposer
from strategies.plain import AutoregressiveProposer
from strategies.sampling import SamplingVerifier

__all__ = [
    "AutoregressiveProposer",
    "GaussSeidelProposer",
    "GreedyVerifier",
    "JacobiProposer",
    "SamplingVerifier",
]
