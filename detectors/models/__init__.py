"""Model runtimes the detectors share.

The sentence embedder and its ONNX export, ONNX classifiers, learned coefficients, the chat
endpoint protocol.
"""
