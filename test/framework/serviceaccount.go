package framework

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountToken is a token of sa, valid for an hour, as a pod of it would have one
// (TokenRequest).
func ServiceAccountToken(ctx context.Context, c client.Client, sa *corev1.ServiceAccount) (string, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("a token of ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return tr.Status.Token, nil
}
