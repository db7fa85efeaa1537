# toolgate: a small, non-root, shell-less image.
# Build: docker build -t toolgate .
# Run:   docker run --rm -p 8080:8080 -p 9090:9090 toolgate serve --upstream http://mcp-server:3000/mcp \
#          --listen 0.0.0.0:8080 --admin-listen 0.0.0.0:9090

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits do not rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY benches ./benches
RUN mkdir -p src/cli && echo 'fn main() {}' > src/cli/main.rs && touch src/lib.rs \
    && cargo build --profile dist --locked --bin toolgate \
    && rm -rf src
COPY src ./src
RUN touch src/cli/main.rs src/lib.rs && cargo build --profile dist --locked --bin toolgate

# distroless/cc: glibc and libgcc only, no shell, no package manager; runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/dist/toolgate /usr/local/bin/toolgate
COPY config/toolgate.toml /etc/toolgate/toolgate.toml
USER nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve", "--config", "/etc/toolgate/toolgate.toml", "--listen", "0.0.0.0:8080", "--admin-listen", "0.0.0.0:9090"]
