"""perckit: typed Hugging Face datasets and evaluate metrics for perception benchmarks."""

__version__ = "0.1.0"
