"""Deterministic simulation of savers, maintenance and LangGraph writers on one event
loop with virtual time: one seed, one exact interleaving (see ``harness.py``)."""
