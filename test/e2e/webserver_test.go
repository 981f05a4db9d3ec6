package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// The rows the web backend needs besides its schema: a user (its log-in compares the password
// column with the user name), and a template and a size of our own (the schema's images cannot
// be pulled here, and its sizes ask for more than a test needs).
const (
	seedUserUID = "0123456789abcdef01234567"
	seedRows    = `INSERT INTO t_user (uid, username, password, nickname, email, create_time, delete_time, status)
  VALUES ('` + seedUserUID + `', 'tester', 'tester', 'Tester', 'tester@example.com', NOW(), NOW(), 0);
INSERT INTO t_space_template (id, kind_id, name, ` + "`desc`" + `, tags, image, status, create_time, delete_time)
  VALUES (100, 1, 'Local', 'a test image', 'Test', 'cloudspace/test-ide:1', 0, NOW(), NOW());
INSERT INTO t_spacespec (id, cpu_spec, mem_spec, storage_spec, name, ` + "`desc`" + `) VALUES (100, '500m', '512Mi', '1Gi', 'tiny', 'test');`
)

// TestTheTutorialsWebBackendUnmodified drives the tutorial's own web backend, built from its
// source at the last commit that speaks our legacy proto and run as its users run it (MySQL,
// Redis, its conf/application.yaml), through its HTTP API as its Vue front end does: log in,
// list the templates, create-and-start a workspace, list, stop and delete it. It dials the
// operator's legacy listener in plaintext without a token, as it dials the tutorial's
// controller; the workspace is the listener's user's, and the address it stores for its
// gateway is the IDE's. Nothing is left behind.
func TestTheTutorialsWebBackendUnmodified(t *testing.T) {
	binary := buildSeedWebserver(t)
	dsn := startMariaDB(t, seedRows)
	redis := miniredis.RunT(t)
	web := startSeedWebserver(t, binary, dsn, redis.Addr(), legacyAddr)

	var user struct {
		ID    uint32 `json:"id"`
		UID   string `json:"uid"`
		Token string `json:"token"`
	}
	web.call(t, "POST", "/login", "", url.Values{"username": {"tester"}, "password": {"tester"}}, seedLoginSuccess, &user)
	var tmpls []struct {
		ID uint32 `json:"id"`
	}
	web.call(t, "GET", "/api/tmpls", user.Token, nil, seedQuerySuccess, &tmpls)
	if !containsID(tmpls, 100) {
		t.Fatalf("templates %+v, want ours (100)", tmpls)
	}
	var space struct {
		ID  uint32 `json:"id"`
		SID string `json:"sid"`
	}
	start := time.Now()
	web.call(t, "POST", "/api/space_cas", user.Token, map[string]any{"name": "go-1", "tmpl_id": 100, "space_spec_id": 100, "user_id": user.ID},
		seedSpaceStartSuccess, &space)
	t.Logf("create-and-start through the web backend: %s", time.Since(start).Round(time.Millisecond))

	ws := &infrav1alpha1.Workspace{}
	name := "ws-" + user.UID + "-" + space.SID
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: seedNS, Name: name}, ws); err != nil {
		t.Fatalf("the web backend's workspace %s/%s: %v", seedNS, name, err)
	}
	if ws.Spec.Owner != legacyUser || ws.Status.Phase != infrav1alpha1.WorkspaceRunning || ws.Spec.Resources.CPU.String() != "500m" {
		t.Errorf("workspace %s: owner %q, phase %s, cpu %s; want the legacy listener's user's, Running, 500m", name, ws.Spec.Owner, ws.Status.Phase, ws.Spec.Resources.CPU)
	}
	// Its gateway routes to what the backend stored: the IDE's address and port.
	wantHost := fmt.Sprintf("%s:%d", ws.Status.PodIP, ws.Status.Port)
	if got := redis.HGet("hosts", space.SID); got != wantHost || ws.Status.PodIP == "" {
		t.Errorf("the web backend stored %q for its gateway, want the IDE's %q", got, wantHost)
	}

	var spaces []struct {
		ID      uint32 `json:"id"`
		Running uint32 `json:"running_status"`
	}
	web.call(t, "GET", "/api/spaces", user.Token, nil, seedQuerySuccess, &spaces)
	if len(spaces) != 1 || spaces[0].ID != space.ID || spaces[0].Running != 1 {
		t.Errorf("the user's spaces: %+v, want the one running", spaces)
	}
	web.call(t, "PUT", "/api/space_stop", user.Token, map[string]any{"sid": space.SID}, seedStopSuccess, nil)
	waitFor(t, time.Minute, "the stopped space's workspace and its children gone", func(ctx context.Context) error {
		return seedLeftovers(ctx, name)
	})
	web.call(t, "DELETE", "/api/space?id="+fmt.Sprint(space.ID), user.Token, nil, seedDeleteSuccess, nil)
}

// containsID reports whether a template of that id is listed.
func containsID(tmpls []struct {
	ID uint32 `json:"id"`
}, id uint32) bool {
	for _, t := range tmpls {
		if t.ID == id {
			return true
		}
	}
	return false
}

// seedLeftovers is an error naming what of the workspace named is still in the web backend's
// namespace: the Workspace, or a child labelled with its name.
func seedLeftovers(ctx context.Context, name string) error {
	var left []string
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: seedNS, Name: name}, &infrav1alpha1.Workspace{}); err == nil {
		left = append(left, "Workspace")
	}
	lists := map[string]client.ObjectList{"pod": &corev1.PodList{}, "PersistentVolumeClaim": &corev1.PersistentVolumeClaimList{},
		"Service": &corev1.ServiceList{}, "Secret": &corev1.SecretList{}}
	for kind, list := range lists {
		if err := k8sClient.List(ctx, list, client.InNamespace(seedNS), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
			return err
		}
		if n := meta.LenList(list); n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, kind))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %s", strings.Join(left, ", "))
	}
	return nil
}

// The web backend's answer codes (its pkg/code), in the "status" of every answer.
const (
	seedQuerySuccess      = 0
	seedLoginSuccess      = 2
	seedSpaceStartSuccess = 9
	seedDeleteSuccess     = 11
	seedStopSuccess       = 14
)

// seedWeb is the running web backend's HTTP API.
type seedWeb struct {
	base string
	log  func() string
}

// call sends a request as the Vue front end does (a form for log-in, JSON otherwise, the
// token bare in Authorization) and fails the test unless the answer's status is want; data,
// when not nil, receives the answer's data.
func (w *seedWeb) call(t *testing.T, method, path, token string, body any, want int, data any) {
	t.Helper()
	req, err := seedRequest(method, w.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v\nthe web backend's log:\n%s", method, path, err, w.log())
	}
	defer resp.Body.Close()
	var answer struct {
		Status  int             `json:"status"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK || answer.Status != want {
		t.Fatalf("%s %s: HTTP %d, status %d (%s), %v; want status %d\nthe web backend's log:\n%s",
			method, path, resp.StatusCode, answer.Status, answer.Message, err, want, w.log())
	}
	if data != nil {
		if err := json.Unmarshal(answer.Data, data); err != nil {
			t.Fatalf("%s %s: data %s: %v", method, path, answer.Data, err)
		}
	}
}

// seedRequest is a request with body as a form (url.Values) or JSON (anything else).
func seedRequest(method, target string, body any) (*http.Request, error) {
	switch b := body.(type) {
	case nil:
		return http.NewRequest(method, target, nil)
	case url.Values:
		req, err := http.NewRequest(method, target, strings.NewReader(b.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		return req, err
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequest(method, target, strings.NewReader(string(data)))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}
}

// openDB is the database at dsn, reachable.
func openDB(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}
