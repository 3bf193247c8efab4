"""Surfaces: where people and external models reach search2o (each a subpackage)."""
