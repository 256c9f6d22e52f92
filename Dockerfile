# syntax=docker/dockerfile:1
# Build: a static, CGO-free binary.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/kerneld ./cmd/kerneld \
 && mkdir -p /out/data

# Run: distroless static, non-root. Outside a loopback-only setup kerneld
# requires API keys, so pass KERNELD_API_KEYS (key or key:tenant, comma
# separated) when running the container. There is no Node or Python here:
# agents reach MCP servers over HTTP, or a derived image adds the runtime
# their stdio servers need.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kerneld /kerneld
COPY --from=build --chown=nonroot:nonroot /out/data /data
COPY configs /etc/kerneld
ENV KERNELD_CONFIG=/etc/kerneld/kerneld.yaml \
    KERNELD_AGENTS_DIR=/etc/kerneld/agents \
    KERNELD_DATA_DIR=/data \
    KERNELD_ADDR=0.0.0.0:8080
VOLUME /data
EXPOSE 8080
USER nonroot:nonroot
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s CMD ["/kerneld", "healthcheck"]
ENTRYPOINT ["/kerneld"]
