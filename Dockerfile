# syntax=docker/dockerfile:1
# One image for every AgentHub service; the service is the argument:
#   docker run agenthub gateway      (identity | workspace | secrets | messaging | events | gateway | all)
# Build: docker build -t agenthub .

ARG NODE_IMAGE=node:24-slim

# ---- build: all dependencies, compile TypeScript (generated protobuf code is committed) ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV NODE_ENV=development
# The whole tree at once: the workspace list in package.json grows with each service.
COPY . .
RUN npm ci --no-audit --no-fund
RUN npx tsc -b \
 && npm prune --omit=dev --no-audit --no-fund \
 && find . -name '*.tsbuildinfo' -delete \
 && rm -rf libs/*/src services/*/src libs/*/test services/*/test bench proto .ci

# ---- runtime: production dependencies and compiled code only, non-root ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HUB_HOST=0.0.0.0 \
    GRPC_HOST=0.0.0.0 \
    HUB_DATA_DIR=/tmp/agenthub
WORKDIR /app
COPY --from=build --chown=root:root /app /app
# The `node` user (uid 1000) of the base image; nothing under /app is writable by it.
USER 1000:1000
# 8080 gateway HTTP, 50051 gRPC, 9090 ops: /metrics, /healthz, /readyz of gRPC services; the
# gateway's /metrics (split mode, and `serve all` here, as HUB_HOST is 0.0.0.0).
EXPOSE 8080 50051 9090
ENTRYPOINT ["node", "services/hub/bin/agenthub.js", "serve"]
CMD ["all"]
