# The example inference server (examples/batched_server.py), with gpuctl's batcher.
# Build from the checkout's root:
#   docker build -f examples/batched-server.Dockerfile -t ghcr.io/example/batched-server:1.0 .
# gpuctl.batching needs only the standard library (and NumPy for this model), so gpuctl is
# installed without its command-line dependencies.
FROM python:3.12-slim
WORKDIR /app
COPY . /src
RUN pip install --no-cache-dir --no-deps /src && pip install --no-cache-dir "numpy>=1.26,<3" \
    && cp /src/examples/batched_server.py /app/ && rm -rf /src
USER 65534
EXPOSE 8000 9400
CMD ["python", "/app/batched_server.py"]
