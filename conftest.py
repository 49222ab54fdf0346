pytest_plugins = ["trace_lib.pytest_plugin", "pytester"]  # pytester: in-process runs of the lanes in tests
