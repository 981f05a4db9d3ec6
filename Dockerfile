# The operator image: the binary plus the charts and watches.yaml it serves.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY main.go ./
COPY api/ api/
COPY controllers/ controllers/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o manager .

# The binary is static (CGO_ENABLED=0), so the image needs nothing else.
FROM scratch
WORKDIR /opt/cloudspace
COPY --from=builder /workspace/manager /manager
COPY watches.yaml ./watches.yaml
COPY helm-charts/ ./helm-charts/
USER 65532:65532
ENTRYPOINT ["/manager"]
