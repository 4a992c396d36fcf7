# The dwd image: one static binary on distroless, run as the nonroot user (65532), writing no files, so
# that it runs with a read-only root file system. `make image` builds it.
#
# The binary is /usr/local/bin/dwd and, through a symlink, /usr/local/bin/dependency-watchdog: the path
# Gardener runs the original under, so that an image-vector override replaces the original in place.

# The Go minor release of go.mod; the image brings its latest patch release. `make image` passes it.
ARG GO_VERSION=1.26

# The build stage runs on the builder's own platform and cross-compiles for the target's (TARGETOS,
# TARGETARCH, set by buildx for each of --platform): `make image-multiarch` builds linux/amd64 and
# linux/arm64 without emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG VERSION=dev
ARG COMMIT=
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# The modules in a layer of their own, which a change of the sources leaves cached.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
    -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/dwd ./cmd/dwd \
    && ln -s dwd /out/dependency-watchdog && ln -s dwd /out/kubectl-dwd

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=
LABEL org.opencontainers.image.title="dwd" \
      org.opencontainers.image.description="A sharded dependency watchdog for Gardener seeds" \
      org.opencontainers.image.source="https://github.com/sharded-dwd/dependency-watchdog" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
# Copying the directory keeps the symlink a symlink; copying the link by name would follow it and hold
# the binary twice.
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/dwd"]
