"""Candidate proposers: the LLM (any OpenAI-compatible endpoint) and the offline tuner."""

from .base import Proposer, RoundContext

__all__ = ["Proposer", "RoundContext"]
