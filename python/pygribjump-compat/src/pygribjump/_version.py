# The pygribjump release whose API this package follows (Polytope and earthkit-data check none).
__version__ = "0.13.1"
__min_lib_version__ = "0.10.0"
