pytest_plugins = ["trace_lib.pytest_plugin"]
