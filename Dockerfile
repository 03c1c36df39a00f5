# lockstep's container image: a static binary on a distroless, non-root base.
# Untested on the development machine (it has no container engine); the
# binary it packages is the one `make build` builds and the tests exercise.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/lockstep ./cmd/lockstep

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lockstep /usr/local/bin/lockstep
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/lockstep"]
CMD ["agent"]
