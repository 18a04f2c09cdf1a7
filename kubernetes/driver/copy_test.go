package driver

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandgate/sandgate/sandboxes"
)

func copyExit(code int32, message string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		phase := corev1.PodSucceeded
		if code != 0 {
			phase = corev1.PodFailed
		}
		pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message}}}}}
	}
}

// TestCopyVolume checks the copy Pod's outcome: counts read back, the byte limit typed, a failure leaving no new
// claim, and a copy never going into a claim that is not the one it was asked to make.
func TestCopyVolume(t *testing.T) {
	labels := map[string]string{"sg.managed": "true", "sg.workspace": "ws-2"}
	cases := []struct {
		name     string
		fate     func(*corev1.Pod)
		existing map[string]string // labels of a dst claim that exists already
		check    func(*testing.T, sandboxes.CopyStats, error)
		dstLeft  bool
	}{
		{name: "copied", fate: copyExit(0, `{"bytes":1234,"files":3,"dirs":1}`), dstLeft: true,
			check: func(t *testing.T, st sandboxes.CopyStats, err error) {
				if err != nil || st.Bytes != 1234 || st.Files != 3 || st.Dirs != 1 || st.Method != "copy-pod" {
					t.Fatalf("stats %+v, %v", st, err)
				}
			}},
		{name: "into the claim CreateVolume made", fate: copyExit(0, `{"bytes":0,"files":0,"dirs":0}`), existing: labels, dstLeft: true,
			check: func(t *testing.T, _ sandboxes.CopyStats, err error) {
				if err != nil {
					t.Fatal(err)
				}
			}},
		{name: "too large", fate: copyExit(exitTooLarge, "999 bytes"),
			check: func(t *testing.T, _ sandboxes.CopyStats, err error) {
				if !errors.Is(err, sandboxes.ErrSnapshotTooLarge) {
					t.Fatalf("want ErrSnapshotTooLarge, got %v", err)
				}
			}},
		{name: "copy fails", fate: copyExit(1, "cp: No space left on device"),
			check: func(t *testing.T, _ sandboxes.CopyStats, err error) {
				if err == nil || errors.Is(err, sandboxes.ErrSnapshotTooLarge) {
					t.Fatalf("want a copy error, got %v", err)
				}
			}},
		{name: "someone else's claim", existing: map[string]string{"other": "x"}, dstLeft: true,
			check: func(t *testing.T, _ sandboxes.CopyStats, err error) {
				if err == nil {
					t.Fatal("copied into a claim that was not ours")
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			d, cs := testDriver(t, Config{})
			cs.PrependReactor("create", "pods", (&kubelet{fate: tc.fate}).react)
			if err := d.CreateVolume(ctx, "sg-ws-1", map[string]string{"sg.managed": "true"}); err != nil {
				t.Fatal(err)
			}
			if tc.existing != nil {
				if err := d.CreateVolume(ctx, "sg-ws-2", tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			st, err := d.CopyVolume(ctx, "sg-ws-1", "sg-ws-2", labels, 500)
			tc.check(t, st, err)
			_, gerr := cs.CoreV1().PersistentVolumeClaims("sbx").Get(ctx, "sg-ws-2", metav1.GetOptions{})
			if (gerr == nil) != tc.dstLeft {
				t.Errorf("destination claim left %v, want %v", gerr == nil, tc.dstLeft)
			}
			if n := podCount(t, d); n != 0 {
				t.Errorf("%d copy pods left", n)
			}
		})
	}
	t.Run("copy pod hardening", func(t *testing.T) {
		d, _ := testDriver(t, Config{CopyImage: "img:1"})
		pod := d.copyPodFor("a", "b", 0)
		c := pod.Spec.Containers[0]
		if c.Image != "img:1" || *c.SecurityContext.RunAsUser != SandboxUID || *c.SecurityContext.AllowPrivilegeEscalation ||
			!*c.SecurityContext.ReadOnlyRootFilesystem || *pod.Spec.AutomountServiceAccountToken || pod.Spec.ActiveDeadlineSeconds == nil {
			t.Errorf("copy pod: %+v", pod.Spec)
		}
		if !pod.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly || !c.VolumeMounts[0].ReadOnly {
			t.Error("the source is mounted writable")
		}
	})
}
