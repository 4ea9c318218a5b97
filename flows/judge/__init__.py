"""Judgement: signals enter; each entity is weighed against its own history and its job's peers.

Scores, baselines, stragglers and triggered findings leave, for incidents to put into words.
"""
