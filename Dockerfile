# Multi-stage build: the release binary (glibc) on distroless cc, as the nonroot user.
# Not built in CI (no container engine there); kept minimal and standard.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --release --locked && strip target/release/misschedule-exporter

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/misschedule-exporter /usr/local/bin/misschedule-exporter
USER 65532:65532
EXPOSE 18493
ENTRYPOINT ["/usr/local/bin/misschedule-exporter"]
