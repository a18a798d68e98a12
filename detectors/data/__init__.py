"""Data files the detectors load: the sentinel's weights and training prompts, default thresholds."""
