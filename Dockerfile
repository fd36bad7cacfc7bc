# Multi-stage build: the exporter and the kubectl plugin (release, glibc) on distroless cc,
# as the nonroot user. tests/image.rs assembles exactly what the COPY lines below bring in
# (minus .dockerignore) and builds it offline, so a manifest the context cannot satisfy
# fails CI rather than the first user's `docker build`.
#
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) -t misschedule-exporter .
FROM rust:1.95-bookworm AS build
ARG REVISION=unknown
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# Cargo.toml declares the benches: the manifest is invalid without them (they are not built).
COPY benches ./benches
RUN MISSCHEDULE_REVISION="$REVISION" cargo build --release --locked --bins \
    && strip target/release/misschedule-exporter target/release/kubectl-misschedule

FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="misschedule-exporter" \
      org.opencontainers.image.description="Prometheus exporter that explains why DaemonSet pods are misscheduled" \
      org.opencontainers.image.source="https://github.com/misschedule-exporter/misschedule-exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /src/target/release/misschedule-exporter /usr/local/bin/misschedule-exporter
# The kubectl plugin, for `kubectl cp` or `docker cp` out of the image (or `kubectl exec`).
COPY --from=build /src/target/release/kubectl-misschedule /usr/local/bin/kubectl-misschedule
USER 65532:65532
EXPOSE 18493
ENTRYPOINT ["/usr/local/bin/misschedule-exporter"]
