"""Incidents: findings of the judges enter, with the records that follow a node across jobs.

Localization events leave: which part, why, how sure, what to do, routed to the right job.
"""
