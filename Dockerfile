# The operator image: the binary plus the charts and watches.yaml it serves.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY main.go ./
COPY config/prometheus/prometheusrule.yaml config/prometheus/
COPY api/ api/
COPY app/ app/
COPY controllers/ controllers/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o manager .
# The licences of what the binary links, as OpenShift's certification asks: ours, Go's and each
# module's (hack/licenses.sh).
COPY LICENSE ./
COPY hack/licenses.sh hack/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} hack/licenses.sh /licenses

# The binary is static (CGO_ENABLED=0), so the image needs nothing else. make images builds the
# same image without Docker; VERSION (the operator's) tells the images of two versions apart.
FROM scratch
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title=cloudspace-operator org.opencontainers.image.version=${VERSION}
# The labels OpenShift's certification (preflight) requires of an operator image.
LABEL name=cloudspace-operator vendor=Cloudspace maintainer=Cloudspace version=${VERSION} release=1 \
      summary="Cloudspace Operator: self-service developer infrastructure" \
      description="Browser IDE workspaces with a gRPC API, virtual machines and node daemons, each from a Helm chart the operator applies and owns."
WORKDIR /opt/cloudspace
COPY --from=builder /workspace/manager /manager
COPY --from=builder /licenses /licenses
COPY watches.yaml ./watches.yaml
COPY helm-charts/ ./helm-charts/
USER 65532:65532
ENTRYPOINT ["/manager"]
