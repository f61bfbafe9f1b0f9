"""Proposers and verifiers."""

from strategies.greedy import GreedyVerifier
from strategies.jacobi import JacobiProposer
from strategies.plain import AutoregressiveProposer

__all__ = ["AutoregressiveProposer", "GreedyVerifier", "JacobiProposer"]
