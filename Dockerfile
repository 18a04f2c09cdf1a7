# The sandgate gateway image. Its default config is deploy/fastgpt/Caddyfile, which makes it a drop-in for
# ghcr.io/labring/fastgpt-agent-sandbox-proxy: same port (1006), same environment variables, plain HTTP.
# deploy/astrbot/compose.yaml runs the same image as a sandbox manager (Bay's API): iptables is here for the
# address policy it programs on the host's packet filter.
#
#   CGO_ENABLED=0 ./xcaddy.sh && docker build -t sandgate .     (./xcaddy.sh --kubernetes: deploy/kubernetes's fleet image)
#
# The build context must hold a prebuilt ./caddy (see .dockerignore): no Go toolchain image is pulled, so the image
# builds offline from any Debian-based base.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates iptables \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 sandgate \
 && useradd --uid 65532 --gid 65532 --home-dir /data --no-create-home --shell /usr/sbin/nologin sandgate \
 && mkdir -p /data /config /etc/sandgate \
 && chown 65532:65532 /data /config
COPY caddy /usr/bin/caddy
COPY deploy/fastgpt/Caddyfile /etc/sandgate/Caddyfile
# Caddy keeps certificates and its autosave under XDG_DATA_HOME / XDG_CONFIG_HOME.
ENV XDG_DATA_HOME=/data XDG_CONFIG_HOME=/config
USER 65532:65532
WORKDIR /data
EXPOSE 1006
# No curl in the image: bash's /dev/tcp asks /health on PORT (default 1006).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${PORT:-1006} && printf 'GET /health HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
# PREVIEW_PORT defaults to PORT, as in the original (a Caddyfile cannot default one variable to another).
CMD ["sh", "-c", "export PREVIEW_PORT=\"${PREVIEW_PORT:-${PORT:-1006}}\"; exec caddy run --config /etc/sandgate/Caddyfile --adapter caddyfile"]
