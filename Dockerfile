# The halluwatch worker image (also runs `halluwatch migrate`, `replay`, `doctor`).
# The worker's requirements plus the `export` extra, nothing else: no matplotlib (the
# `calibrate` and `report` extras; run those from a checkout) and no demo broker (`demo`).
# CPU-only: torch comes from PyTorch's CPU wheel index before anything can pull a CUDA
# build. The default model needs none of it (its packaged int8 ONNX file is converted on the
# first start); torch exports a model configured otherwise (fp32, another name), once. Either
# lands in $HALLUWATCH_MODEL_CACHE (a volume in infra/docker-compose.yml), after which the
# worker runs on onnxruntime alone.
FROM python:3.11-slim-bookworm

ARG TORCH_VERSION=2.13.0
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    HALLUWATCH_MODEL_CACHE=/models \
    HALLUWATCH_DATA_DIR=/var/lib/halluwatch

RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}"

WORKDIR /src
COPY pyproject.toml README.md ./
COPY pipeline ./pipeline
COPY detectors ./detectors
COPY schemas ./schemas
COPY dashboards ./dashboards
RUN pip install '.[export]' && rm -rf /src

RUN useradd --system --uid 10001 --home-dir /var/lib/halluwatch --create-home halluwatch \
    && mkdir -p /models && chown halluwatch /models
USER halluwatch
WORKDIR /var/lib/halluwatch
VOLUME ["/models", "/var/lib/halluwatch"]
EXPOSE 9464

HEALTHCHECK --interval=10s --timeout=5s --start-period=180s --retries=6 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4)"]
CMD ["halluwatch", "worker"]
