"""``trace-repro doctor``: what this machine can run, lane by lane, and the one command that fixes each gap.

:mod:`.registry` holds the ordered check modules and the lanes' requirements; each check module defines
``CHECK = Check(name, summary, run)``. :mod:`.report` runs the checks a request needs and renders the answer.
"""
