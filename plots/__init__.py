"""Figures drawn from stored run results only (one module per figure kind)."""
