package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/kubernetes/driver/kubenames"
	"github.com/sandgate/sandgate/sandboxes"
)

// Workspace copies (snapshots, create from a snapshot, fork) as PVC copies: a short-lived Pod of the copy image
// mounts the source claim read-only and the new claim, and copies the files with the image's own tools, as the
// sandbox user, hardened like a sandbox. The gateway never touches volume data, so this works wherever the claims
// live. The Manager freezes a running source for a consistent copy, which a cluster cannot do (no PauseDriver):
// only a stopped sandbox's workspace and snapshots themselves can be copied.

// DefaultCopyImage is the image copy Pods run when the configuration names none: our base image has sh, du, cp
// and find.
const DefaultCopyImage = "sandgate/sandbox:base"

// exitTooLarge is the copy script's exit status for a source over its byte limit.
const exitTooLarge = 3

// copyScript measures, refuses past the limit, copies, and reports its counts in the termination message (a file
// the kubelet mounts even on a read-only root), which Kubernetes keeps in the Pod's status.
const copyScript = `set -eu
bytes=$(du -sb /src | cut -f1)
if [ "$LIMIT" -gt 0 ] && [ "$bytes" -gt "$LIMIT" ]; then echo "$bytes bytes" > /dev/termination-log; exit 3; fi
cp -a /src/. /dst/
files=$(find /dst -type f | wc -l)
dirs=$(find /dst -mindepth 1 -type d | wc -l)
printf '{"bytes":%s,"files":%s,"dirs":%s}' "$bytes" "$files" "$dirs" > /dev/termination-log
`

// copyClaimFor is the claim of a copy of src: src's size limit (its storage request) unless labels name one.
func (d *Driver) copyClaimFor(src *corev1.PersistentVolumeClaim, dst string, labels map[string]string) *corev1.PersistentVolumeClaim {
	if q, ok := src.Spec.Resources.Requests[corev1.ResourceStorage]; ok && sandboxes.WorkspaceSizeOf(labels) == 0 {
		return d.pvcSized(dst, labels, q)
	}
	return d.pvcFor(dst, labels)
}

// CopyVolume creates the claim dst with labels (or takes it as CreateVolume just made it: ours and unused) and
// copies src's files into it with a copy Pod; limit > 0 fails with ErrSnapshotTooLarge past that many bytes. A
// failed copy removes dst.
func (d *Driver) CopyVolume(ctx context.Context, src, dst string, labels map[string]string, limit int64) (sandboxes.CopyStats, error) {
	began := time.Now()
	claims := d.cs.CoreV1().PersistentVolumeClaims(d.cfg.Namespace)
	srcClaim, err := claims.Get(ctx, kubenames.Object(src), metav1.GetOptions{})
	if err != nil {
		return sandboxes.CopyStats{}, fmt.Errorf("reading workspace claim %s: %w", src, err)
	}
	_, err = claims.Create(ctx, d.copyClaimFor(srcClaim, dst, labels), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A copy goes only into a claim that is ours, with these labels (the one CreateVolume just made).
		cur, gerr := claims.Get(ctx, kubenames.Object(dst), metav1.GetOptions{})
		if gerr != nil {
			return sandboxes.CopyStats{}, fmt.Errorf("reading workspace claim %s: %w", dst, gerr)
		}
		if !maps.Equal(kubenames.ExactLabels(cur.Annotations), labels) {
			return sandboxes.CopyStats{}, fmt.Errorf("workspace claim %s already exists", dst)
		}
		err = nil
	}
	if err != nil {
		return sandboxes.CopyStats{}, fmt.Errorf("creating workspace claim %s: %w", dst, err)
	}
	fail := func(err error) (sandboxes.CopyStats, error) {
		_ = d.RemoveVolume(context.WithoutCancel(ctx), dst)
		return sandboxes.CopyStats{}, err
	}
	pods := d.cs.CoreV1().Pods(d.cfg.Namespace)
	pod, err := pods.Create(ctx, d.copyPodFor(src, dst, limit), metav1.CreateOptions{})
	if err != nil {
		return fail(fmt.Errorf("creating the copy pod for %s: %w", dst, err))
	}
	defer func() { _ = d.deletePod(context.WithoutCancel(ctx), pod, 0) }()
	pod, err = d.waitPod(ctx, pod, func(p *corev1.Pod) (bool, error) {
		if terminal(p) {
			return true, nil
		}
		_, err := startedOrFailed(p) // a copy image that cannot start fails at once
		return false, err
	})
	if err != nil {
		return fail(fmt.Errorf("copying workspace %s: %w", src, err))
	}
	c := mainStatus(pod)
	if c == nil || c.State.Terminated == nil {
		return fail(fmt.Errorf("copying workspace %s: the copy pod %s", src, strings.ToLower(string(pod.Status.Phase))))
	}
	t := c.State.Terminated
	switch t.ExitCode {
	case 0:
	case exitTooLarge:
		return fail(fmt.Errorf("%w: %s over the limit of %d bytes", sandboxes.ErrSnapshotTooLarge, strings.TrimSpace(t.Message), limit))
	default:
		return fail(fmt.Errorf("copying workspace %s: the copy exited %d: %s", src, t.ExitCode, strings.TrimSpace(t.Message)))
	}
	var stats sandboxes.CopyStats
	if err := json.Unmarshal([]byte(t.Message), &stats); err != nil {
		return fail(fmt.Errorf("copying workspace %s: unreadable counts %q: %w", src, t.Message, err))
	}
	stats.Method = "copy-pod"
	stats.Duration = time.Since(began)
	return stats, nil
}

// copyPodFor is the copy Pod: the sandbox's hardening, the source read-only, bounded in time and resources.
func (d *Driver) copyPodFor(src, dst string, limit int64) *corev1.Pod {
	yes, no := true, false
	uid := int64(SandboxUID)
	deadline := int64(3600)
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	image := d.cfg.CopyImage
	if image == "" {
		image = DefaultCopyImage
	}
	pullPolicy := corev1.PullPolicy(d.cfg.ImagePullPolicy)
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	mem := resource.MustParse("256Mi")
	claim := func(name, vol string, ro bool) corev1.Volume {
		return corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: kubenames.Object(name), ReadOnly: ro}}}
	}
	res := corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
		Requests: corev1.ResourceList{corev1.ResourceCPU: d.cpuRequest, corev1.ResourceMemory: mem},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "copy-" + kubenames.ShortHash(dst+"\x00"+strconv.FormatInt(time.Now().UnixNano(), 10)), Namespace: d.cfg.Namespace,
			Labels: map[string]string{kubenames.LabelManagedBy: kubenames.ManagedBy, kubenames.Prefix + "copy": "true"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, ActiveDeadlineSeconds: &deadline,
			AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes, FSGroup: &uid,
				SeccompProfile: seccomp},
			Containers: []corev1.Container{{
				Name: containerName, Image: image, ImagePullPolicy: pullPolicy,
				Command: []string{"sh", "-c", copyScript},
				Env:     []corev1.EnvVar{{Name: "LIMIT", Value: strconv.FormatInt(limit, 10)}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "src", MountPath: "/src", ReadOnly: true},
					{Name: "dst", MountPath: "/dst"},
				},
				Resources: res,
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes, Privileged: &no, AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: seccomp,
				},
			}},
			Volumes: []corev1.Volume{claim(src, "src", true), claim(dst, "dst", false)},
		},
	}
	if !d.cfg.NoWorkspaceChown {
		pod.Spec.InitContainers = []corev1.Container{chownInit(image, pullPolicy, "dst", "/dst", res)}
	}
	return pod
}

var _ sandboxes.VolumeCopier = (*Driver)(nil)
