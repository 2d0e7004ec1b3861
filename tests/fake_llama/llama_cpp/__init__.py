"""A stand-in for llama-cpp-python, put on ``PYTHONPATH`` by tests: see ``server/__main__.py``."""
