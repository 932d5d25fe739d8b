"""Figures: pure functions from tables (and fitted summaries) to matplotlib figures.

The pipelines' nodes only hand them their inputs; the tests check the artists' data (line and
scatter coordinates, image arrays, tick labels, titles) without Kedro.
"""
