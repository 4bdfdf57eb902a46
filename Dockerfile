# syntax=docker/dockerfile:1
# warmroute: session-affinity gateway for vLLM.
#   docker build -t warmroute .
#   docker run --read-only -p 8080:8080 -p 9090:9090 \
#     -e WARMROUTE_UPSTREAM=http://vllm-0:8000,http://vllm-1:8000 warmroute
# With no upstream (no WARMROUTE_UPSTREAM, --upstream or --config) it exits 2 and names what is
# missing: the example config points at 127.0.0.1 replicas that do not exist in a container.
# test/ship/dockerfile.test.ts checks every property below (no container engine runs in CI).

# Node 20 reached end of life in April 2026: an LTS line, pinned to one release so a rebuild is
# the same runtime. Change it here only; both stages use it.
ARG NODE_VERSION=24.21.0

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
# `npm ci` runs the `prepare` script, which compiles src/ into dist/ with the dev toolchain; the
# prune then drops the dev dependencies, so the runtime stage copies a production node_modules and
# never runs npm (nor needs a workaround for `prepare`). The cache mount keeps the npm cache between
# builds, since src/ is copied before the install.
RUN --mount=type=cache,target=/root/.npm npm ci && npm prune --omit=dev

FROM node:${NODE_VERSION}-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
# Owned by root, readable by all: the gateway writes nothing to disk (logs go to stdout), so the
# root filesystem can be mounted read-only.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The image's `node` user, by number: Kubernetes' runAsNonRoot can only verify a numeric user.
USER 1000:1000
# listen.port and admin.port (src/config/schema.ts).
EXPOSE 8080 9090
# The admin port's /healthz, asked by the gateway's own CLI (no curl in -slim): it finds the port
# as the gateway did, from the serving process's flags (PID 1's command line), WARMROUTE_* and the
# config file, so an admin port set by `serve --admin-port N` or `--config` is followed too.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "dist/cli.js", "healthcheck"]
# node is PID 1 (exec form, no shell, no npm): SIGTERM reaches the gateway, which turns /readyz
# false, lets open streams finish (timeouts.drainMs, 30 s by default) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli.js"]
# Configured from WARMROUTE_* variables or flags appended to `docker run ... warmroute serve`.
CMD ["serve"]
