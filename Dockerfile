# logstore container: build on Debian 12, run on slim Debian 12 with only the
# runtime libraries, as a non-root user, data in the /data volume.
#
#   docker build -t logstore .
#   docker run -p 8080:8080 -v logstore-data:/data logstore
#
# Configure with LOGSTORE_* environment variables (LOGSTORE_LOG_RETENTION_HOURS=24).
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
        gcc libc6-dev make pkg-config libmicrohttpd-dev libjansson-dev libssl-dev \
        zlib1g-dev libzstd-dev liblz4-dev libsnappy-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY engine engine
COPY api api
COPY service service
RUN make build/logstore

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 libssl3 zlib1g libzstd1 liblz4-1 libsnappy1v5 \
        curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin logstore \
    && mkdir -p /data && chown logstore:logstore /data
COPY --from=build /src/build/logstore /usr/local/bin/logstore
USER logstore
VOLUME ["/data"]
EXPOSE 8080
ENV LOGSTORE_LOG_DIRS=/data \
    LOGSTORE_LISTENERS=http://0.0.0.0:8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/health/ready || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/logstore"]
