package charttest

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDiskStatefulSet: on the disk store the service is a StatefulSet of one pod whose
// PersistentVolumeClaim (persistence.*) is mounted at /var/lib/leash, the directory
// LEASH_STORE_DISK_PATH names; the claim outlives the release, and the pod's fsGroup
// lets the nonroot user write it. No Deployment is rendered beside it.
func TestDiskStatefulSet(t *testing.T) {
	r := render(t, scenario{name: "disk", release: "leash", namespace: "leash",
		v: values{files: []string{examplesDir + "/values-disk.yaml"}, set: []string{"persistence.storageClassName=fast"}}})
	if deps := objectsOf[*appsv1.Deployment](r.ms); len(deps) != 0 {
		t.Fatalf("a Deployment beside the StatefulSet: %d", len(deps))
	}
	sts := only[*appsv1.StatefulSet](t, r.ms)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", sts.Spec.Replicas)
	}
	if sts.Spec.ServiceName != "leash" {
		t.Errorf("serviceName %q, want the chart's Service leash", sts.Spec.ServiceName)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("volumeClaimTemplates: %d, want 1", len(sts.Spec.VolumeClaimTemplates))
	}
	claim := sts.Spec.VolumeClaimTemplates[0]
	if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("5Gi")) != 0 {
		t.Errorf("claim size %s, want values-disk.yaml's 5Gi", got.String())
	}
	if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != "fast" {
		t.Errorf("storageClassName %v, want fast", claim.Spec.StorageClassName)
	}
	if !slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("access modes %v", claim.Spec.AccessModes)
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("claim retention %+v: an uninstall must keep the data", p)
	}
	pod := sts.Spec.Template.Spec
	c := leashContainer(t, pod)
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == claim.Name && m.MountPath == "/var/lib/leash" && !m.ReadOnly
	}) {
		t.Errorf("the container does not mount %s at /var/lib/leash: %+v", claim.Name, c.VolumeMounts)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LEASH_STORE_DISK_PATH" && e.Value == "/var/lib/leash" }) {
		t.Errorf("LEASH_STORE_DISK_PATH is not /var/lib/leash: %+v", c.Env)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != 65532 {
		t.Errorf("pod fsGroup %+v: the nonroot user cannot write the claim", pod.SecurityContext)
	}
	// The StatefulSet controller gives the pod the claim as a volume of the same name.
	pod.Volumes = append(slices.Clone(pod.Volumes), corev1.Volume{Name: claim.Name,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}})
	l := loadContainerConfig(t, pod, c, r.all())
	if l.cfg.Store.Backend != "disk" {
		t.Errorf("the pod's config runs on %q", l.cfg.Store.Backend)
	}
}
