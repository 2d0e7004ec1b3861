"""The distill eval harness: gold-labelled sessions, metrics, and a runner (``python -m evals``).

See ``evals/README.md``. Nothing here is shipped in the wheel; ``distill eval`` imports this
package from the repository checkout.
"""
