"""Data files the detectors load: the sentinel's weights and training prompts, default thresholds.

Also the default embedding model's tokenizer (Apache-2.0, see ``all-MiniLM-L6-v2.NOTICE.txt``).
"""
