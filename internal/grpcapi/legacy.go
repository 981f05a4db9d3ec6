package grpcapi

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
)

// The legacy CloudIdeService's PodStatus.status values.
const (
	podNotExist int32 = 0
	podExist    int32 = 1
)

var legacyFields = fields{
	name: "name", namespace: "namespace", image: "image", port: "port",
	cpu: "resourceLimit.cpu", memory: "resourceLimit.Memory", storage: "resourceLimit.Storage",
}

// legacyService serves the legacy pb.CloudIdeService (the tutorial's API), wire-compatible, on
// Workspaces.
type legacyService struct {
	pb.UnimplementedCloudIdeServiceServer
	w *workspaces
}

func (s *legacyService) CreateSpaceAndWaitForRunning(ctx context.Context, in *pb.PodInfo) (*pb.PodSpaceInfo, error) {
	sp := spec{name: in.GetName(), namespace: in.GetNamespace(), image: in.GetImage(), port: in.GetPort()}
	if rl := in.GetResourceLimit(); rl != nil {
		sp.cpu, sp.memory, sp.storage = rl.GetCpu(), rl.GetMemory(), rl.GetStorage()
	}
	if err := s.w.validate(&sp, legacyFields); err != nil {
		return nil, err
	}
	ws, err := s.w.create(ctx, userFrom(ctx), sp, true)
	if err != nil {
		return nil, err
	}
	return spaceInfo(ws), nil
}

func (s *legacyService) DeleteSpace(ctx context.Context, in *pb.QueryOption) (*pb.Response, error) {
	if err := s.w.delete(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), legacyFields); err != nil {
		return nil, err
	}
	return &pb.Response{Status: http.StatusOK, Message: "success"}, nil
}

// GetPodSpaceStatus answers, as the tutorial's server did, whether the workspace exists; a missing one is
// an answer (status 0), not an error.
func (s *legacyService) GetPodSpaceStatus(ctx context.Context, in *pb.QueryOption) (*pb.PodStatus, error) {
	ws, err := s.w.owned(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), legacyFields)
	if status.Code(err) == codes.NotFound {
		return &pb.PodStatus{Status: podNotExist, Message: "not found"}, nil
	}
	if err != nil {
		return nil, err
	}
	return &pb.PodStatus{Status: podExist, Message: string(ws.Status.Phase)}, nil
}

func (s *legacyService) GetPodSpaceInfo(ctx context.Context, in *pb.QueryOption) (*pb.PodSpaceInfo, error) {
	ws, err := s.w.owned(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), legacyFields)
	if err != nil {
		return nil, err
	}
	return spaceInfo(ws), nil
}

func spaceInfo(ws *infrav1alpha1.Workspace) *pb.PodSpaceInfo {
	return &pb.PodSpaceInfo{NodeName: ws.Status.NodeName, Ip: ws.Status.PodIP, Port: ws.Status.Port}
}
