"""Text helpers the detectors share.

Sentences and words, values and names, stated flags, evidence as people
read it.
"""
