package grpcapi

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
)

// The seed's PodStatus.status values.
const (
	podNotExist int32 = 0
	podExist    int32 = 1
)

var seedFields = fields{
	name: "name", namespace: "namespace", image: "image", port: "port",
	cpu: "resourceLimit.cpu", memory: "resourceLimit.Memory", storage: "resourceLimit.Storage",
}

// seedService serves the seed's CloudIdeService on Workspaces.
type seedService struct {
	pb.UnimplementedCloudIdeServiceServer
	w *workspaces
}

func (s *seedService) CreateSpaceAndWaitForRunning(ctx context.Context, in *pb.PodInfo) (*pb.PodSpaceInfo, error) {
	sp := spec{name: in.GetName(), namespace: in.GetNamespace(), image: in.GetImage(), port: in.GetPort()}
	if rl := in.GetResourceLimit(); rl != nil {
		sp.cpu, sp.memory, sp.storage = rl.GetCpu(), rl.GetMemory(), rl.GetStorage()
	}
	if err := s.w.validate(&sp, seedFields); err != nil {
		return nil, err
	}
	ws, err := s.w.create(ctx, userFrom(ctx), sp, true)
	if err != nil {
		return nil, err
	}
	return spaceInfo(ws), nil
}

func (s *seedService) DeleteSpace(ctx context.Context, in *pb.QueryOption) (*pb.Response, error) {
	if err := s.w.delete(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), seedFields); err != nil {
		return nil, err
	}
	return &pb.Response{Status: http.StatusOK, Message: "success"}, nil
}

// GetPodSpaceStatus answers, as the seed did, whether the workspace exists; a missing one is
// an answer (status 0), not an error.
func (s *seedService) GetPodSpaceStatus(ctx context.Context, in *pb.QueryOption) (*pb.PodStatus, error) {
	ws, err := s.w.owned(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), seedFields)
	if status.Code(err) == codes.NotFound {
		return &pb.PodStatus{Status: podNotExist, Message: "not found"}, nil
	}
	if err != nil {
		return nil, err
	}
	return &pb.PodStatus{Status: podExist, Message: string(ws.Status.Phase)}, nil
}

func (s *seedService) GetPodSpaceInfo(ctx context.Context, in *pb.QueryOption) (*pb.PodSpaceInfo, error) {
	ws, err := s.w.owned(ctx, userFrom(ctx), in.GetNamespace(), in.GetName(), seedFields)
	if err != nil {
		return nil, err
	}
	return spaceInfo(ws), nil
}

func spaceInfo(ws *infrav1alpha1.Workspace) *pb.PodSpaceInfo {
	return &pb.PodSpaceInfo{NodeName: ws.Status.NodeName, Ip: ws.Status.PodIP, Port: ws.Status.Port}
}
