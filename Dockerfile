# warmroute: session-affinity gateway for LLM serving.
#   docker build -t warmroute .
#   docker run -p 8080:8080 -p 9090:9090 warmroute serve --upstream http://vllm-0:8000 --upstream http://vllm-1:8000

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the `prepare` build needs the dev toolchain; dist comes from the build stage.
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
USER node
EXPOSE 8080 9090
# SIGTERM drains open streams (timeouts.drainMs, 30 s by default) before exiting.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve", "--config", "config/warmroute.example.yaml"]
