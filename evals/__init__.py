"""The distill eval harness: gold-labelled sessions, metrics, and a runner (``python -m evals``).

See ``evals/README.md``. Nothing here is shipped in the wheel, and the package never imports it:
run it from a repository checkout.
"""
