package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
)

// failingWaits are the reasons a container waits for that no amount of waiting fixes, each
// with the condition reason it is reported as: the kubelet retries them forever, and a pod
// under restartPolicy Always never reaches Failed, so without reading them a resource would
// say "starting" for ever. ErrImagePull is not one: a registry's blip is retried at once;
// ImagePullBackOff follows within seconds when it lasts.
var failingWaits = map[string]string{
	"CrashLoopBackOff":           infrav1alpha1.ReasonCrashLoop,
	"ImagePullBackOff":           infrav1alpha1.ReasonImagePullFailed,
	"InvalidImageName":           infrav1alpha1.ReasonImagePullFailed,
	"ErrImageNeverPull":          infrav1alpha1.ReasonImagePullFailed,
	"CreateContainerConfigError": infrav1alpha1.ReasonContainerCannotStart,
	"CreateContainerError":       infrav1alpha1.ReasonContainerCannotStart,
	"RunContainerError":          infrav1alpha1.ReasonContainerCannotStart,
}

// maxProblemMessage bounds what a container's message adds to a status: a crashing program's
// termination message can be long, and status is written to etcd.
const maxProblemMessage = 256

// problem is why a pod's container is failing: the condition reason (failingWaits) and a
// message naming the pod, the container, its image and its last exit; zero when none is.
type problem struct {
	reason, message string
}

// podProblems reads the live pods' containers: how many times they restarted, and the first
// one that is failing.
func podProblems(pods []corev1.Pod) (restarts int32, first problem) {
	for _, p := range livePods(pods) {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			restarts += cs.RestartCount
			if first.reason == "" {
				first = containerProblem(p.Name, cs)
			}
		}
	}
	return restarts, first
}

func containerProblem(pod string, cs corev1.ContainerStatus) problem {
	w := cs.State.Waiting
	if w == nil || failingWaits[w.Reason] == "" {
		return problem{}
	}
	msg := fmt.Sprintf("pod %s: container %s (image %q): %s", pod, cs.Name, cs.Image, w.Reason)
	if w.Message != "" {
		msg += ": " + clip(w.Message)
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		msg += fmt.Sprintf("; restarted %d times, last exit %d (%s)", cs.RestartCount, t.ExitCode, t.Reason)
		if t.Message != "" {
			msg += ": " + clip(t.Message)
		}
	}
	return problem{reason: failingWaits[w.Reason], message: msg}
}

// clip keeps the last maxProblemMessage characters of a message, on one line: a program's last
// words are at the end.
func clip(s string) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) > maxProblemMessage {
		return "…" + string(r[len(r)-maxProblemMessage:])
	}
	return string(r)
}

// podsOf decodes the pods the engine observed for a PodObserver.
func podsOf(observed []*unstructured.Unstructured) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	for _, o := range observed {
		var p corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
			return nil, fmt.Errorf("decoding pod %s: %w", o.GetName(), err)
		}
		pods = append(pods, p)
	}
	return pods, nil
}

func livePods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func readyPod(pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		if pods[i].Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return &pods[i]
			}
		}
	}
	return nil
}
