"""The offline release preflight: ordered check groups that report findings, never raise, for bad release data.

``trace-repro check`` and ``tests_offline/test_preflight_report.py`` both iterate :mod:`trace_lib.preflight.registry`.
"""
