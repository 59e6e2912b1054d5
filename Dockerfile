# The drasim image: every service is `python -m drasim.<service>` from this one image.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY libs libs
COPY services services
COPY migrations migrations
RUN pip install --no-cache-dir .
ENTRYPOINT ["drasim"]
CMD ["--help"]
